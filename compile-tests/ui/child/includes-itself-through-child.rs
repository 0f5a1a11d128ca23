use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Order {
    id: u64,
}

async fn check(order: Order) -> Result<u64, StepError> {
    Ok(order.id)
}

workflow! {
    pub workflow Fulfil(order: Order) {
        step checked -> u64 {
            action: check(order),
        }
        step ship -> ShippingOutputs {
            workflow: Shipping(order),
        }
    }
}

workflow! {
    pub workflow Shipping(order: Order) {
        step refulfil -> FulfilOutputs {
            workflow: Fulfil(order),
        }
    }
}

fn main() {}

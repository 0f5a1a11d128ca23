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
        step again -> FulfilOutputs {
            workflow: Fulfil(order),
        }
    }
}

fn main() {}

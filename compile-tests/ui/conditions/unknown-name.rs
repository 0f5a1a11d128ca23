use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Order {
    total: u64,
}

async fn ship() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Shipping(order: Order) {
        step ship_order -> () {
            action: ship(),
            condition: ordr.total > 0,
        }
    }
}

fn main() {}

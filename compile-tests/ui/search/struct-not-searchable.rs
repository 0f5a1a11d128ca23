use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub id: u64,
    pub customer_id: String,
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Customer {
    pub id: String,
}

async fn charge(_order: Order) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Charge(order: Order, customer: Customer) {
        search: [customer],
        step charge -> () {
            action: charge(order),
        }
    }
}

fn main() {}

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub customer_id: String,
    pub cart_id: String,
    pub merchant_id: u64,
    pub tier: u8,
    pub lines: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Receipt {
    pub id: String,
    pub at: std::time::Duration,
}

async fn charge(_order: Order) -> Result<Receipt, StepError> {
    Ok(Receipt { id: "r-1".into(), at: std::time::Duration::ZERO })
}

async fn notify(_order: Order) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Charge(order: Order) {
        concurrency: { key: order.customer_id, limit: 1 },
        concurrency: { key: order.cart_id, limit: 1 },
        step charge -> Receipt {
            action: charge(order),
        }
    }
}

fn main() {}

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;
use workflow_core::SearchValue;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CustomerId(String);

impl SearchValue for CustomerId {
    fn search_value(&self) -> Option<String> {
        Some(self.0.clone())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub id: u64,
    pub customer: CustomerId,
    pub coupon: Option<String>,
}

async fn charge(_order: Order) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    /// Every key about finding and keeping runs.
    pub workflow Charge(order: Order, region: String) {
        search: [order.id, order.customer, order.coupon, region],
        retention: 30d,
        step charge -> () {
            action: charge(order),
        }
    }
}

fn main() {
    let spec = Charge::spec();
    assert_eq!(spec.search.len(), 4);
    assert_eq!(spec.search[1].name, "customer");
    assert_eq!(spec.retention, Some(std::time::Duration::from_secs(30 * 86_400)));
}

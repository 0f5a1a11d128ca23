use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub customer_id: String,
    pub cart_id: Option<String>,
    pub merchant_id: u64,
    pub tier: u8,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Quote {
    pub region: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Receipt {
    pub id: String,
}

async fn price(_order: Order) -> Result<Quote, StepError> {
    Ok(Quote { region: "eu".into() })
}

async fn charge(_order: Order, _quote: Quote) -> Result<Receipt, StepError> {
    Ok(Receipt { id: "r-1".into() })
}

async fn ship(_line: String) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    /// Every flow control key at once.
    pub workflow Charge(order: Order, lines: Vec<String>) {
        concurrency: { key: order.customer_id, limit: 1, on_limit: cancel_previous },
        priority: order.tier,
        debounce: { key: order.cart_id, window: 5s, max_wait: 1m },
        step price -> Quote {
            action: price(order),
            concurrency: { key: "pricing", limit: 50 },
        }
        step charge -> Receipt {
            action: charge(order, price),
            concurrency: { key: price.region, limit: 5 },
            rate: { key: order.merchant_id, limit: 100, per: 1m, burst: 20 },
        }
        step ship -> () {
            for_each: line in lines,
            concurrency: 4,
            concurrency: { key: "carrier", limit: 10 },
            rate: { key: "carrier", limit: 5, per: 1s },
            action: ship(line),
            depends_on: [charge],
        }
    }
}

workflow! {
    /// A literal priority and a static key.
    pub workflow Refund(order: Order) {
        concurrency: { key: "refunds", limit: 3 },
        priority: -2,
        step price -> Quote { action: price(order) }
    }
}

fn main() {
    use workflow_core::spec::{LimitKey, OnLimit};
    let spec = Charge::spec();
    let concurrency = spec.concurrency.as_ref().expect("workflow concurrency");
    assert_eq!(concurrency.key, LimitKey::Path("order.customer_id".into()));
    assert_eq!(concurrency.on_limit, OnLimit::CancelPrevious);
    assert_eq!(spec.priority.as_deref(), Some("order.tier"));
    assert_eq!(spec.steps[2].for_each().map(|each| each.concurrency), Some(4));
    assert_eq!(spec.steps[2].rate.as_ref().map(|rate| rate.burst), Some(1));
    assert_eq!(Refund::spec().priority.as_deref(), Some("-2"));
}

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Order {
    id: u64,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Parcel {
    order: u64,
}

async fn pack(order: Order, fragile: bool) -> Result<Parcel, StepError> {
    let _ = fragile;
    Ok(Parcel { order: order.id })
}

workflow! {
    /// Packs an order.
    pub workflow Shipping(order: Order, fragile: bool) {
        step pack_order -> Parcel {
            action: pack(order, fragile),
        }
    }
}

workflow! {
    pub workflow Fulfil(order: Order) {
        step ship -> ShippingOutputs {
            workflow: Shipping(order),
        }
    }
}

fn main() {}

//! The `Fulfil` spec of DESIGN.md ("Language: map, sub-workflows, events"), copied
//! verbatim, with just enough support code to compile: a `Shipping` workflow for the child
//! step, and the types and functions the spec names.

use workflow_core::prelude::*;

workflow! {
    pub workflow Fulfil(order: Order) env Shop {
        // map: one action per item, each item journaled and keyed on its own
        step reserve_lines -> Hold {
            for_each: line in order.lines,         // any IntoIterator over inputs/upstream
            action: stock::reserve(env, ctx, line), // `line` is passed owned
            concurrency: 8,                         // items in flight at once (default 16)
            retry: { max_attempts: 3 },             // per item; timeout too
            on_item_failure: abort,                 // abort (default) | skip
        }
        // a child workflow run, durable, linked to its parent
        step ship -> ShippingOutputs {
            workflow: Shipping(order: order, holds: reserve_lines),
        }
        // a typed event sent into the run from outside
        event payment -> PaymentConfirmed {
            depends_on: [reserve_lines],
            timeout: 1h,
            on_timeout: abort,                      // abort | continue (downstream sees None)
        }
    }
}

workflow! {
    /// Packs and ships an order whose lines are reserved.
    pub workflow Shipping(order: Order, holds: Vec<Hold>) env Shop {
        step pack -> Parcel {
            action: shipping::pack(order, holds),
        }
    }
}

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Order {
    id: u64,
    lines: Vec<Line>,
}
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Line {
    sku: String,
    quantity: u32,
}
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Hold {
    sku: String,
    quantity: u32,
}
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Parcel {
    order: u64,
    items: u32,
}
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PaymentConfirmed {
    amount_cents: u64,
}

#[derive(Default)]
pub struct Shop;

mod stock {
    use super::*;
    pub async fn reserve(_env: &Shop, ctx: &StepContext, line: Line) -> Result<Hold, StepError> {
        let _ = &ctx.idempotency_key;
        Ok(Hold {
            sku: line.sku,
            quantity: line.quantity,
        })
    }
}

mod shipping {
    use super::*;
    pub async fn pack(order: Order, holds: Vec<Hold>) -> Result<Parcel, StepError> {
        Ok(Parcel {
            order: order.id,
            items: holds.iter().map(|hold| hold.quantity).sum(),
        })
    }
}

fn main() {
    let spec = Fulfil::spec();
    let map = spec.steps[0].for_each().expect("a map step");
    assert_eq!((map.binding.as_str(), map.source.as_str()), ("line", "order.lines"));
    assert_eq!(map.concurrency, 8);
    assert_eq!(spec.steps[0].output_type(), "Vec<Hold>");
    let child = spec.steps[1].child().expect("a child step");
    assert_eq!(child.workflow, "Shipping");
    assert_eq!(child.name.as_deref(), Some("Shipping"));
    assert!(spec.steps[2].is_event());
    assert_eq!(<Fulfil as Workflow>::CHILD_DEPTH, 1);
    assert_eq!(<Shipping as Workflow>::CHILD_DEPTH, 0);
    // The outputs: a `Vec` for the map, the child's outputs (boxed), the payload.
    let _: fn(FulfilOutputs) -> (Vec<Hold>, ShippingOutputs, PaymentConfirmed) =
        |outputs| (outputs.reserve_lines, *outputs.ship, outputs.payment);
}

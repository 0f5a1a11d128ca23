use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Order {
    lines: Vec<Line>,
    count: u32,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Line {
    sku: String,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Hold {
    sku: String,
}

async fn reserve(line: Line) -> Result<Hold, StepError> {
    Ok(Hold { sku: line.sku })
}

workflow! {
    pub workflow Fulfil(order: Order) {
        step reserve_lines -> Hold {
            for_each: line in order.lines,
            action: reserve(line),
            condition: !line.sku.is_empty(),
        }
    }
}

fn main() {}

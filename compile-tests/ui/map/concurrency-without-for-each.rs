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

async fn reserve_first(order: Order) -> Result<Hold, StepError> {
    let line = order.lines.into_iter().next().ok_or_else(|| StepError::validation("no lines"))?;
    reserve(line).await
}

workflow! {
    pub workflow Fulfil(order: Order) {
        step reserve_lines -> Hold {
            action: reserve_first(order),
            concurrency: 4,
        }
    }
}

fn main() {}

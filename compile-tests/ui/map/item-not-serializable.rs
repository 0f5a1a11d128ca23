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

/// A line being edited: not journaled, so not serializable.
pub struct Draft(Line);

impl From<Line> for Draft {
    fn from(line: Line) -> Self {
        Draft(line)
    }
}

async fn reserve_draft(draft: Draft) -> Result<Hold, StepError> {
    reserve(draft.0).await
}

workflow! {
    pub workflow Fulfil(order: Order) {
        step reserve_lines -> Hold {
            for_each: line in order.lines.into_iter().map(Draft::from),
            action: reserve_draft(line),
        }
    }
}

fn main() {}

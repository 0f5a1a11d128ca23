use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize, DecisionForm)]
pub struct RefundDecision {
    approved: bool,
    tags: Vec<String>,
}

fn main() {}

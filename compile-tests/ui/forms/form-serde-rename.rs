use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize, DecisionForm)]
pub struct RefundDecision {
    approved: bool,
    #[serde(rename = "amount")]
    amount_cents: u64,
}

fn main() {}

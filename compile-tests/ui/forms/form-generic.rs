use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize, DecisionForm)]
pub struct RefundDecision<T> {
    approved: bool,
    amount: T,
}

fn main() {}

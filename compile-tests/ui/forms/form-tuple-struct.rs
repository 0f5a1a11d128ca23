use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize, DecisionForm)]
pub struct RefundDecision(bool, u64);

fn main() {}

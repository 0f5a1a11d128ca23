use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize, DecisionForm)]
pub enum Reason {
    Damaged,
    Other(String),
}

fn main() {}

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

/// A form a timeout cannot fill in: how much would it refund?
#[derive(Clone, Serialize, Deserialize, DecisionForm)]
pub struct RefundDecision {
    approved: bool,
    amount_cents: u64,
}

workflow! {
    pub workflow Refunds() {
        human approve -> RefundDecision {
            assignee: "finance",
            timeout: 24h,
            on_timeout: approve,
        }
    }
}

fn main() {}

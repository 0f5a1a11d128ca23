use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

/// A decision with a limit, which `on_timeout: approve` cannot make up.
#[derive(Clone, Serialize, Deserialize)]
pub struct CreditDecision {
    approved: bool,
    limit: u64,
}

workflow! {
    pub workflow Credit() {
        human credit_review -> CreditDecision {
            assignee: "credit_team",
            timeout: 24h,
            on_timeout: approve,
        }
    }
}

fn main() {}

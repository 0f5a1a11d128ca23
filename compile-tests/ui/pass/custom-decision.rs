//! A human step with its own decision type. `on_timeout: approve | reject` needs
//! `From<Approval>`; `escalate` does not.

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

/// A credit decision: approved or not, with a limit.
#[derive(Clone, Serialize, Deserialize)]
pub struct CreditDecision {
    approved: bool,
    limit: u64,
}

impl From<Approval> for CreditDecision {
    fn from(approval: Approval) -> Self {
        CreditDecision {
            approved: approval.approved,
            limit: 0,
        }
    }
}

/// A decision that only people make.
#[derive(Clone, Serialize, Deserialize)]
pub struct Tier {
    name: String,
}

async fn open_account(decision: CreditDecision, tier: Tier) -> Result<u64, StepError> {
    let _ = tier.name;
    Ok(decision.limit)
}

workflow! {
    pub workflow Credit() {
        human credit_review -> CreditDecision {
            assignee: "credit_team",
            timeout: 24h,
            on_timeout: reject,
        }
        human tier_review -> Tier {
            assignee: "sales",
            prompt: "Which tier?",
            timeout: 1h,
            on_timeout: escalate("sales_leads"),
        }
        step open -> u64 {
            action: open_account(credit_review, tier_review),
            condition: credit_review.approved && credit_review.limit > 0,
        }
    }
}

fn main() {
    let _ = Credit::MERMAID;
}

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Refund {
    amount_cents: u64,
    customer: String,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Assessment {
    note: String,
}

async fn assess_refund(refund: Refund) -> Result<Assessment, StepError> {
    Ok(Assessment { note: refund.customer })
}

workflow! {
    pub workflow Refunds(refund: Refund) {
        step assess -> Assessment {
            action: assess_refund(refund),
        }
        human approve -> Approval {
            assignee: "finance",
            depends_on: [assess],
            timeout: 24h,
            on_timeout: escalate("finance_leads"),
            show: [refund.amount_cents, assess.notes],
        }
    }
}

fn main() {}

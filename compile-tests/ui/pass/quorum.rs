//! A human step with every quorum and presentation key; a placeholder may read a field of
//! a maybe-absent upstream step.

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
    Ok(Assessment {
        note: refund.customer,
    })
}

workflow! {
    pub workflow Refunds(refund: Refund) {
        step assess -> Assessment {
            action: assess_refund(refund),
            on_failure: continue,
        }
        human approve -> Approval {
            assignee: "finance",
            approvals: 2,
            self_approval: false,
            title: "Refund {refund.amount_cents} for {refund.customer} ({assess.note}, {{vip}})",
            show: [refund.amount_cents, refund.customer, assess.note, assess],
            depends_on: [assess],
            timeout: 24h,
            on_timeout: escalate("finance_leads"),
        }
    }
}

fn main() {
    let spec = Refunds::spec();
    let workflow_core::spec::StepKind::Human(human) = &spec.steps[1].kind else {
        panic!("a human step");
    };
    assert_eq!(human.approvals, 2);
    assert!(!human.self_approval);
}

//! A human step whose decision is a form: typed fields, a choice, optional fields.

use serde::{Deserialize, Serialize};
use workflow_core::form::{FieldKind, FormField};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize, DecisionForm)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Damaged,
    LateDelivery,
}

#[derive(Clone, Serialize, Deserialize, DecisionForm)]
pub struct RefundDecision {
    approved: bool,
    amount_cents: u32,
    reason: Reason,
    note: Option<String>,
    r#override: Option<bool>,
}

async fn pay(decision: RefundDecision) -> Result<u32, StepError> {
    let _ = (decision.reason, decision.note, decision.r#override);
    Ok(decision.amount_cents)
}

workflow! {
    pub workflow Refunds() {
        human approve -> RefundDecision {
            assignee: "finance",
            timeout: 24h,
            on_timeout: escalate("finance_leads"),
        }
        step refund -> u32 {
            action: pay(approve),
            condition: approve.approved,
        }
    }
}

fn main() {
    let fields = <Refunds as Workflow>::decision_form(0).expect("a form");
    assert_eq!(
        fields[2],
        FormField {
            name: "reason",
            kind: FieldKind::Choice {
                choices: vec!["damaged".into(), "late_delivery".into()]
            },
            required: true,
        }
    );
    assert_eq!(fields[4].name, "override");
    assert!(!fields[3].required);
    assert!(<Refunds as Workflow>::decision_form(1).is_none());
}

//! Approvals with a quorum, end to end through the engine: distinct approvers, the run's
//! initiator kept out, delegation, and a decision form checked field by field. The 24-hour
//! deadlines run under paused time.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;
use workflow_core::testing;
use workflow_core::DecisionError;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Refund {
    amount_cents: u64,
    customer: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, DecisionForm)]
pub enum Reason {
    Damaged,
    Late,
}

/// What finance decides about a refund: how much, and why.
#[derive(Clone, Debug, Serialize, Deserialize, DecisionForm)]
pub struct RefundDecision {
    approved: bool,
    amount_cents: u32,
    reason: Reason,
    note: Option<String>,
}

async fn pay(refund: Refund, decision: Option<RefundDecision>) -> Result<u64, StepError> {
    let decision = decision.ok_or_else(|| StepError::validation("not settled"))?;
    let _ = (refund.customer, decision.reason, decision.note);
    Ok(u64::from(decision.amount_cents).min(refund.amount_cents))
}

workflow! {
    workflow Refunds(refund: Refund) {
        human approve -> Approval {
            assignee: "finance",
            approvals: 2,
            self_approval: false,
            title: "Refund {refund.amount_cents} for {refund.customer}",
            show: [refund.amount_cents],
            timeout: 24h,
            on_timeout: escalate("finance_leads"),
        }
        human settle -> RefundDecision {
            assignee: "finance",
            depends_on: [approve],
            condition: approve.approved,
            timeout: 24h,
            on_timeout: abort,
        }
        step refund_paid -> u64 {
            action: pay(refund, settle),
            condition: settle.as_ref().is_some_and(|s| s.approved),
        }
    }
}

const WAIT: Duration = Duration::from_secs(60);

async fn started(initiator: &str) -> (Engine, RunHandle<Refunds>) {
    let engine = Engine::builder()
        .authorizer(|assignee, by| by.ends_with(&format!("@{assignee}")))
        .build();
    engine.register::<Refunds>(()).unwrap();
    let run = engine
        .start_with::<Refunds>(
            RefundsInput {
                refund: Refund {
                    amount_cents: 4200,
                    customer: "Ada".into(),
                },
            },
            StartOptions::default().initiator(initiator),
        )
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "approve", WAIT)
        .await
        .unwrap();
    (engine, run)
}

#[tokio::test(start_paused = true)]
async fn two_distinct_approvers_who_did_not_start_the_run_approve_it() {
    let (engine, run) = started("ana@finance").await;
    assert_eq!(
        run.approve().approve("ana@finance", None).await,
        Err(DecisionError::SelfApproval {
            step: "approve".into(),
            by: "ana@finance".into()
        })
    );
    run.approve()
        .approve("bob@finance", Some("ok"))
        .await
        .unwrap();
    assert!(
        run.approve().info().await.is_some(),
        "one approval of two leaves the task open"
    );
    assert_eq!(
        run.approve().approve("bob@finance", None).await,
        Err(DecisionError::AlreadyApproved {
            step: "approve".into(),
            by: "bob@finance".into()
        })
    );
    run.approve().approve("cy@finance", None).await.unwrap();
    testing::wait_for_task(&engine, run.id(), "settle", WAIT)
        .await
        .unwrap();
    let events = testing::events(&engine, run.id()).await.unwrap();
    let timeline = testing::timeline(Refunds::spec(), &events);
    for line in [
        "initiated by ana@finance",
        "task_approved approve by bob@finance",
        "task_decided approve by cy@finance",
    ] {
        assert!(
            timeline.contains(&line.to_owned()),
            "{line} in {timeline:#?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_decision_form_is_checked_field_by_field_and_journaled_typed() {
    let (engine, run) = started("ana@finance").await;
    run.approve().approve("bob@finance", None).await.unwrap();
    run.approve().approve("cy@finance", None).await.unwrap();
    testing::wait_for_task(&engine, run.id(), "settle", WAIT)
        .await
        .unwrap();
    let fields = engine.decision_form("Refunds", "settle").expect("a form");
    assert_eq!(fields.len(), 4);
    assert!(engine.decision_form("Refunds", "approve").is_none());
    let refused = engine
        .decide(
            run.id(),
            "settle",
            "bob@finance",
            serde_json::json!({"approved": true, "amount_cents": "lots", "reason": "Late"}),
        )
        .await;
    assert!(
        matches!(&refused, Err(DecisionError::WrongType { message, .. }) if message.contains("amount_cents")),
        "{refused:?}"
    );
    run.settle()
        .decide(
            "bob@finance",
            RefundDecision {
                approved: true,
                amount_cents: 5000,
                reason: Reason::Damaged,
                note: None,
            },
        )
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.refund_paid, Some(4200));
    let settled = outputs.settle.expect("settled");
    assert_eq!(settled.amount_cents, 5000);
    assert!(matches!(settled.reason, Reason::Damaged));
}

#[tokio::test(start_paused = true)]
async fn a_delegated_task_is_decided_by_the_delegate() {
    let (engine, run) = started("ana@finance").await;
    assert!(matches!(
        run.approve().delegate("eve@sales", "legal").await,
        Err(DecisionError::Unauthorized { .. })
    ));
    run.approve().approve("bob@finance", None).await.unwrap();
    // Four eyes: who approved may not choose who completes the quorum, and a delegate is
    // someone the authorizer admits for the assignee or the escalation target.
    assert!(matches!(
        run.approve().delegate("bob@finance", "cy@finance").await,
        Err(DecisionError::ApproverDelegating { .. })
    ));
    assert!(matches!(
        run.approve().delegate("cy@finance", "legal").await,
        Err(DecisionError::DelegateNotAdmitted { .. })
    ));
    assert!(matches!(
        run.approve().delegate("cy@finance", "bob@finance").await,
        Err(DecisionError::DelegateApproved { .. })
    ));
    assert!(matches!(
        run.approve().delegate("cy@finance", "ana@finance").await,
        Err(DecisionError::DelegateIsInitiator { .. })
    ));
    run.approve()
        .delegate("cy@finance", "lee@finance_leads")
        .await
        .unwrap();
    let task = run.approve().info().await.expect("still open");
    assert_eq!(task.assignee, "lee@finance_leads");
    assert!(matches!(
        run.approve().approve("cy@finance", None).await,
        Err(DecisionError::Unauthorized { .. })
    ));
    // The person it was handed to decides it, though this authorizer admits only
    // members of a group.
    run.approve()
        .approve("lee@finance_leads", None)
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "settle", WAIT)
        .await
        .unwrap();
    let events = testing::events(&engine, run.id()).await.unwrap();
    assert!(testing::timeline(Refunds::spec(), &events)
        .contains(&"task_delegated approve by cy@finance to lee@finance_leads".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_webhook_initiator_keeps_no_approver_out() {
    let (_engine, run) = started("webhook /hooks/refunds").await;
    run.approve().approve("ana@finance", None).await.unwrap();
    run.approve().approve("bob@finance", None).await.unwrap();
    assert!(run.approve().info().await.is_none(), "decided");
}

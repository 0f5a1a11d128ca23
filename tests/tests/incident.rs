//! The failure-handling seed's incident, as a permanent regression test.
//!
//! A signed ticket webhook is delivered three times; the classifier marks an ambiguous
//! message as urgent; the alert it proposes needs a human's approval; the alert service
//! times out *after* it sent the alert. Before the fix, the retry handler posted three
//! alerts because idempotency was recorded after the side effect. Now: exactly one run,
//! exactly one alert, and a second alert never happens.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;
use workflow_core::testing::{self, Recorder, Script};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Webhook {
    event_id: String,
    signature: String,
    ticket_id: String,
    text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    id: String,
    text: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Triage {
    urgent: bool,
    ambiguous: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlertId(String);

/// The recording adapters standing in for the outside world.
pub struct Adapters {
    /// Alerts the alert service actually delivered, by idempotency key.
    delivered: Recorder<String>,
    /// What the alert service does on each call.
    alert_service: Script<AlertId>,
}

mod triage {
    use super::*;

    pub async fn verify(_env: &Adapters, hook: Webhook) -> Result<Ticket, StepError> {
        // Verify the signature before parsing anything else.
        if hook.signature != "test-valid" {
            return Err(StepError::unauthorized("bad webhook signature"));
        }
        Ok(Ticket {
            id: hook.ticket_id,
            text: hook.text,
        })
    }

    pub async fn classify(_env: &Adapters, ticket: Ticket) -> Result<Triage, StepError> {
        let urgent = ticket.text.contains("locked out") || ticket.text.contains("today");
        Ok(Triage {
            urgent,
            ambiguous: ticket.text.starts_with("Maybe"),
        })
    }

    pub async fn send_alert(
        env: &Adapters,
        ctx: &StepContext,
        ticket: Ticket,
    ) -> Result<AlertId, StepError> {
        // The service delivers (keyed by the idempotency key), then may time out on the reply.
        let outcome = env.alert_service.next().await;
        if outcome.is_ok()
            || outcome
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::Timeout)
        {
            env.delivered
                .record(format!("{} for {}", ctx.idempotency_key, ticket.id));
        }
        outcome
    }

    pub async fn find_alert(
        env: &Adapters,
        ctx: &StepContext,
    ) -> Result<Option<AlertId>, StepError> {
        let sent = env
            .delivered
            .calls()
            .iter()
            .any(|call| call.starts_with(&ctx.idempotency_key));
        Ok(sent.then(|| AlertId(format!("alert:{}", ctx.idempotency_key))))
    }
}

workflow! {
    /// Triage a support ticket; an urgent alert needs a person's approval.
    pub workflow TicketTriage(hook: Webhook) env Adapters {
        step verify -> Ticket {
            action: triage::verify(env, hook),
        }
        step classify -> Triage {
            action: triage::classify(env, verify),
        }
        human approve_alert -> Approval {
            assignee: "support_leads",
            depends_on: [classify],
            condition: classify.urgent,
            timeout: 2h,
            on_timeout: escalate("on_call"),
            prompt: "The classifier proposes an urgent alert. Send it?",
        }
        step send_alert -> AlertId {
            action: triage::send_alert(env, ctx, verify),
            depends_on: [approve_alert],
            condition: approve_alert.is_some_and(|a| a.approved),
            effect: external,
            reconcile: triage::find_alert(env, ctx),
            retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 30s, jitter: full },
            timeout: 10s,
        }
    }
}

fn webhook() -> Webhook {
    Webhook {
        event_id: "evt_884".into(),
        signature: "test-valid".into(),
        ticket_id: "T-91".into(),
        text: "Maybe locked out; payroll closes today".into(),
    }
}

struct Outcome {
    runs: Vec<RunId>,
    delivered: Vec<String>,
    service_calls: usize,
    timeline: Vec<String>,
    alert: Option<AlertId>,
}

async fn incident() -> Outcome {
    let delivered = Recorder::new();
    let alert_service = Script::new()
        .timeout_after_effect(AlertId("a-1".into()))
        .succeed(AlertId("a-2".into()));
    let engine = Engine::builder()
        .seed(884)
        .clock(workflow_core::clock::TokioClock::starting_at(
            1_784_351_400_000,
        ))
        .build();
    engine
        .register::<TicketTriage>(Adapters {
            delivered: delivered.clone(),
            alert_service: alert_service.clone(),
        })
        .unwrap();
    // The webhook arrives three times.
    let mut runs = Vec::new();
    for _ in 0..3 {
        let hook = webhook();
        let options = StartOptions::key(hook.event_id.clone());
        runs.push(
            engine
                .start_with::<TicketTriage>(TicketTriageInput { hook }, options)
                .await
                .unwrap(),
        );
    }
    let run = &runs[0];
    {
        testing::wait_for_task(&engine, run.id(), "approve_alert", Duration::from_secs(60))
            .await
            .unwrap();
        run.approve_alert()
            .approve("lee@support_leads", Some("confirmed with customer"))
            .await
            .unwrap();
    }
    let outputs = run.outputs().await.unwrap();
    // Long after: nothing else may happen.
    tokio::time::sleep(Duration::from_secs(7 * 24 * 3600)).await;
    let events = testing::events(&engine, run.id()).await.unwrap();
    Outcome {
        runs: runs.iter().map(|r| r.id()).collect(),
        delivered: delivered.calls(),
        service_calls: alert_service.calls(),
        timeline: testing::timeline(TicketTriage::spec(), &events),
        alert: outputs.send_alert,
    }
}

#[tokio::test(start_paused = true)]
async fn a_webhook_delivered_three_times_sends_exactly_one_alert() {
    let outcome = incident().await;
    // Exactly one run for the three deliveries.
    assert!(outcome.runs.iter().all(|id| *id == outcome.runs[0]));
    // Exactly one alert, although the service timed out after delivering it.
    assert_eq!(
        outcome.delivered.len(),
        1,
        "alerts delivered: {:?}",
        outcome.delivered
    );
    assert_eq!(
        outcome.service_calls, 1,
        "the retry reconciled instead of calling the service again"
    );
    // The negative assertion: a second alert never happens.
    assert!(!outcome.delivered.iter().skip(1).any(|_| true));
    assert_eq!(
        outcome.alert,
        Some(AlertId(format!(
            "alert:TicketTriage/{}/send_alert",
            outcome.runs[0].0
        )))
    );
    assert_eq!(
        outcome.timeline,
        [
            "run_started TicketTriage",
            "attempt_started verify #1",
            "step_succeeded verify",
            "attempt_started classify #1",
            "step_succeeded classify",
            "task_opened approve_alert for support_leads",
            "task_decided approve_alert by lee@support_leads",
            "attempt_started send_alert #1",
            "attempt_failed send_alert #1 timeout",
            "attempt_started send_alert #2",
            "step_succeeded send_alert",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_same_scenario_twice_records_the_same_events() {
    let first = incident().await;
    let second = incident().await;
    assert_eq!(first.timeline, second.timeline);
    assert_eq!(first.delivered, second.delivered);
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_proposes_the_alert_and_sends_nothing() {
    let delivered = Recorder::new();
    let alert_service: Script<AlertId> = Script::new().succeed(AlertId("a".into()));
    let engine = Engine::builder().build();
    engine
        .register::<TicketTriage>(Adapters {
            delivered: delivered.clone(),
            alert_service: alert_service.clone(),
        })
        .unwrap();
    let options = StartOptions {
        dry_run: true,
        ..StartOptions::default()
    };
    let run = engine
        .start_with::<TicketTriage>(TicketTriageInput { hook: webhook() }, options)
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "approve_alert", Duration::from_secs(60))
        .await
        .unwrap();
    run.approve_alert()
        .approve("lee@support_leads", None)
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.send_alert, None);
    assert_eq!(delivered.count(), 0);
    assert_eq!(alert_service.calls(), 0);
    let proposals = run.proposals().await.unwrap();
    assert_eq!(proposals.len(), 1);
    assert_eq!(proposals[0].0, "send_alert");
    assert_eq!(proposals[0].1["verify"]["id"], "T-91");
}

#[tokio::test(start_paused = true)]
async fn a_bad_signature_is_rejected_before_anything_else_in_one_attempt() {
    let delivered = Recorder::new();
    let engine = Engine::builder().build();
    engine
        .register::<TicketTriage>(Adapters {
            delivered: delivered.clone(),
            alert_service: Script::new(),
        })
        .unwrap();
    let mut hook = webhook();
    hook.signature = "forged".into();
    let run = engine
        .start::<TicketTriage>(TicketTriageInput { hook })
        .await
        .unwrap();
    match run.outputs().await {
        Err(RunError::Failed {
            step,
            attempts,
            error,
            ..
        }) => {
            assert_eq!(
                (step.as_str(), attempts, error.kind()),
                ("verify", 1, ErrorKind::Unauthorized)
            );
        }
        other => panic!("expected the run to fail, got ok={}", other.is_ok()),
    }
    assert_eq!(delivered.count(), 0);
}

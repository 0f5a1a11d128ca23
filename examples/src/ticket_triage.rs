//! The failure-handling seed's incident, handled: "a ticket webhook is delivered three
//! times and the model marks an ambiguous message as urgent".
//!
//! - The webhook's signature is verified before its body is parsed; a forged delivery
//!   fails in one attempt (`unauthorized` is never retried).
//! - The start's idempotency key is the webhook's event id, so three deliveries make one
//!   run.
//! - The classifier only *proposes* an alert: a person must approve it (a human step with
//!   a timeout that escalates to the on-call group).
//! - The alert service sends the alert, then its reply is lost and the attempt times out.
//!   The retry does not post again: `reconcile` finds the alert by the step's idempotency
//!   key, so exactly one alert is sent.
//! - In a dry run the alert is proposed (journaled with its arguments) and nothing is sent.

use std::error::Error;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow::clock::TokioClock;
use workflow::journal::Value;
use workflow::prelude::*;

use crate::{wait_for_task, Log, Progress};

/// A webhook delivery as it arrives: the body is parsed only after the signature checks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Webhook {
    /// The sender's event id: the same on every redelivery.
    pub event_id: String,
    /// The signature header.
    pub signature: String,
    /// The raw body.
    pub body: String,
}

/// A support ticket, parsed from a verified webhook body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// The ticket id.
    pub ticket_id: String,
    /// What the customer wrote.
    pub text: String,
}

/// The classifier's verdict: a proposal, never an action.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Triage {
    /// Whether the ticket looks urgent.
    pub urgent: bool,
    /// Whether the text is hedged, so the verdict is uncertain.
    pub ambiguous: bool,
    /// Why.
    pub reason: String,
}

/// The id the alert service gave an alert.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertId(pub String);

/// An alert the (simulated) alert service delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alert {
    /// Its id.
    pub id: AlertId,
    /// The idempotency key it was posted with.
    pub key: String,
    /// Its text.
    pub text: String,
}

/// A stand-in for the on-call alert service (a Slack channel, a pager).
#[derive(Debug, Default)]
pub struct AlertService {
    delivered: Mutex<Vec<Alert>>,
    posts: AtomicUsize,
    lose_next_reply: AtomicBool,
}

impl AlertService {
    /// A service whose first reply is lost after it delivered the alert.
    pub fn flaky() -> Self {
        let service = AlertService::default();
        service.lose_next_reply.store(true, Ordering::SeqCst);
        service
    }

    /// Posts an alert. The alert is delivered first; then the reply may be lost, in which
    /// case the call hangs until the caller's timeout: the ambiguous failure.
    pub async fn post(&self, key: &str, text: String) -> AlertId {
        let n = self.posts.fetch_add(1, Ordering::SeqCst) + 1;
        let id = AlertId(format!("alert-{n}"));
        self.lock().push(Alert {
            id: id.clone(),
            key: key.to_owned(),
            text,
        });
        if self.lose_next_reply.swap(false, Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        id
    }

    /// The alert posted with `key`, if any.
    pub fn find(&self, key: &str) -> Option<AlertId> {
        self.lock()
            .iter()
            .find(|alert| alert.key == key)
            .map(|alert| alert.id.clone())
    }

    /// Every alert delivered.
    pub fn delivered(&self) -> Vec<Alert> {
        self.lock().clone()
    }

    /// How many times `post` was called.
    pub fn posts(&self) -> usize {
        self.posts.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Alert>> {
        self.delivered.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The environment: the webhook secret and the alert service.
#[derive(Debug)]
pub struct Helpdesk {
    secret: String,
    alerts: Arc<AlertService>,
    log: Log,
}

impl Helpdesk {
    /// A helpdesk with its webhook secret, its alert service and where it logs.
    pub fn new(secret: impl Into<String>, alerts: Arc<AlertService>, log: Log) -> Self {
        Helpdesk {
            secret: secret.into(),
            alerts,
            log,
        }
    }
}

/// The shared secret of the example's webhook sender.
pub const SECRET: &str = "whsec_example";

/// Signs a webhook: a keyed FNV-1a digest of the event id and body. A stand-in for the
/// HMAC-SHA256 a real sender uses; the point is where the check happens, not the hash.
pub fn sign(secret: &str, event_id: &str, body: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in [secret, "\n", event_id, "\n", body]
        .iter()
        .flat_map(|part| part.bytes())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("v1={hash:016x}")
}

/// The seed's incident webhook, signed with [`SECRET`].
pub fn incident_webhook() -> Webhook {
    let body = r#"{"ticket_id":"T-91","text":"Maybe locked out; payroll closes today"}"#;
    Webhook {
        event_id: "evt_884".into(),
        signature: sign(SECRET, "evt_884", body),
        body: body.into(),
    }
}

/// The steps' implementations.
pub mod triage {
    use super::*;

    /// Checks the signature, then (only then) parses the body.
    pub async fn verify(env: &Helpdesk, hook: Webhook) -> Result<Ticket, StepError> {
        if sign(&env.secret, &hook.event_id, &hook.body) != hook.signature {
            return Err(StepError::unauthorized(format!(
                "bad signature on webhook {}",
                hook.event_id
            )));
        }
        Ok(serde_json::from_str(&hook.body)?)
    }

    /// The "model": keyword rules standing in for a classifier. It may only propose.
    pub async fn classify(_env: &Helpdesk, ticket: Ticket) -> Result<Triage, StepError> {
        let text = ticket.text.to_lowercase();
        let signals: Vec<&str> = ["locked out", "today", "outage", "payroll"]
            .into_iter()
            .filter(|word| text.contains(word))
            .collect();
        let ambiguous = ["maybe", "might", "not sure"]
            .iter()
            .any(|hedge| text.contains(hedge));
        Ok(Triage {
            urgent: !signals.is_empty(),
            ambiguous,
            reason: format!("mentions {}", signals.join(", ")),
        })
    }

    /// Posts the on-call alert under the step's idempotency key.
    pub async fn send_alert(
        env: &Helpdesk,
        ctx: &StepContext,
        ticket: Ticket,
        triage: Triage,
    ) -> Result<AlertId, StepError> {
        env.log.line(format!(
            "      [alert service] POST attempt {} key={}",
            ctx.attempt, ctx.idempotency_key
        ));
        let text = format!(
            "Urgent ticket {}: {} ({})",
            ticket.ticket_id, ticket.text, triage.reason
        );
        let id = env.alerts.post(&ctx.idempotency_key, text).await;
        env.log
            .line(format!("      [alert service] delivered {}", id.0));
        Ok(id)
    }

    /// Asks the alert service whether the alert with this step's key already went out.
    pub async fn find_alert(
        env: &Helpdesk,
        ctx: &StepContext,
    ) -> Result<Option<AlertId>, StepError> {
        let found = env.alerts.find(&ctx.idempotency_key);
        env.log.line(format!(
            "      [alert service] lookup key={}: {}",
            ctx.idempotency_key,
            found
                .as_ref()
                .map_or("not found".to_owned(), |id| format!("found {}", id.0))
        ));
        Ok(found)
    }
}

workflow! {
    /// Triage a support ticket; an urgent alert needs a person's approval.
    pub workflow TicketTriage(hook: Webhook) env Helpdesk {
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
            action: triage::send_alert(env, ctx, verify, classify),
            depends_on: [approve_alert],
            condition: approve_alert.is_some_and(|a| a.approved),
            effect: external,
            reconcile: triage::find_alert(env, ctx),
            retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 30s, jitter: full },
            timeout: 10s,
        }
    }
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// The run each of the three deliveries got.
    pub runs: Vec<RunId>,
    /// The classifier's verdict.
    pub triage: Option<Triage>,
    /// The human decision on the alert.
    pub approval: Option<Approval>,
    /// The alert the run recorded as sent.
    pub alert: Option<AlertId>,
    /// Every alert the alert service delivered.
    pub delivered: Vec<Alert>,
    /// How many times the alert service was called.
    pub posts: usize,
    /// Attempts `send_alert` made.
    pub send_attempts: u32,
    /// The effects a dry run proposed instead of executing: step id and arguments.
    pub proposals: Vec<(String, Value)>,
    /// How the forged delivery ended.
    pub forged: String,
}

/// 2026-07-18T05:10:00Z, the seed fixture's `occurred_at`: a frozen, reproducible start.
pub const FROZEN_START: u64 = 1_784_351_400_000;

/// Plays the incident: three deliveries of one signed webhook, a lead's approval, an alert
/// whose reply is lost, and a forged delivery. Call it on paused tokio time; simulated
/// hours then pass at once.
pub async fn run(dry_run: bool, log: &Log) -> Result<Summary, Box<dyn Error>> {
    let alerts = Arc::new(AlertService::flaky());
    let engine = Engine::builder()
        .seed(884)
        .clock(TokioClock::starting_at(FROZEN_START))
        .build();
    engine.register::<TicketTriage>(Helpdesk {
        secret: SECRET.into(),
        alerts: alerts.clone(),
        log: log.clone(),
    })?;
    let progress = Progress::start(&engine, TicketTriage::spec(), log);

    // The helpdesk delivers the same webhook three times, 30 s apart.
    let mut runs = Vec::new();
    for delivery in 1..=3 {
        let hook = incident_webhook();
        let options = StartOptions {
            idempotency_key: Some(hook.event_id.clone()),
            dry_run,
            deadline: None,
            initiator: None,
            traceparent: None,
        };
        let event_id = hook.event_id.clone();
        let run = engine
            .start_with::<TicketTriage>(TicketTriageInput { hook }, options)
            .await?;
        let what = if runs.first() == Some(&run.id()) {
            "duplicate: the same run, nothing started"
        } else {
            "a new run"
        };
        log.line(format!(
            "delivery {delivery} of {event_id} -> {} ({what})",
            run.id()
        ));
        runs.push(run.id());
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
    let first = runs.first().copied().ok_or("no delivery")?;
    let run = engine.handle::<TicketTriage>(first).await?;

    let task = wait_for_task(
        &engine,
        run.id(),
        "approve_alert",
        Duration::from_secs(3600),
    )
    .await?;
    log.line(format!(
        "open task for {}: {}",
        task.assignee,
        task.prompt.as_deref().unwrap_or("(no prompt)")
    ));
    tokio::time::sleep(Duration::from_secs(20 * 60)).await;
    let lead = "lee@support_leads";
    log.line(format!(
        "[simulated lead] {lead} approves the alert after 20 minutes"
    ));
    run.approve_alert()
        .approve(
            lead,
            Some("confirmed with the customer: payroll is blocked"),
        )
        .await?;
    let outputs = run.outputs().await?;

    // A forged delivery: refused before its body is parsed, in one attempt.
    let mut forged = incident_webhook();
    forged.event_id = "evt_885".into();
    forged.signature = "v1=0000000000000000".into();
    let forged_run = engine
        .start_with::<TicketTriage>(
            TicketTriageInput { hook: forged },
            StartOptions {
                idempotency_key: Some("evt_885".into()),
                dry_run,
                deadline: None,
                initiator: None,
                traceparent: None,
            },
        )
        .await?;
    let forged = match forged_run.outputs().await {
        Err(error) => error.to_string(),
        Ok(_) => "accepted (it should not have been)".to_owned(),
    };
    log.line(format!("forged delivery evt_885 -> {forged}"));

    // Long after: nothing else may happen.
    tokio::time::sleep(Duration::from_secs(7 * 24 * 3600)).await;
    progress.finish().await;

    let send_attempts = run
        .inspect()
        .await?
        .steps
        .iter()
        .find(|step| step.id == "send_alert")
        .map_or(0, |step| step.attempts);
    Ok(Summary {
        dry_run,
        runs,
        triage: Some(outputs.classify),
        approval: outputs.approve_alert,
        alert: outputs.send_alert,
        delivered: alerts.delivered(),
        posts: alerts.posts(),
        send_attempts,
        proposals: run.proposals().await?,
        forged,
    })
}

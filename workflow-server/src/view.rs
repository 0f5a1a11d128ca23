//! A run as the API and the run page show it: steps with their state and attempts, the
//! timeline of its journal and the audit trail (who decided what, when; escalations,
//! refusals, cancellations, retries). Payloads (inputs, outputs, event payloads) appear only
//! when the server shows payloads; decisions and who made them always do.

use serde::Serialize;
use serde_json::Value;
pub(crate) use workflow_core::journal::rfc3339;
use workflow_core::journal::{Event, Timestamp};
use workflow_core::spec::render::{svg_with_states, StepMark};
use workflow_core::spec::Spec;
use workflow_core::store::RunRecord;
use workflow_core::{Engine, RunId, RunView, Tick};

use crate::error::ApiError;

/// What stands in for a payload, a failure's message or a key's value that is not shown;
/// [`RunDetail::redacted`] (and the run page) say why.
pub(crate) const REDACTED: &str = "(redacted)";

/// Why payloads are not shown to a caller: they may not see this workflow's (then
/// failure messages and key values are redacted too), or the server displays no inputs
/// and outputs to anyone.
pub(crate) fn redaction_reason(entitled: bool) -> &'static str {
    if entitled {
        "this server shows no inputs and outputs (the engine does not log them and `Server::show_payloads` is off)"
    } else {
        "you may not see this workflow's payloads (the `payloads` role grants it)"
    }
}

/// A run's note as a caller sees it: a failed run's note quotes its error's message, a
/// payload like any other, so without payloads it is redacted.
pub(crate) fn visible_note(record: &RunRecord, show: bool) -> Option<String> {
    match &record.note {
        Some(_) if !show && record.status == workflow_core::store::RunStatus::Failed => {
            Some(format!("failed: {REDACTED}"))
        }
        note => note.clone(),
    }
}

/// The flow-control state with its keys' values (drawn from payloads) hidden.
fn masked(
    mut flow: workflow_core::store::limits::RunFlow,
) -> workflow_core::store::limits::RunFlow {
    if let Some((_, key)) = flow.gate.as_mut().and_then(|gate| gate.key.as_mut()) {
        *key = REDACTED.to_owned();
    }
    for wait in &mut flow.waits {
        wait.key = REDACTED.to_owned();
    }
    for (_, _, key) in &mut flow.held {
        *key = REDACTED.to_owned();
    }
    flow
}

/// One run, explained.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    /// The run, `run-N`.
    pub run: String,
    /// Its workflow.
    pub workflow: String,
    /// `running`, `completed`, `failed`, `cancelled` or `parked`.
    pub status: &'static str,
    /// Why it is parked or failed, or who retried it (a failure's message redacted
    /// without payloads).
    pub note: Option<String>,
    /// Why payloads, failure messages and key values read `(redacted)`, when they do.
    pub redacted: Option<&'static str>,
    /// Whether it waits for a worker: queued (`Engine::enqueue`), nobody owns it and
    /// nothing but its start is journaled.
    pub queued: bool,
    /// What it waits for under flow control, in words: its key's slot and who holds it,
    /// its place in the queue, a step's slot or rate token.
    pub waits_for: Vec<String>,
    /// The start's idempotency key (a webhook's event id).
    pub idempotency_key: Option<String>,
    /// The schedule's tick that started it (schedule id, scheduled time, fire time; ms),
    /// when a schedule started it.
    pub tick: Option<Tick>,
    /// Its OpenTelemetry trace id (32 hex digits), to look it up in a tracing UI.
    pub trace_id: Option<String>,
    /// Created, ms since the epoch.
    pub created_at: Timestamp,
    /// Last status change, ms since the epoch.
    pub updated_at: Timestamp,
    /// The inputs, when payloads are shown.
    pub input: Option<Value>,
    /// Per step, in declaration order.
    pub steps: Vec<StepDetail>,
    /// Every journal entry, in order.
    pub timeline: Vec<TimelineEntry>,
    /// What people (and timeouts) did.
    pub audit: Vec<AuditEntry>,
}

/// One step of a [`RunDetail`].
#[derive(Debug, Clone, Serialize)]
pub struct StepDetail {
    /// The step id.
    pub id: String,
    /// The machine's state name (`pending`, `running`, `waiting`, `succeeded`...).
    pub state: &'static str,
    /// How the diagram colours it (`done`, `failed`, `running`, `waiting`, `skipped`,
    /// `pending`).
    pub mark: &'static str,
    /// Attempts started.
    pub attempts: u32,
}

/// One journal entry.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineEntry {
    /// When, ms since the epoch.
    pub at: Timestamp,
    /// The event's name (`attempt_started`, `task_decided`...).
    pub event: String,
    /// The step it concerns.
    pub step: Option<String>,
    /// What happened, in words.
    pub detail: String,
}

/// One entry of the audit trail.
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    /// When, ms since the epoch.
    pub at: Timestamp,
    /// Who: the decider, the canceller, or the task's new assignee.
    pub who: String,
    /// `opened`, `decided`, `escalated`, `refused`, `expired`, `cancelled`, `retried`.
    pub action: &'static str,
    /// The step, if any.
    pub step: Option<String>,
    /// The decision, the refusal's reason, the deadline...
    pub detail: String,
    /// How a decision or an approval was made, when journaled: `link` for a signed link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A run with its spec, loaded once for a page or an answer.
pub(crate) struct Loaded {
    /// Whether its payloads are shown.
    pub(crate) payloads: bool,
    /// Whether the caller is entitled to its failure messages and key values.
    pub(crate) entitled: bool,
    pub(crate) detail: RunDetail,
    pub(crate) spec: Spec,
    pub(crate) events: Vec<Event>,
    pub(crate) marks: Vec<StepMark>,
    /// Each step's state in the run's machine, in declaration order.
    pub(crate) states: Vec<workflow_core::machine::StepState>,
    /// The run's row.
    pub(crate) record: RunRecord,
}

impl Loaded {
    /// The run's diagram with its state.
    pub(crate) fn svg(&self) -> String {
        svg_with_states(&self.spec, &self.marks)
    }
}

/// A run's state and recorded spec, read before anyone decides whether the caller may see
/// it.
pub(crate) struct Opened {
    view: RunView,
    spec: Option<Spec>,
}

impl Opened {
    /// Reads `run`'s state through the engine and its recorded spec.
    pub(crate) async fn open(engine: &Engine, run: RunId) -> Result<Opened, ApiError> {
        let view = engine.inspect(run).await?;
        let spec =
            workflow_core::admin::stored_spec(&**engine.store(), &view.record.fingerprint).await?;
        Ok(Opened { view, spec })
    }

    /// The run's record.
    pub(crate) fn record(&self) -> &RunRecord {
        &self.view.record
    }

    /// Its recorded spec, if the store has one.
    pub(crate) fn spec(&self) -> Option<&Spec> {
        self.spec.as_ref()
    }

    /// Who each of its open tasks waits for now (a delegate the spec does not name
    /// among them).
    pub(crate) fn open_assignees(&self) -> impl Iterator<Item = &str> {
        self.view.steps.iter().filter_map(|step| match &step.state {
            workflow_core::machine::StepState::Waiting { assignee, .. } => Some(assignee.as_str()),
            _ => None,
        })
    }

    /// Explains the run, with its payloads if `show`, its failure messages and key values
    /// if the caller is `entitled` to them.
    pub(crate) async fn load(
        self,
        engine: &Engine,
        show: bool,
        entitled: bool,
    ) -> Result<Loaded, ApiError> {
        let Opened { view, spec } = self;
        let run = view.record.id;
        let spec = spec.ok_or_else(|| {
            ApiError::not_found(format!(
                "the store has no spec recorded for {run} ({})",
                view.record.fingerprint
            ))
        })?;
        let events = engine.events(run).await?;
        let waits_for = match engine.store().flow_of(run).await {
            Ok(flow) if entitled => workflow_core::store::limits::describe(&flow, Some(&spec)),
            Ok(flow) => workflow_core::store::limits::describe(&masked(flow), Some(&spec)),
            Err(_) => Vec::new(),
        };
        let mut loaded = explain(view, spec, events, show, entitled)?;
        loaded.detail.waits_for = waits_for;
        Ok(loaded)
    }
}

fn explain(
    view: RunView,
    spec: Spec,
    events: Vec<Event>,
    show: bool,
    entitled: bool,
) -> Result<Loaded, ApiError> {
    let names: Vec<String> = view.steps.iter().map(|s| s.id.clone()).collect();
    let name = |step: usize| {
        names
            .get(step)
            .cloned()
            .unwrap_or_else(|| format!("#{step}"))
    };
    let marks: Vec<StepMark> = view.steps.iter().map(|s| s.state.mark()).collect();
    let steps = view
        .steps
        .iter()
        .zip(&marks)
        .map(|(step, mark)| StepDetail {
            id: step.id.clone(),
            state: step.state.name(),
            mark: mark.as_str(),
            attempts: step.attempts,
        })
        .collect();
    let input = match events.first() {
        Some(Event::RunStarted { input, .. }) if show => Some(input.clone()),
        _ => None,
    };
    let trace_id = match events.first() {
        Some(Event::RunStarted { trace_id, .. }) => {
            Some(workflow_core::trace::otel_trace_id(trace_id).unwrap_or_else(|| trace_id.clone()))
        }
        _ => None,
    };
    let timeline = events
        .iter()
        .map(|event| timeline_entry(event, &name, show, entitled))
        .collect();
    let audit = events
        .iter()
        .filter_map(|e| audit_entry(e, &name))
        .collect();
    let tick = Tick::of_run(&view.record, &events);
    let states = view.steps.iter().map(|s| s.state.clone()).collect();
    let record = view.record;
    let kept = record.clone();
    let note = visible_note(&record, entitled);
    let queued = record.status == workflow_core::store::RunStatus::Running
        && record.owner.is_none()
        && workflow_core::store::queued_journal(&events);
    Ok(Loaded {
        detail: RunDetail {
            run: record.id.to_string(),
            workflow: record.workflow,
            status: record.status.as_str(),
            note,
            redacted: None,
            queued,
            waits_for: Vec::new(),
            idempotency_key: record.idempotency_key,
            tick,
            trace_id,
            created_at: record.created_at,
            updated_at: record.updated_at,
            input,
            steps,
            timeline,
            audit,
        },
        spec,
        events,
        marks,
        states,
        record: kept,
        payloads: show,
        entitled,
    })
}

/// A failure's message, which may quote a payload ("card 4111… declined").
fn text(message: &str, show: bool) -> &str {
    if show {
        message
    } else {
        REDACTED
    }
}

fn payload(value: &Value, show: bool) -> String {
    if show {
        value.to_string()
    } else {
        REDACTED.to_owned()
    }
}

/// The event's name as journaled (`task_decided`).
fn event_name(event: &Event) -> String {
    serde_json::to_value(event)
        .ok()
        .and_then(|v| v.get("event").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "event".to_owned())
}

fn timeline_entry(
    event: &Event,
    name: &dyn Fn(usize) -> String,
    show: bool,
    entitled: bool,
) -> TimelineEntry {
    let (step, detail) = match event {
        Event::RunStarted {
            workflow, dry_run, ..
        } => (
            None,
            format!(
                "{workflow} started{}",
                if *dry_run { " (dry run)" } else { "" }
            ),
        ),
        Event::AttemptStarted { step, attempt, .. } => {
            (Some(*step), format!("attempt {attempt} started"))
        }
        Event::AttemptFailed {
            step,
            attempt,
            kind,
            message,
            ..
        } => (
            Some(*step),
            format!(
                "attempt {attempt} failed: {kind}: {}",
                text(message, entitled)
            ),
        ),
        Event::StepSucceeded { step, output, .. } => {
            (Some(*step), format!("succeeded: {}", payload(output, show)))
        }
        Event::StepFailed {
            step,
            attempts,
            kind,
            message,
            ..
        } => (
            Some(*step),
            format!(
                "failed after {attempts} attempt(s): {kind}: {}",
                text(message, entitled)
            ),
        ),
        Event::StepSkipped { step, reason, .. } => (Some(*step), format!("skipped: {reason}")),
        Event::EffectProposed { step, args, .. } => (
            Some(*step),
            format!("effect proposed with {}", payload(args, show)),
        ),
        Event::TaskOpened {
            step,
            assignee,
            deadline,
            ..
        } => (
            Some(*step),
            format!("task opened for {assignee}, due {}", rfc3339(*deadline)),
        ),
        Event::TaskEscalated {
            step, to, deadline, ..
        } => (
            Some(*step),
            format!("escalated to {to}, due {}", rfc3339(*deadline)),
        ),
        Event::TaskDecided {
            step, by, decision, ..
        } => (
            Some(*step),
            format!(
                "decided by {}: {}",
                decider(by, event),
                decision_text(decision)
            ),
        ),
        Event::MessageRefused {
            step,
            by,
            code,
            reason,
            ..
        } => (*step, format!("refused from {by} ({code}): {reason}")),
        Event::TaskExpired { step, .. } => (Some(*step), "task expired".to_owned()),
        Event::CompensationStarted { step, .. } => (Some(*step), "compensation started".into()),
        Event::Compensated { step, error, .. } => (
            Some(*step),
            match error {
                Some(error) => format!("compensation failed: {error}"),
                None => "compensated".to_owned(),
            },
        ),
        Event::EventReceived {
            step,
            event_id,
            payload: body,
            ..
        }
        | Event::EventBuffered {
            step,
            event_id,
            payload: body,
            ..
        } => (
            Some(*step),
            format!("event {event_id}: {}", payload(body, show)),
        ),
        Event::Cancelled { by, .. } => (None, format!("cancelled by {by}")),
        Event::Retried { by, .. } => (None, format!("retried by {by}")),
        Event::DeadlinePassed { .. } => (None, "the run's deadline passed".to_owned()),
        other => (step_of(other), String::new()),
    };
    TimelineEntry {
        at: event.at(),
        event: event_name(event),
        step: step.map(name),
        detail,
    }
}

/// The step of events the timeline does not spell out.
fn step_of(event: &Event) -> Option<usize> {
    let value = serde_json::to_value(event).ok()?;
    value
        .get("step")
        .and_then(Value::as_u64)
        .and_then(|s| usize::try_from(s).ok())
}

fn audit_entry(event: &Event, name: &dyn Fn(usize) -> String) -> Option<AuditEntry> {
    let (who, action, step, detail) = match event {
        Event::TaskOpened {
            step,
            assignee,
            deadline,
            ..
        } => (
            assignee.clone(),
            "opened",
            Some(*step),
            format!("due {}", rfc3339(*deadline)),
        ),
        Event::TaskDecided {
            step, by, decision, ..
        } => (by.clone(), "decided", Some(*step), decision_text(decision)),
        Event::TaskEscalated {
            step, to, deadline, ..
        } => (
            to.clone(),
            "escalated",
            Some(*step),
            format!("deadline passed; now due {}", rfc3339(*deadline)),
        ),
        Event::MessageRefused {
            step,
            by,
            code,
            reason,
            ..
        } => (by.clone(), "refused", *step, format!("{code}: {reason}")),
        Event::TaskExpired { step, .. } => (String::new(), "expired", Some(*step), String::new()),
        Event::TaskApproved {
            step, by, decision, ..
        } => (by.clone(), "approved", Some(*step), decision_text(decision)),
        Event::TaskDelegated { step, by, to, .. } => {
            (by.clone(), "delegated", Some(*step), format!("to {to}"))
        }
        Event::Initiated { by, .. } => (by.clone(), "started", None, String::new()),
        Event::Cancelled { by, .. } => (by.clone(), "cancelled", None, String::new()),
        Event::Retried { by, .. } => (by.clone(), "retried", None, String::new()),
        _ => return None,
    };
    Some(AuditEntry {
        at: event.at(),
        who,
        action,
        step: step.map(name),
        detail,
        via: event.via().map(str::to_owned),
    })
}

/// Who decided, with how when the journal says (`ana@finance via link`).
pub(crate) fn decider(by: &str, event: &Event) -> String {
    match event.via() {
        Some(via) => format!("{by} via {via}"),
        None => by.to_owned(),
    }
}

/// A decision in words: `approved ("comment")` for approvals, JSON otherwise.
pub(crate) fn decision_text(decision: &Value) -> String {
    match decision.get("approved").and_then(Value::as_bool) {
        Some(approved) => {
            let verdict = if approved { "approved" } else { "rejected" };
            match decision.get("comment").and_then(Value::as_str) {
                Some(comment) => format!("{verdict} (\"{comment}\")"),
                None => verdict.to_owned(),
            }
        }
        None => decision.to_string(),
    }
}

/// The id of a run named in a path: `run-7` or `7`.
pub(crate) fn parse_run(text: &str) -> Result<RunId, ApiError> {
    text.parse()
        .map_err(|_| ApiError::not_found(format!("`{text}` is not a run id")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_payloads_a_wait_names_no_key_value() {
        use workflow_core::store::limits::{describe, GateState, KeyUsage, RunFlow};
        let flow = RunFlow {
            gate: Some(GateState {
                key: Some(("Charge".to_owned(), "card-4111".to_owned())),
                usage: KeyUsage {
                    in_use: 1,
                    holders: vec![(RunId(17), String::new())],
                },
                ..GateState::default()
            }),
            held: vec![("charge".into(), "Charge".into(), "card-4111".into())],
            ..RunFlow::default()
        };
        let shown = describe(&flow, None).join("\n");
        assert!(shown.contains("card-4111"), "{shown}");
        let hidden = describe(&masked(flow), None).join("\n");
        assert!(!hidden.contains("card-4111"), "{hidden}");
        assert!(hidden.contains("key (redacted)"), "{hidden}");
        assert!(
            hidden.contains("run-17"),
            "who holds it still shows: {hidden}"
        );
    }

    #[test]
    fn timestamps_print_as_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_784_351_400_007), "2026-07-18T05:10:00.007Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn decisions_read_as_words() {
        let approval = serde_json::json!({"approved": true, "by": "lee", "comment": "ok"});
        assert_eq!(decision_text(&approval), "approved (\"ok\")");
        let rejection = serde_json::json!({"approved": false, "by": "lee"});
        assert_eq!(decision_text(&rejection), "rejected");
        assert_eq!(decision_text(&serde_json::json!(3)), "3");
    }

    #[test]
    fn escalations_refusals_and_decisions_enter_the_audit_trail() {
        let name = |step: usize| ["classify", "approve"][step].to_owned();
        let events = [
            Event::TaskOpened {
                step: 1,
                assignee: "support_leads".into(),
                prompt: None,
                deadline: 7_200_000,
                at: 0,
            },
            Event::TaskEscalated {
                step: 1,
                to: "on_call".into(),
                deadline: 14_400_000,
                at: 7_200_000,
            },
            Event::MessageRefused {
                inbox: 3,
                step: Some(1),
                by: "eve".into(),
                code: "unauthorized".into(),
                reason: "eve may not decide".into(),
                at: 7_300_000,
            },
            Event::TaskDecided {
                step: 1,
                by: "kim@on_call".into(),
                decision: serde_json::json!({"approved": false, "comment": "not urgent"}),
                inbox: None,
                via: None,
                at: 7_400_000,
            },
            Event::StepSucceeded {
                step: 0,
                output: serde_json::json!(true),
                at: 1,
            },
        ];
        let audit: Vec<(String, &str, Option<String>, String)> = events
            .iter()
            .filter_map(|e| audit_entry(e, &name))
            .map(|a| (a.who, a.action, a.step, a.detail))
            .collect();
        assert_eq!(
            audit,
            [
                (
                    "support_leads".into(),
                    "opened",
                    Some("approve".into()),
                    "due 1970-01-01T02:00:00.000Z".into()
                ),
                (
                    "on_call".into(),
                    "escalated",
                    Some("approve".into()),
                    "deadline passed; now due 1970-01-01T04:00:00.000Z".into()
                ),
                (
                    "eve".into(),
                    "refused",
                    Some("approve".into()),
                    "unauthorized: eve may not decide".into()
                ),
                (
                    "kim@on_call".into(),
                    "decided",
                    Some("approve".into()),
                    "rejected (\"not urgent\")".into()
                ),
            ]
        );
        let timeline: Vec<String> = events
            .iter()
            .map(|e| timeline_entry(e, &name, false, false).detail)
            .collect();
        assert_eq!(
            timeline[1],
            "escalated to on_call, due 1970-01-01T04:00:00.000Z"
        );
        assert_eq!(timeline[4], format!("succeeded: {REDACTED}"));
        assert_eq!(
            timeline_entry(&events[4], &name, false, false).event,
            "step_succeeded"
        );
    }

    #[test]
    fn payloads_are_redacted_unless_shown() {
        let output = serde_json::json!({"secret": "s3cret"});
        assert_eq!(payload(&output, false), REDACTED);
        assert!(payload(&output, true).contains("s3cret"));
    }
}

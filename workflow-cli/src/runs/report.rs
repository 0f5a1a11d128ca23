//! `workflow runs show`: one run explained from its journal — steps, attempts, timeline,
//! failures and decisions — as text or JSON.

use serde_json::{json, Value};
use workflow_core::journal::{Event, Timestamp};
use workflow_core::machine::{Machine, StepState};
use workflow_core::spec::Spec;
use workflow_core::store::{RunStatus, StoredRun};
use workflow_core::Tick;

use super::{decision_text, mark, record_json};
use crate::store::step_name;
use crate::text::{duration, offset, relative, short, table, timestamp};

/// One run, explained.
pub(super) struct Report<'a> {
    stored: &'a StoredRun,
    spec: Option<&'a Spec>,
    machine: Option<Machine<'a>>,
    start: Timestamp,
    now: Timestamp,
    /// What it waits for under flow control (`store::limits::describe`).
    waits: Vec<String>,
}

impl<'a> Report<'a> {
    /// The report with what the run waits for under flow control.
    pub(super) fn with_waits(mut self, waits: Vec<String>) -> Self {
        self.waits = waits;
        self
    }

    pub(super) fn new(stored: &'a StoredRun, spec: Option<&'a Spec>, now: Timestamp) -> Self {
        Report {
            stored,
            spec,
            machine: spec.map(|spec| Machine::replay(spec, &stored.events)),
            start: stored
                .events
                .first()
                .map_or(stored.record.created_at, Event::at),
            now,
            waits: Vec::new(),
        }
    }

    fn name(&self, step: usize) -> String {
        step_name(self.spec, step)
    }

    /// The run's OpenTelemetry trace id (an older version's 16 digits padded to 32).
    fn trace_id(&self) -> Option<String> {
        self.stored.events.iter().find_map(|event| match event {
            Event::RunStarted { trace_id, .. } => Some(
                workflow_core::trace::otel_trace_id(trace_id).unwrap_or_else(|| trace_id.clone()),
            ),
            _ => None,
        })
    }

    /// The schedule's tick that started the run, if a schedule did.
    fn tick(&self) -> Option<Tick> {
        Tick::of_run(&self.stored.record, &self.stored.events)
    }

    /// The child run a child step started.
    fn child_of(&self, step: usize) -> Option<workflow_core::RunId> {
        self.stored
            .events
            .iter()
            .rev()
            .find_map(|event| match event {
                Event::ChildStarted { step: s, child, .. } if *s == step => Some(*child),
                _ => None,
            })
    }

    /// Who decided each human step (the last decision, after retries), with how
    /// (` via link`) when the journal says.
    fn decider(&self, step: usize) -> Option<(String, Timestamp)> {
        self.stored
            .events
            .iter()
            .rev()
            .find_map(|event| match event {
                Event::TaskDecided {
                    step: s, by, at, ..
                } if *s == step => Some((format!("{by}{}", via_text(event.via())), *at)),
                _ => None,
            })
    }

    fn step_detail(&self, step: usize, state: &StepState) -> String {
        match state {
            StepState::Pending => String::new(),
            StepState::Running { attempt } => format!("attempt {attempt} started"),
            StepState::RetryWait { attempt, until } => format!(
                "attempt {attempt} failed; next attempt {}",
                relative(*until, self.now)
            ),
            StepState::Waiting {
                assignee,
                deadline,
                escalated,
            } => format!(
                "task for {assignee}, due {} ({}){}",
                timestamp(*deadline),
                if *deadline <= self.now {
                    format!("overdue by {}", duration(self.now - deadline))
                } else {
                    relative(*deadline, self.now)
                },
                if *escalated { ", escalated" } else { "" }
            ),
            StepState::Mapping { done, count } => format!("{done} of {count} items settled"),
            StepState::Awaiting { deadline } => format!(
                "waiting for an event until {} ({})",
                timestamp(*deadline),
                relative(*deadline, self.now)
            ),
            StepState::Succeeded => match (self.decider(step), self.child_of(step)) {
                (Some((by, at)), _) => format!("decided by {by} at {}", offset(at, self.start)),
                (None, Some(child)) => format!("child run {child}"),
                (None, None) => String::new(),
            },
            StepState::Failed {
                attempts,
                kind,
                message,
            } => format!(
                "{kind}: {} after {attempts} attempt(s)",
                short(message, 100)
            ),
            StepState::Skipped { reason } => short(reason, 100),
        }
    }

    /// Whether the run waits for a worker: queued, nobody owns it and nothing but its
    /// start is journaled.
    fn queued(&self) -> bool {
        self.stored.is_queued()
    }

    pub(super) fn text(&self) -> String {
        let record = &self.stored.record;
        let mut out = format!(
            "{}  {}  {}\n",
            record.id,
            record.workflow,
            record.status.as_str()
        );
        if let Some(note) = &record.note {
            out.push_str(&format!("note:     {}\n", short(note, 200)));
        }
        if record.status == RunStatus::Failed {
            if let Some(at) = workflow_core::admin::retry_safe_after(&self.stored.events) {
                let when = if at > self.now {
                    format!("not before {} ({})", timestamp(at), relative(at, self.now))
                } else {
                    format!("safe since {}", timestamp(at))
                };
                out.push_str(&format!(
                    "retry:    {when}: an interrupted external effect's outcome is unknown\n"
                ));
            }
        }
        if self.queued() && self.waits.is_empty() {
            out.push_str("queued:   waiting for a worker that registers its workflow\n");
        }
        for wait in &self.waits {
            out.push_str(&format!("waits:    {wait}\n"));
        }
        out.push_str(&format!(
            "started:  {}\nupdated:  {} ({})\n",
            timestamp(record.created_at),
            timestamp(record.updated_at),
            relative(record.updated_at, self.now)
        ));
        if let Some(trace) = self.trace_id() {
            out.push_str(&format!("trace:    {trace}\n"));
        }
        if let Some(tick) = self.tick() {
            out.push_str(&format!(
                "tick:     schedule {}, scheduled {}, fired {} (lag {})\n",
                tick.schedule,
                timestamp(tick.scheduled),
                timestamp(tick.fired),
                duration(tick.lag_ms())
            ));
        }
        match self.spec {
            Some(_) => out.push_str(&format!("spec:     {}\n", record.fingerprint)),
            None => out.push_str(&format!(
                "spec:     {} (not recorded in the store: steps are shown by number)\n",
                record.fingerprint
            )),
        }

        if let (Some(spec), Some(machine)) = (self.spec, &self.machine) {
            out.push_str("\nsteps:\n");
            let rows: Vec<Vec<String>> = spec
                .steps
                .iter()
                .enumerate()
                .map(|(index, step)| {
                    let state = &machine.states()[index];
                    vec![
                        format!("  {}", step.id),
                        if step.is_human() { "human" } else { "step" }.to_owned(),
                        state.name().to_owned(),
                        machine.attempts()[index].to_string(),
                        self.step_detail(index, state),
                    ]
                })
                .collect();
            out.push_str(&table(
                &["  STEP", "KIND", "STATE", "ATTEMPTS", "DETAIL"],
                &rows,
            ));
        }

        out.push_str("\ntimeline:\n");
        let rows: Vec<Vec<String>> = self
            .stored
            .events
            .iter()
            .map(|event| {
                vec![
                    format!("  {}", offset(event.at(), self.start)),
                    self.event_text(event),
                ]
            })
            .collect();
        for row in &rows {
            out.push_str(&format!("{:<10}  {}\n", row[0], row[1]));
        }

        let errors = self.errors();
        if !errors.is_empty() {
            out.push_str("\nerrors:\n");
            for error in &errors {
                out.push_str(&format!(
                    "  {:<8}  {}\n",
                    offset(error.at, self.start),
                    error.text()
                ));
            }
        }

        let decisions = self.decisions();
        if !decisions.is_empty() {
            out.push_str("\ndecisions:\n");
            for decision in &decisions {
                out.push_str(&format!(
                    "  {}: {} by {}{} at {} ({})\n",
                    decision.step,
                    decision_text(decision.decision),
                    decision.by,
                    via_text(decision.via),
                    timestamp(decision.at),
                    offset(decision.at, self.start)
                ));
            }
        }
        out
    }

    pub(super) fn json(&self) -> Value {
        let record = &self.stored.record;
        let mut value = record_json(record);
        value["spec_recorded"] = Value::Bool(self.spec.is_some());
        value["queued"] = Value::Bool(self.queued());
        value["waits_for"] = json!(self.waits);
        value["trace_id"] = json!(self.trace_id());
        value["tick"] = json!(self.tick());
        if let (Some(spec), Some(machine)) = (self.spec, &self.machine) {
            value["machine_status"] = json!(machine.status().as_str());
            value["steps"] = spec
                .steps
                .iter()
                .enumerate()
                .map(|(index, step)| {
                    let state = &machine.states()[index];
                    json!({
                        "step": step.id,
                        "kind": if step.is_human() { "human" } else { "step" },
                        "state": state.name(),
                        "mark": mark(state).as_str(),
                        "attempts": machine.attempts()[index],
                        "detail": self.step_detail(index, state),
                    })
                })
                .collect();
        }
        value["timeline"] = self
            .stored
            .events
            .iter()
            .enumerate()
            .map(|(seq, event)| {
                json!({
                    "seq": seq,
                    "at": event.at(),
                    "offset_ms": event.at().saturating_sub(self.start),
                    "step": event.step().map(|step| self.name(step)),
                    "text": self.event_text(event),
                    "event": serde_json::to_value(event).unwrap_or(Value::Null),
                })
            })
            .collect();
        value["errors"] = self
            .errors()
            .iter()
            .map(|error| {
                json!({
                    "step": error.step,
                    "attempt": error.attempt,
                    "kind": error.kind,
                    "message": error.message,
                    "at": error.at,
                    "offset_ms": error.at.saturating_sub(self.start),
                })
            })
            .collect();
        value["decisions"] = self
            .decisions()
            .iter()
            .map(|decision| {
                json!({
                    "step": decision.step,
                    "by": decision.by,
                    "via": decision.via,
                    "decision": decision.decision,
                    "at": decision.at,
                    "offset_ms": decision.at.saturating_sub(self.start),
                })
            })
            .collect();
        value
    }

    /// One journal entry, for people: `review: decided by ana@mods: approved`.
    fn event_text(&self, event: &Event) -> String {
        let start = self.start;
        match event {
            Event::RunStarted {
                workflow,
                dry_run,
                deadline,
                ..
            } => {
                let mut text = format!("run started ({workflow}");
                if *dry_run {
                    text.push_str(", dry run");
                }
                if let Some(deadline) = deadline {
                    text.push_str(&format!(", deadline {}", timestamp(*deadline)));
                }
                text.push(')');
                text
            }
            Event::AttemptStarted { step, attempt, .. } => {
                format!("{}: attempt {attempt} started", self.name(*step))
            }
            Event::AttemptFailed {
                step,
                attempt,
                kind,
                message,
                retry_after,
                ..
            } => {
                let mut text = format!(
                    "{}: attempt {attempt} failed: {kind}: {}",
                    self.name(*step),
                    short(message, 120)
                );
                if let Some(after) = retry_after {
                    text.push_str(&format!(" (retry after {})", duration(*after)));
                }
                text
            }
            Event::StepSucceeded { step, .. } => format!("{}: succeeded", self.name(*step)),
            Event::StepSkipped { step, reason, .. } => {
                format!("{}: skipped ({})", self.name(*step), short(reason, 120))
            }
            Event::EffectProposed { step, .. } => {
                format!("{}: effect proposed (dry run)", self.name(*step))
            }
            Event::TaskOpened {
                step,
                assignee,
                deadline,
                ..
            } => format!(
                "{}: task opened for {assignee}, due {} ({})",
                self.name(*step),
                timestamp(*deadline),
                offset(*deadline, start)
            ),
            Event::TaskEscalated {
                step, to, deadline, ..
            } => format!(
                "{}: escalated to {to}, due {} ({})",
                self.name(*step),
                timestamp(*deadline),
                offset(*deadline, start)
            ),
            Event::TaskDecided {
                step, by, decision, ..
            } => format!(
                "{}: decided by {by}{}: {}",
                self.name(*step),
                via_text(event.via()),
                decision_text(decision)
            ),
            Event::TaskExpired { step, .. } => {
                format!("{}: task expired with no decision", self.name(*step))
            }
            Event::MessageRefused {
                step,
                by,
                code,
                reason,
                ..
            } => match step {
                Some(step) => format!(
                    "{}: message from {by} refused ({code}): {}",
                    self.name(*step),
                    short(reason, 120)
                ),
                None => format!("message from {by} refused ({code}): {}", short(reason, 120)),
            },
            Event::CompensationStarted { step, .. } => {
                format!("{}: compensation started", self.name(*step))
            }
            Event::Compensated { step, error, .. } => match error {
                None => format!("{}: compensated", self.name(*step)),
                Some(error) => format!(
                    "{}: compensation failed: {}",
                    self.name(*step),
                    short(error, 120)
                ),
            },
            Event::DeadlinePassed { .. } => "the run's deadline passed".to_owned(),
            Event::Cancelled { by, .. } => format!("cancelled by {by}"),
            Event::Retried { by, .. } => format!("retried by {by}"),
            other => {
                let value = serde_json::to_value(other).unwrap_or(Value::Null);
                let tag = value["event"].as_str().unwrap_or("event").to_owned();
                match other.step() {
                    Some(step) => format!("{}: {tag}", self.name(step)),
                    None => tag,
                }
            }
        }
    }

    /// Every failure in the journal: failed attempts, expired tasks, failed compensations.
    fn errors(&self) -> Vec<RunErrorLine> {
        self.stored
            .events
            .iter()
            .filter_map(|event| match event {
                Event::AttemptFailed {
                    step,
                    attempt,
                    kind,
                    message,
                    at,
                    ..
                } => Some(RunErrorLine {
                    step: self.name(*step),
                    attempt: Some(*attempt),
                    kind: kind.as_str().to_owned(),
                    message: message.clone(),
                    at: *at,
                }),
                Event::TaskExpired { step, at } => Some(RunErrorLine {
                    step: self.name(*step),
                    attempt: None,
                    kind: "timeout".to_owned(),
                    message: "no decision before the deadline".to_owned(),
                    at: *at,
                }),
                Event::MessageRefused {
                    step,
                    by,
                    code,
                    reason,
                    at,
                    ..
                } => Some(RunErrorLine {
                    step: step.map(|step| self.name(step)).unwrap_or_default(),
                    attempt: None,
                    kind: format!("refused ({code})"),
                    message: format!("from {by}: {reason}"),
                    at: *at,
                }),
                Event::Compensated {
                    step,
                    error: Some(error),
                    at,
                    ..
                } => Some(RunErrorLine {
                    step: self.name(*step),
                    attempt: None,
                    kind: "compensation".to_owned(),
                    message: error.clone(),
                    at: *at,
                }),
                Event::DeadlinePassed { at } => Some(RunErrorLine {
                    step: String::new(),
                    attempt: None,
                    kind: "timeout".to_owned(),
                    message: "the run passed its deadline".to_owned(),
                    at: *at,
                }),
                _ => None,
            })
            .collect()
    }

    /// Every human decision in the journal, in order.
    fn decisions(&self) -> Vec<Decision<'_>> {
        self.stored
            .events
            .iter()
            .filter_map(|event| match event {
                Event::TaskDecided {
                    step,
                    by,
                    decision,
                    at,
                    ..
                } => Some(Decision {
                    step: self.name(*step),
                    by,
                    via: event.via(),
                    decision,
                    at: *at,
                }),
                _ => None,
            })
            .collect()
    }
}

/// How a decision was made, as `runs show` appends it to the decider: ` via link`.
fn via_text(via: Option<&str>) -> String {
    via.map(|via| format!(" via {via}")).unwrap_or_default()
}

/// A failure, as `runs show` lists it.
struct RunErrorLine {
    step: String,
    attempt: Option<u32>,
    kind: String,
    message: String,
    at: Timestamp,
}

impl RunErrorLine {
    fn text(&self) -> String {
        let place = match (&self.attempt, self.step.is_empty()) {
            (_, true) => "run".to_owned(),
            (Some(attempt), false) => format!("{} attempt {attempt}", self.step),
            (None, false) => self.step.clone(),
        };
        let (message, evidence) = split_evidence(&self.message);
        let mut text = format!("{place}: {}: {}", self.kind, short(message, 160));
        // The files a failed attempt saved (a browser step's screenshot and HTML) are
        // listed whole on lines of their own, never cut short with the message.
        for path in evidence {
            text.push_str("\n            evidence: ");
            text.push_str(path);
        }
        text
    }
}

/// Splits a failure message ending in `[evidence: a, b]` (as `workflow-browser` writes
/// them) into the message and the paths of its evidence.
fn split_evidence(message: &str) -> (&str, Vec<&str>) {
    match message.rfind(" [evidence: ") {
        Some(at) if message.ends_with(']') => (
            &message[..at],
            message[at + 12..message.len() - 1].split(", ").collect(),
        ),
        _ => (message, Vec::new()),
    }
}

/// A human decision, as `runs show` lists it.
struct Decision<'a> {
    step: String,
    by: &'a str,
    /// How it was made (`link`), when journaled.
    via: Option<&'a str>,
    decision: &'a Value,
    at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_core::store::RunRecord;
    use workflow_core::store::RunStatus;
    use workflow_core::ErrorKind;
    use workflow_core::RunId;

    #[test]
    fn without_a_spec_the_timeline_names_steps_by_number() {
        let stored = StoredRun {
            record: RunRecord {
                id: RunId(3),
                workflow: "Gone".to_owned(),
                fingerprint: "0123".to_owned(),
                status: RunStatus::Failed,
                idempotency_key: None,
                note: Some("failed at `x`".to_owned()),
                parent: None,
                owner: None,
                created_at: 1_000,
                updated_at: 2_000,
            },
            events: vec![
                Event::AttemptStarted {
                    step: 3,
                    attempt: 1,
                    at: 1_000,
                },
                Event::AttemptFailed {
                    step: 3,
                    attempt: 1,
                    kind: ErrorKind::Validation,
                    message: "bad input".to_owned(),
                    retry_after: None,
                    safe_after: None,
                    at: 2_500,
                },
            ],
        };
        let report = Report::new(&stored, None, 3_000);
        let text = report.text();
        assert!(text.starts_with("run-3  Gone  failed\n"), "{text}");
        assert!(text.contains("not recorded in the store"), "{text}");
        assert!(!text.contains("steps:"), "{text}");
        assert!(text.contains("+0ms      #3: attempt 1 started"), "{text}");
        assert!(
            text.contains("+1.5s     #3: attempt 1 failed: validation: bad input"),
            "{text}"
        );
        assert!(text.contains("errors:\n  +1.5s     #3 attempt 1: validation: bad input"));
        let json = report.json();
        assert_eq!(json["spec_recorded"], false);
        assert_eq!(json["timeline"][1]["step"], "#3");
        assert_eq!(json["errors"][0]["kind"], "validation");
    }

    #[test]
    fn an_interrupted_effect_says_from_when_it_may_be_retried() {
        let stored = |safe_after: Timestamp, retried: bool| {
            let mut events = vec![Event::AttemptFailed {
                step: 0,
                attempt: 1,
                kind: ErrorKind::OutcomeUnknown,
                message: "interrupted".to_owned(),
                retry_after: None,
                safe_after: Some(safe_after),
                at: 2_000,
            }];
            if retried {
                events.push(Event::Retried {
                    by: "ops".to_owned(),
                    at: 9_000,
                });
            }
            StoredRun {
                record: RunRecord {
                    id: RunId(5),
                    workflow: "Pay".to_owned(),
                    fingerprint: "0123".to_owned(),
                    status: RunStatus::Failed,
                    idempotency_key: None,
                    note: None,
                    parent: None,
                    owner: None,
                    created_at: 1_000,
                    updated_at: 2_000,
                },
                events,
            }
        };
        let later = stored(65_000, false);
        let text = Report::new(&later, None, 5_000).text();
        assert!(
            text.contains("retry:    not before 1970-01-01 00:01:05Z (in 1m00s)"),
            "{text}"
        );
        let past = stored(4_000, false);
        let text = Report::new(&past, None, 5_000).text();
        assert!(
            text.contains("retry:    safe since 1970-01-01 00:00:04Z"),
            "{text}"
        );
        let retried = stored(65_000, true);
        let text = Report::new(&retried, None, 5_000).text();
        assert!(!text.contains("retry:"), "{text}");
    }

    #[test]
    fn a_decision_through_a_link_is_shown_via_link_and_others_are_not() {
        let decided = |step: usize, via: Option<&str>| Event::TaskDecided {
            step,
            by: "ana@finance".to_owned(),
            decision: serde_json::json!({ "approved": true }),
            inbox: None,
            via: via.map(str::to_owned),
            at: 1_500,
        };
        let stored = StoredRun {
            record: RunRecord {
                id: RunId(4),
                workflow: "Gone".to_owned(),
                fingerprint: "0123".to_owned(),
                status: RunStatus::Running,
                idempotency_key: None,
                note: None,
                parent: None,
                owner: None,
                created_at: 1_000,
                updated_at: 2_000,
            },
            events: vec![decided(1, Some("link")), decided(2, None)],
        };
        let report = Report::new(&stored, None, 3_000);
        let text = report.text();
        assert!(
            text.contains("#1: decided by ana@finance via link: approved"),
            "{text}"
        );
        assert!(
            text.contains("#2: decided by ana@finance: approved"),
            "{text}"
        );
        assert!(
            text.contains("#1: approved by ana@finance via link at"),
            "{text}"
        );
        assert!(text.contains("#2: approved by ana@finance at"), "{text}");
        let json = report.json();
        assert_eq!(json["decisions"][0]["via"], "link");
        assert!(json["decisions"][1]["via"].is_null());
    }

    #[test]
    fn the_evidence_of_a_failed_attempt_is_listed_whole() {
        let line = RunErrorLine {
            step: "fetch".to_owned(),
            attempt: Some(2),
            kind: "timeout".to_owned(),
            message: format!(
                "click: test_id(\"go\") was not ready within 5000 ms [evidence: /{0}/failure-1.png, /{0}/failure-1.html]",
                "artifacts/run-7/fetch/attempt-2".repeat(5)
            ),
            at: 0,
        };
        let dir = "artifacts/run-7/fetch/attempt-2".repeat(5);
        assert_eq!(
            line.text(),
            format!(
                "fetch attempt 2: timeout: click: test_id(\"go\") was not ready within 5000 ms\n            evidence: /{dir}/failure-1.png\n            evidence: /{dir}/failure-1.html"
            )
        );
        assert_eq!(split_evidence("plain [x]"), ("plain [x]", vec![]));
    }
}

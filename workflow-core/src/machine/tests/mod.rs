//! Unit tests of the pure machine: scheduling, retries, compensation, human tasks,
//! recovery after a crash, and admission of decisions.

use serde_json::json;

use super::*;
use crate::error::CallError;
use crate::error::ErrorKind;
use crate::error::{DecisionError, RunError, RunId};
use crate::journal::{Event, Timestamp};
use crate::store::{InboxItem, Message};

mod cancel;
mod human;

pub(super) fn spec(source: &str) -> Spec {
    let parsed = workflow_spec::parse::parse_str(source);
    assert!(
        parsed.errors.is_empty(),
        "{:?}",
        parsed.error().map(|e| e.to_string())
    );
    parsed.spec.expect("a valid spec")
}

/// The first journal entry of a run of `W` with no input.
pub(super) fn run_started(dry_run: bool) -> Event {
    Event::RunStarted {
        workflow: "W".into(),
        fingerprint: String::new(),
        input: json!({}),
        seed: 3,
        trace_id: String::new(),
        parent_span: None,
        dry_run,
        deadline: None,
        at: 0,
    }
}

pub(super) fn started(machine: &mut Machine<'_>) {
    machine.apply(&run_started(false));
}

pub(super) fn start(step: usize) -> Command {
    Command::Attempt {
        step,
        item: None,
        attempt: 1,
        reconcile: false,
    }
}

pub(super) fn next(machine: &Machine<'_>, now: Timestamp) -> Vec<Command> {
    machine.next(now, &NoHooks)
}

pub(super) fn run(machine: &mut Machine<'_>, step: usize, at: Timestamp) {
    machine.apply(&Event::AttemptStarted {
        step,
        attempt: 1,
        at,
    });
    machine.apply(&Event::StepSucceeded {
        step,
        output: json!(step),
        at,
    });
}

const DIAMOND: &str = "workflow W() {
    step a -> u32 { action: f(), compensate: undo(a) }
    step b -> u32 { action: g(a), compensate: undo(b) }
    step c -> u32 { action: g(a) }
    step d -> u32 { action: h(b, c) }
}";

#[test]
fn a_diamond_runs_its_branches_together_and_completes() {
    let spec = spec(DIAMOND);
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    assert_eq!(next(&machine, 0), [start(0)]);
    run(&mut machine, 0, 1);
    assert_eq!(next(&machine, 1), [start(1), start(2)]);
    run(&mut machine, 2, 2);
    run(&mut machine, 1, 3);
    assert_eq!(next(&machine, 3), [start(3)]);
    run(&mut machine, 3, 4);
    assert_eq!(machine.status(), Status::Completed);
    assert_eq!(next(&machine, 4), [Command::Finish(Status::Completed)]);
    assert_eq!(machine.completion_order(), [0, 2, 1, 3]);
}

#[test]
fn the_in_flight_limit_holds_back_ready_steps() {
    let spec = spec(DIAMOND);
    let mut machine = Machine::new(&spec).with_max_in_flight(1);
    started(&mut machine);
    run(&mut machine, 0, 1);
    assert_eq!(next(&machine, 1), [start(1)]);
}

#[test]
fn a_transient_failure_waits_its_delay_then_retries() {
    let spec = spec(
        "workflow W() { step a -> u32 { action: f(), retry: { max_attempts: 2, backoff: fixed, initial: 5s, max: 5s, jitter: none } } }",
    );
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    machine.apply(&Event::AttemptStarted {
        step: 0,
        attempt: 1,
        at: 0,
    });
    machine.apply(&Event::AttemptFailed {
        step: 0,
        attempt: 1,
        kind: ErrorKind::Unavailable,
        message: "503".into(),
        retry_after: None,
        safe_after: None,
        at: 100,
    });
    assert_eq!(
        machine.states()[0],
        StepState::RetryWait {
            attempt: 1,
            until: 5_100
        }
    );
    assert_eq!(machine.next_wake(), Some(5_100));
    assert!(next(&machine, 5_099).is_empty());
    assert_eq!(
        next(&machine, 5_100),
        [Command::Attempt {
            step: 0,
            item: None,
            attempt: 2,
            reconcile: false
        }]
    );
    machine.apply(&Event::AttemptStarted {
        step: 0,
        attempt: 2,
        at: 5_100,
    });
    machine.apply(&Event::AttemptFailed {
        step: 0,
        attempt: 2,
        kind: ErrorKind::Unavailable,
        message: "503".into(),
        retry_after: None,
        safe_after: None,
        at: 5_200,
    });
    assert_eq!(
        machine.status(),
        Status::Failed,
        "nothing to compensate, nothing in flight"
    );
    assert_eq!(next(&machine, 5_200), [Command::Finish(Status::Failed)]);
}

#[test]
fn an_abort_compensates_in_reverse_completion_order() {
    let spec = spec(DIAMOND);
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    run(&mut machine, 0, 1);
    run(&mut machine, 1, 2);
    machine.apply(&Event::AttemptStarted {
        step: 2,
        attempt: 1,
        at: 3,
    });
    machine.apply(&Event::AttemptFailed {
        step: 2,
        attempt: 1,
        kind: ErrorKind::Validation,
        message: "bad".into(),
        retry_after: None,
        safe_after: None,
        at: 3,
    });
    assert_eq!(machine.status(), Status::Compensating);
    assert_eq!(
        next(&machine, 3),
        [Command::Compensate {
            step: 1,
            item: None
        }]
    );
    machine.apply(&Event::CompensationStarted {
        step: 1,
        item: None,
        at: 3,
    });
    assert!(
        next(&machine, 3).is_empty(),
        "a compensation in flight is not started twice"
    );
    machine.apply(&Event::Compensated {
        step: 1,
        item: None,
        error: None,
        at: 4,
    });
    assert_eq!(
        next(&machine, 4),
        [Command::Compensate {
            step: 0,
            item: None
        }]
    );
    machine.apply(&Event::CompensationStarted {
        step: 0,
        item: None,
        at: 4,
    });
    machine.apply(&Event::Compensated {
        step: 0,
        item: None,
        error: None,
        at: 5,
    });
    assert_eq!(machine.status(), Status::Failed);
    assert!(matches!(
        machine.stop(),
        Some(Stop::StepFailed {
            step: 2,
            attempts: 1,
            ..
        })
    ));
}

#[test]
fn an_attempt_without_a_result_is_resumed_after_a_replay() {
    let spec = spec(DIAMOND);
    let events = [
        run_started(false),
        Event::AttemptStarted {
            step: 0,
            attempt: 1,
            at: 0,
        },
    ];
    let machine = Machine::replay(&spec, &events);
    assert_eq!(next(&machine, 10), [start(0)]);
}

const REVIEW: &str = r#"workflow W() {
    human h -> Approval { assignee: "a", timeout: 1h, on_timeout: escalate("b"), prompt: "ok?" }
}"#;

const CHARGE: &str = "workflow W() {
    step charge -> u32 { action: f(), effect: external }
}";

fn interrupted(source: &str) -> Vec<Command> {
    let spec = spec(source);
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    machine.apply(&Event::AttemptStarted {
        step: 0,
        attempt: 1,
        at: 0,
    });
    let journal = [
        run_started(false),
        Event::AttemptStarted {
            step: 0,
            attempt: 1,
            at: 0,
        },
    ];
    let replayed = Machine::replay(&spec, &journal);
    assert!(
        next(&machine, 10).is_empty(),
        "live: the attempt is in flight"
    );
    next(&replayed, 10)
}

#[test]
fn an_interrupted_external_effect_is_never_repeated_blindly() {
    let unknown = interrupted(CHARGE);
    assert!(
        matches!(
            &unknown[..],
            [Command::Journal(Event::AttemptFailed { kind: ErrorKind::OutcomeUnknown, attempt: 1, message, .. })]
                if message.contains("`charge`") && message.contains("attempt 1")
        ),
        "{unknown:?}"
    );
    assert_eq!(
        interrupted("workflow W() { step charge -> u32 { action: f(), effect: external, idempotent: true } }"),
        [start(0)],
        "idempotent: the same key makes a re-run safe"
    );
    assert_eq!(
        interrupted(
            "workflow W() { step charge -> u32 { action: f(), effect: external, reconcile: g() } }"
        ),
        [Command::Attempt {
            step: 0,
            item: None,
            attempt: 1,
            reconcile: true
        }],
        "reconciled first"
    );
    assert_eq!(
        interrupted("workflow W() { step work -> u32 { action: f() } }"),
        [start(0)],
        "internal steps run again"
    );
}

#[test]
fn an_unknown_outcome_fails_the_run_for_a_person_to_decide() {
    let spec = spec(CHARGE);
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    machine.apply(&Event::AttemptStarted {
        step: 0,
        attempt: 1,
        at: 0,
    });
    let mut replayed = Machine::replay(
        &spec,
        &[
            run_started(false),
            Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at: 0,
            },
        ],
    );
    for command in next(&replayed, 10) {
        if let Command::Journal(event) = command {
            replayed.apply(&event);
        }
    }
    assert_eq!(replayed.status(), Status::Failed);
    let (step, attempts, kind, _) = replayed.failure().expect("a failure to report");
    assert_eq!(
        (step.as_str(), attempts, kind),
        ("charge", 1, ErrorKind::OutcomeUnknown)
    );
}

#[test]
fn an_interrupted_compensation_runs_again_after_a_replay() {
    let spec = spec(DIAMOND);
    let mut events = vec![run_started(false)];
    events.push(Event::AttemptStarted {
        step: 0,
        attempt: 1,
        at: 1,
    });
    events.push(Event::StepSucceeded {
        step: 0,
        output: json!(0),
        at: 1,
    });
    events.push(Event::AttemptStarted {
        step: 1,
        attempt: 1,
        at: 2,
    });
    events.push(Event::AttemptFailed {
        step: 1,
        attempt: 1,
        kind: ErrorKind::Validation,
        message: "bad".into(),
        retry_after: None,
        safe_after: None,
        at: 2,
    });
    events.push(Event::CompensationStarted {
        step: 0,
        item: None,
        at: 3,
    });
    let replayed = Machine::replay(&spec, &events);
    assert_eq!(
        next(&replayed, 4),
        [Command::Compensate {
            step: 0,
            item: None
        }]
    );
    let mut live = Machine::new(&spec);
    for event in &events {
        live.apply(event);
    }
    assert!(next(&live, 4).is_empty(), "live: it is in flight");
}

#[test]
fn cancel_and_retry_are_the_machines_to_allow() {
    let spec = spec(DIAMOND);
    let run = RunId(1);
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    assert!(matches!(
        machine.retry(run, "ops", 1, false),
        Err(RunError::NotFailed(_))
    ));
    let cancel = machine
        .cancel("ops", 1)
        .expect("a running run can be cancelled");
    machine.apply(&cancel);
    assert_eq!(machine.status(), Status::Cancelled);
    assert_eq!(machine.cancel("ops", 2), None, "once");
}

#[test]
fn conditions_and_dry_runs_are_decided_here() {
    let spec = spec(
        "workflow W() {
        step a -> u32 { action: f(), condition: false }
        step b -> u32 { action: g(), effect: external }
    }",
    );
    struct Never;
    impl Hooks for Never {
        fn condition(&self, _: usize, _: &[Option<Value>]) -> Result<bool, CallError> {
            Ok(false)
        }
        fn proposal(&self, _: usize, _: &[Option<Value>], _: Option<(usize, &Value)>) -> Value {
            json!({ "to": "x" })
        }
        fn items(&self, step: usize, _: &[Option<Value>]) -> Result<Vec<Value>, CallError> {
            Err(CallError::NoSuchCall(step))
        }
        fn event(&self, _: usize, payload: Value) -> Result<Value, CallError> {
            Ok(payload)
        }
        fn timeout_decision(&self, step: usize, _: bool) -> Result<Value, CallError> {
            Err(CallError::NoSuchCall(step))
        }
        fn decision(&self, _: usize, decision: Value) -> Result<Value, CallError> {
            Ok(decision)
        }
    }
    let mut machine = Machine::new(&spec);
    machine.apply(&run_started(true));
    assert_eq!(
        machine.next(5, &Never),
        [
            Command::Journal(Event::StepSkipped {
                step: 0,
                reason: "condition `false` is false".into(),
                at: 5
            }),
            Command::Journal(Event::EffectProposed {
                step: 1,
                item: None,
                args: json!({ "to": "x" }),
                at: 5
            }),
            Command::Journal(Event::StepSkipped {
                step: 1,
                reason: "dry run: external effect proposed, not executed".into(),
                at: 5
            }),
        ]
    );
}

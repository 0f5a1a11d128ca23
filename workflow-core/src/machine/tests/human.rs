//! Human tasks in the pure machine: opening, deadlines and escalation, timeout decisions,
//! admission of decisions and inbox messages.

use serde_json::json;

use super::*;

fn opened(machine: &mut Machine<'_>) {
    started(machine);
    machine.apply(&Event::TaskOpened {
        step: 0,
        assignee: "a".into(),
        prompt: Some("ok?".into()),
        deadline: 3_600_000,
        at: 0,
    });
}

#[test]
fn a_human_task_opens_with_its_assignee_and_deadline_then_escalates_once() {
    let spec = spec(REVIEW);
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    assert_eq!(
        next(&machine, 1_000),
        [Command::Journal(Event::TaskOpened {
            step: 0,
            assignee: "a".into(),
            prompt: Some("ok?".into()),
            deadline: 3_601_000,
            at: 1_000,
        })]
    );
    let mut machine = Machine::new(&spec);
    opened(&mut machine);
    assert!(next(&machine, 3_599_999).is_empty());
    let escalation = Event::TaskEscalated {
        step: 0,
        to: "b".into(),
        deadline: 7_200_000,
        at: 3_600_000,
    };
    assert_eq!(
        next(&machine, 3_600_000),
        [Command::Journal(escalation.clone())]
    );
    machine.apply(&escalation);
    assert_eq!(
        next(&machine, 7_200_000),
        [Command::Journal(Event::TaskExpired {
            step: 0,
            at: 7_200_000
        })],
        "escalation happens once"
    );
}

/// Hooks that decide `on_timeout: approve | reject` as an `Approval` would.
struct Approvals;

impl Hooks for Approvals {
    fn condition(&self, _: usize, _: &[Option<Value>]) -> Result<bool, CallError> {
        Ok(true)
    }
    fn proposal(&self, step: usize, _: &[Option<Value>], _: Option<(usize, &Value)>) -> Value {
        json!({ "step": step })
    }
    fn items(&self, step: usize, _: &[Option<Value>]) -> Result<Vec<Value>, CallError> {
        Err(CallError::NoSuchCall(step))
    }
    fn event(&self, _: usize, payload: Value) -> Result<Value, CallError> {
        Ok(payload)
    }
    fn timeout_decision(&self, _: usize, approved: bool) -> Result<Value, CallError> {
        Ok(json!({ "approved": approved, "by": "system", "comment": null }))
    }
    fn decision(&self, step: usize, decision: Value) -> Result<Value, CallError> {
        match decision.get("approved") {
            Some(Value::Bool(_)) => Ok(decision),
            _ => Err(CallError::Decode {
                step,
                message: "missing field `approved`".into(),
            }),
        }
    }
}

#[test]
fn on_timeout_approve_records_the_decision_the_hooks_build() {
    let spec = spec(
        r#"workflow W() { human h -> Approval { assignee: "a", timeout: 1h, on_timeout: approve } }"#,
    );
    let mut machine = Machine::new(&spec);
    opened(&mut machine);
    assert_eq!(
        machine.next(3_600_000, &Approvals),
        [Command::Journal(Event::TaskDecided {
            step: 0,
            by: crate::human::TIMEOUT_DECIDER.into(),
            decision: json!({ "approved": true, "by": "system", "comment": null }),
            inbox: None,
            at: 3_600_000,
        })]
    );
    assert_eq!(
        machine.next(3_600_000, &NoHooks),
        [Command::Journal(Event::TaskExpired {
            step: 0,
            at: 3_600_000
        })],
        "without a decision to record, the task expires"
    );
}

fn members_of(assignee: &str, by: &str) -> bool {
    by.ends_with(&format!("@{assignee}"))
}

#[test]
fn a_decision_is_admitted_once_in_time_from_an_authorized_approver() {
    let spec = spec(REVIEW);
    let run = RunId(7);
    let mut machine = Machine::new(&spec);
    started(&mut machine);
    assert!(
        matches!(
            machine.admit(run, "h", "ana@a", 0, Some(&members_of)),
            Err(DecisionError::UnknownTask { .. })
        ),
        "not open yet"
    );
    opened(&mut machine);
    assert!(matches!(
        machine.admit(run, "nope", "ana@a", 0, None),
        Err(DecisionError::UnknownTask { .. })
    ));
    assert!(matches!(
        machine.decide(run, "h", "eve@x", json!({"approved": true}), 10, &members_of, &Approvals),
        Err(DecisionError::Unauthorized { assignee, .. }) if assignee == "a"
    ));
    assert!(matches!(
        machine.decide(
            run,
            "h",
            "ana@a",
            json!({"approved": 1}),
            10,
            &members_of,
            &Approvals
        ),
        Err(DecisionError::WrongType { .. })
    ));
    assert!(matches!(
        machine.decide(
            run,
            "h",
            "ana@a",
            json!({"approved": true}),
            3_600_000,
            &members_of,
            &Approvals
        ),
        Err(DecisionError::Expired { .. })
    ));
    assert_eq!(
        machine.admit(run, "h", "eve@x", 10, None),
        Ok(0),
        "without an authorizer the approver is left to the owner"
    );
    let decided = machine
        .decide(
            run,
            "h",
            "ana@a",
            json!({"approved": true, "by": "mallory"}),
            10,
            &members_of,
            &Approvals,
        )
        .expect("admitted");
    assert_eq!(
        decided,
        Event::TaskDecided {
            step: 0,
            by: "ana@a".into(),
            decision: json!({"approved": true, "by": "ana@a"}),
            inbox: None,
            at: 10,
        },
        "the decision records who decided, not who they claimed to be"
    );
    machine.apply(&decided);
    assert!(matches!(
        machine.admit(run, "h", "bob@a", 11, Some(&members_of)),
        Err(DecisionError::AlreadyDecided { by, .. }) if by == "ana@a"
    ));
}

#[test]
fn inbox_messages_become_decisions_or_refusals() {
    let spec = spec(REVIEW);
    let run = RunId(7);
    let mut machine = Machine::new(&spec);
    opened(&mut machine);
    let item = |id: u64, by: &str, at: Timestamp| InboxItem {
        id,
        run,
        message: Message::Decision {
            step: "h".into(),
            by: by.into(),
            decision: json!({"approved": false, "comment": "no"}),
        },
        at,
    };
    let refused = machine.take_in(run, &item(4, "eve@x", 5), 20, &members_of, &Approvals);
    assert!(matches!(
        &refused,
        Event::MessageRefused { inbox: 4, step: Some(0), code, .. } if code == "unauthorized"
    ));
    machine.apply(&refused);
    assert_eq!(machine.inbox_cursor(), 4);
    assert!(machine.open_tasks().next().is_some(), "the task stays open");
    let late_but_sent_in_time = machine.take_in(
        run,
        &item(5, "ana@a", 3_599_999),
        9_000_000,
        &members_of,
        &Approvals,
    );
    assert!(matches!(
        &late_but_sent_in_time,
        Event::TaskDecided {
            inbox: Some(5),
            at: 9_000_000,
            ..
        }
    ));
    machine.apply(&late_but_sent_in_time);
    assert_eq!(machine.status(), Status::Completed);
    let cancel = InboxItem {
        id: 6,
        run,
        message: Message::Cancel { by: "ops".into() },
        at: 9_000_001,
    };
    assert!(matches!(
        machine.take_in(run, &cancel, 9_000_001, &members_of, &Approvals),
        Event::MessageRefused { code, .. } if code == "finished"
    ));
}

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
            by: crate::machine::TIMEOUT_DECIDER.into(),
            decision: json!({ "approved": true, "by": "system", "comment": null }),
            inbox: None,
            via: None,
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
        machine.decide(run, "h", "eve@x", json!({"approved": true}), None, 10, &members_of, &Approvals),
        Err(DecisionError::Unauthorized { assignee, .. }) if assignee == "a"
    ));
    assert!(matches!(
        machine.decide(
            run,
            "h",
            "ana@a",
            json!({"approved": 1}),
            None,
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
            None,
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
            None,
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
            via: None,
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
fn how_a_decision_was_made_is_journaled_by_the_machine_on_both_paths() {
    let spec = spec(REVIEW);
    let run = RunId(7);
    let mut machine = Machine::new(&spec);
    opened(&mut machine);
    let decision = json!({"approved": true});
    let direct = machine.decide(
        run,
        "h",
        "ana@a",
        decision.clone(),
        Some(crate::VIA_LINK),
        10,
        &members_of,
        &Approvals,
    );
    assert!(
        matches!(&direct, Ok(Event::TaskDecided { via: Some(via), inbox: None, .. }) if via == "link"),
        "{direct:?}"
    );
    let signed_in = machine.decide(
        run,
        "h",
        "ana@a",
        decision.clone(),
        None,
        10,
        &members_of,
        &Approvals,
    );
    assert!(
        matches!(&signed_in, Ok(Event::TaskDecided { via: None, .. })),
        "{signed_in:?}"
    );
    // Through the inbox of the engine that drives the run.
    let item = |via: Option<&str>| InboxItem {
        id: 3,
        run,
        message: Message::Decision {
            step: "h".into(),
            by: "ana@a".into(),
            decision: decision.clone(),
            via: via.map(str::to_owned),
        },
        at: 10,
    };
    let taken = machine.take_in(run, &item(Some("link")), 20, &members_of, &Approvals);
    assert!(
        matches!(&taken, Event::TaskDecided { via: Some(via), inbox: Some(3), .. } if via == "link"),
        "{taken:?}"
    );
    let taken = machine.take_in(run, &item(None), 20, &members_of, &Approvals);
    assert!(
        matches!(
            &taken,
            Event::TaskDecided {
                via: None,
                inbox: Some(3),
                ..
            }
        ),
        "{taken:?}"
    );
    // A refused message records no decision, however it was made.
    let late = InboxItem {
        at: 3_600_001,
        ..item(Some("link"))
    };
    let refused = machine.take_in(run, &late, 3_600_001, &members_of, &Approvals);
    assert!(
        matches!(&refused, Event::MessageRefused { .. }),
        "{refused:?}"
    );
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
            via: None,
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

const QUORUM: &str = r#"workflow W() {
    human h -> Approval {
        assignee: "a",
        approvals: 2,
        self_approval: false,
        timeout: 1h,
        on_timeout: escalate("b"),
    }
}"#;

/// A machine for [`QUORUM`] started by `ana@a`, its task open.
fn quorum_opened(spec: &Spec) -> Machine<'_> {
    let mut machine = Machine::new(spec);
    opened(&mut machine);
    machine.apply(&Event::Initiated {
        by: "ana@a".into(),
        at: 0,
    });
    machine
}

fn approve(machine: &Machine<'_>, by: &str, at: Timestamp) -> Result<Event, DecisionError> {
    machine.decide(
        RunId(7),
        "h",
        by,
        json!({"approved": true}),
        None,
        at,
        &members_of,
        &Approvals,
    )
}

#[test]
fn a_quorum_needs_distinct_approvers_and_the_last_one_decides() {
    let spec = spec(QUORUM);
    let mut machine = quorum_opened(&spec);
    let first = approve(&machine, "bob@a", 10).expect("admitted");
    assert_eq!(
        first,
        Event::TaskApproved {
            step: 0,
            by: "bob@a".into(),
            decision: json!({"approved": true}),
            inbox: None,
            via: None,
            at: 10,
        },
        "one approval of two leaves the task open"
    );
    machine.apply(&first);
    assert_eq!(machine.approvers(0), ["bob@a"]);
    assert!(machine.open_tasks().next().is_some());
    assert_eq!(machine.status(), Status::Running);
    assert_eq!(
        approve(&machine, "bob@a", 11),
        Err(DecisionError::AlreadyApproved {
            step: "h".into(),
            by: "bob@a".into()
        }),
        "the same person twice does not make a quorum"
    );
    let second = approve(&machine, "cy@a", 12).expect("admitted");
    assert!(matches!(&second, Event::TaskDecided { by, .. } if by == "cy@a"));
    machine.apply(&second);
    assert_eq!(machine.status(), Status::Completed);
    assert_eq!(machine.deciders()[0].as_deref(), Some("cy@a"));
}

#[test]
fn a_rejection_by_anyone_rejects_a_quorum() {
    let spec = spec(QUORUM);
    let mut machine = quorum_opened(&spec);
    let first = approve(&machine, "bob@a", 10).expect("admitted");
    machine.apply(&first);
    let rejected = machine
        .decide(
            RunId(7),
            "h",
            "cy@a",
            json!({"approved": false, "comment": "no"}),
            None,
            11,
            &members_of,
            &Approvals,
        )
        .expect("admitted");
    assert!(matches!(
        &rejected,
        Event::TaskDecided { by, decision, .. } if by == "cy@a" && decision["approved"] == false
    ));
    machine.apply(&rejected);
    assert_eq!(machine.status(), Status::Completed);
    assert_eq!(machine.outputs()[0].as_ref().unwrap()["approved"], false);
    // A rejection as the very first decision rejects at once too.
    let mut machine = quorum_opened(&spec);
    let rejected = machine
        .decide(
            RunId(7),
            "h",
            "bob@a",
            json!({"approved": false}),
            None,
            10,
            &members_of,
            &Approvals,
        )
        .expect("admitted");
    assert!(matches!(rejected, Event::TaskDecided { .. }));
    machine.apply(&rejected);
    assert_eq!(machine.status(), Status::Completed);
}

#[test]
fn the_initiator_may_not_decide_a_step_without_self_approval() {
    let spec = spec(QUORUM);
    let machine = quorum_opened(&spec);
    assert_eq!(machine.initiator(), Some("ana@a"));
    assert_eq!(
        approve(&machine, "ana@a", 10),
        Err(DecisionError::SelfApproval {
            step: "h".into(),
            by: "ana@a".into()
        })
    );
    assert_eq!(
        machine
            .admit(RunId(7), "h", "ana@a", 10, None)
            .map_err(|error| error.code()),
        Err("self_approval"),
        "refused without an authorizer too (the CLI's and the server's pre-check)"
    );
    assert_eq!(
        machine
            .delegate(RunId(7), "h", "ana@a", "bob@a", 10, Some(&members_of))
            .map_err(|error| error.code()),
        Err("self_approval"),
        "nor hand it to a friend"
    );
    // Where self-approval is allowed (the default), the initiator decides like anyone.
    let review = spec_of_review();
    let mut allowed = Machine::new(&review);
    opened(&mut allowed);
    allowed.apply(&Event::Initiated {
        by: "ana@a".into(),
        at: 0,
    });
    assert!(matches!(
        allowed.decide(
            RunId(7),
            "h",
            "ana@a",
            json!({"approved": true}),
            None,
            10,
            &members_of,
            &Approvals
        ),
        Ok(Event::TaskDecided { .. })
    ));
}

#[test]
fn a_delegated_task_is_decided_by_the_delegate_before_the_same_deadline() {
    let spec = spec(QUORUM);
    let mut machine = quorum_opened(&spec);
    let run = RunId(7);
    assert_eq!(
        machine
            .delegate(run, "h", "eve@x", "c", 10, Some(&members_of))
            .map_err(|error| error.code()),
        Err("unauthorized"),
        "only someone allowed to decide may delegate"
    );
    for to in ["", "  ", "a"] {
        assert!(matches!(
            machine.delegate(run, "h", "bob@a", to, 10, Some(&members_of)),
            Err(DecisionError::InvalidDelegate { .. })
        ));
    }
    let delegated = machine
        .delegate(run, "h", "bob@a", "c@b", 10, Some(&members_of))
        .expect("admitted");
    assert_eq!(
        delegated,
        Event::TaskDelegated {
            step: 0,
            by: "bob@a".into(),
            to: "c@b".into(),
            inbox: None,
            at: 10,
        }
    );
    machine.apply(&delegated);
    assert!(matches!(
        &machine.states()[0],
        StepState::Waiting { assignee, deadline: 3_600_000, escalated: false } if assignee == "c@b"
    ));
    assert!(
        matches!(
            approve(&machine, "cy@a", 11),
            Err(DecisionError::Unauthorized { .. })
        ),
        "the former assignee no longer decides"
    );
    let first = approve(&machine, "dan@c@b", 11).expect("the delegate decides");
    machine.apply(&first);
    let second = approve(&machine, "eli@c@b", 12).expect("the delegate decides");
    machine.apply(&second);
    assert_eq!(machine.status(), Status::Completed);
    // The deadline is unchanged: past it, the escalation still happens on time.
    let mut late = quorum_opened(&spec);
    late.apply(&delegated);
    assert!(matches!(
        next(&late, 3_600_000).as_slice(),
        [Command::Journal(Event::TaskEscalated { to, .. })] if to == "b"
    ));
}

#[test]
fn delegation_keeps_four_eyes() {
    let spec = spec(QUORUM);
    let run = RunId(7);
    let mut machine = quorum_opened(&spec);
    let first = approve(&machine, "bob@a", 10).expect("admitted");
    machine.apply(&first);
    let code = |machine: &Machine<'_>, by: &str, to: &str| {
        machine
            .delegate(run, "h", by, to, 11, Some(&members_of))
            .map(drop)
            .map_err(|error| error.code())
    };
    // One approval and a name she chose would complete the quorum.
    assert_eq!(
        code(&machine, "bob@a", "cy@a"),
        Err("approver_may_not_delegate")
    );
    assert!(
        matches!(
            machine.delegate(run, "h", "bob@a", "cy@a", 11, None),
            Err(DecisionError::ApproverDelegating { .. })
        ),
        "refused without an authorizer too"
    );
    // Nor may anyone hand it to someone who approved already, to the initiator of a
    // `self_approval: false` step, or to someone the authorizer does not admit for its
    // assignee (`a`) or escalation target (`b`).
    assert_eq!(code(&machine, "cy@a", "bob@a"), Err("delegate_approved"));
    assert_eq!(
        code(&machine, "cy@a", "ana@a"),
        Err("delegate_is_initiator")
    );
    assert_eq!(
        code(&machine, "cy@a", "eve@x"),
        Err("delegate_not_admitted")
    );
    assert_eq!(code(&machine, "cy@a", "x"), Err("delegate_not_admitted"));
    // Without an authorizer (a pre-check) the admission is left to the run's owner; the
    // other rules hold.
    assert!(machine
        .delegate(run, "h", "cy@a", "eve@x", 11, None)
        .is_ok());
    assert!(matches!(
        machine.delegate(run, "h", "cy@a", "ana@a", 11, None),
        Err(DecisionError::DelegateIsInitiator { .. })
    ));
    // A member of the assignee or of the escalation target may take it.
    assert_eq!(code(&machine, "cy@a", "dan@a"), Ok(()));
    assert_eq!(code(&machine, "cy@a", "dan@b"), Ok(()));
    // The person it is handed to decides it, though the authorizer admits only members
    // of a group (`dan@b` is no member of `dan@b`); nobody else of their name's group does.
    let mut handed = machine.clone();
    let delegated = handed
        .delegate(run, "h", "cy@a", "dan@b", 11, Some(&members_of))
        .unwrap();
    handed.apply(&delegated);
    assert!(matches!(
        approve(&handed, "eve@b", 12),
        Err(DecisionError::Unauthorized { .. })
    ));
    assert!(matches!(
        approve(&handed, "dan@b", 12),
        Ok(Event::TaskDecided { .. })
    ));
    // The same rules arrive through the inbox, journaled as refusals.
    let refused = machine.take_in(
        run,
        &InboxItem {
            id: 9,
            run,
            message: Message::Delegate {
                step: "h".into(),
                by: "bob@a".into(),
                to: "cy@a".into(),
            },
            at: 12,
        },
        13,
        &members_of,
        &Approvals,
    );
    assert!(matches!(
        &refused,
        Event::MessageRefused { inbox: 9, code, .. } if code == "approver_may_not_delegate"
    ));
}

#[test]
fn quorum_and_delegation_messages_from_the_inbox_are_journaled_with_their_message() {
    let spec = spec(QUORUM);
    let run = RunId(7);
    let mut machine = quorum_opened(&spec);
    let item = |id: u64, message: Message| InboxItem {
        id,
        run,
        message,
        at: 5,
    };
    let decision = |by: &str| Message::Decision {
        step: "h".into(),
        by: by.into(),
        decision: json!({"approved": true}),
        via: None,
    };
    let first = machine.take_in(
        run,
        &item(1, decision("bob@a")),
        20,
        &members_of,
        &Approvals,
    );
    assert!(matches!(
        &first,
        Event::TaskApproved { inbox: Some(1), at: 20, by, .. } if by == "bob@a"
    ));
    machine.apply(&first);
    let again = machine.take_in(
        run,
        &item(2, decision("bob@a")),
        21,
        &members_of,
        &Approvals,
    );
    assert!(matches!(
        &again,
        Event::MessageRefused { inbox: 2, code, .. } if code == "already_approved"
    ));
    machine.apply(&again);
    let own = machine.take_in(
        run,
        &item(3, decision("ana@a")),
        22,
        &members_of,
        &Approvals,
    );
    assert!(matches!(
        &own,
        Event::MessageRefused { inbox: 3, code, .. } if code == "self_approval"
    ));
    machine.apply(&own);
    let delegate = Message::Delegate {
        step: "h".into(),
        by: "eve@x".into(),
        to: "c".into(),
    };
    let refused = machine.take_in(run, &item(4, delegate), 23, &members_of, &Approvals);
    assert!(
        matches!(&refused, Event::MessageRefused { code, .. } if code == "unauthorized"),
        "an outsider may not delegate: {refused:?}"
    );
    machine.apply(&refused);
    let delegate = Message::Delegate {
        step: "h".into(),
        by: "cy@a".into(),
        to: "c@b".into(),
    };
    let delegated = machine.take_in(run, &item(5, delegate), 24, &members_of, &Approvals);
    assert!(matches!(
        &delegated,
        Event::TaskDelegated { inbox: Some(5), at: 24, to, .. } if to == "c@b"
    ));
    machine.apply(&delegated);
    assert_eq!(machine.inbox_cursor(), 5);
    let last = machine.take_in(
        run,
        &item(6, decision("dan@c@b")),
        25,
        &members_of,
        &Approvals,
    );
    assert!(
        matches!(&last, Event::TaskDecided { inbox: Some(6), .. }),
        "bob's approval before the delegation counts towards the quorum"
    );
    machine.apply(&last);
    assert_eq!(machine.status(), Status::Completed);
}

#[test]
fn a_replayed_journal_keeps_the_quorum_the_initiator_and_the_delegate() {
    let spec = spec(QUORUM);
    let events = [
        run_started(false),
        Event::Initiated {
            by: "ana@a".into(),
            at: 0,
        },
        Event::TaskOpened {
            step: 0,
            assignee: "a".into(),
            prompt: None,
            deadline: 3_600_000,
            at: 0,
        },
        Event::TaskApproved {
            step: 0,
            by: "bob@a".into(),
            decision: json!({"approved": true}),
            inbox: None,
            via: None,
            at: 1,
        },
        Event::TaskDelegated {
            step: 0,
            by: "cy@a".into(),
            to: "c".into(),
            inbox: None,
            at: 2,
        },
    ];
    let machine = Machine::replay(&spec, &events);
    assert_eq!(machine.initiator(), Some("ana@a"));
    assert_eq!(machine.approvers(0), ["bob@a"]);
    assert!(matches!(&machine.states()[0], StepState::Waiting { assignee, .. } if assignee == "c"));
    // Journals written before these events existed read as before: an old journal's
    // events parse, and a step without `approvals` needs one.
    let old: Event = serde_json::from_value(json!({
        "event": "task_decided", "step": 0, "by": "x", "decision": {"approved": true}, "at": 3
    }))
    .expect("an old event parses");
    assert!(matches!(old, Event::TaskDecided { inbox: None, .. }));
    assert_eq!(Machine::new(&spec_of_review()).approvals_needed(0), 1);
}

fn spec_of_review() -> Spec {
    spec(REVIEW)
}

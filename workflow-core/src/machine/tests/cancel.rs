//! What the machine decides for the attempts in flight of a cancelled run.

use super::*;

fn cancelled_with(source: &str, grace_ms: u64) -> (Spec, u64) {
    (spec(source), grace_ms)
}

/// A machine whose two steps (`work`, internal, and `call`, `effect`) are in flight,
/// cancelled at 1 000 ms.
fn in_flight<'s>(spec: &'s Spec, grace_ms: u64) -> Machine<'s> {
    let mut machine = Machine::new(spec).with_cancel_grace(grace_ms);
    started(&mut machine);
    for step in 0..2 {
        machine.apply(&Event::AttemptStarted {
            step,
            attempt: 1,
            at: 10,
        });
    }
    machine.apply(&Event::Cancelled {
        by: "ops".into(),
        inbox: None,
        at: 1_000,
    });
    machine
}

fn stop(step: usize, kind: Option<ErrorKind>) -> impl Fn(&Command) -> bool {
    move |command| match command {
        Command::Stop {
            step: s,
            item: None,
            attempt: 1,
            settle,
        } if *s == step => match (settle, kind) {
            (Some(Event::AttemptFailed { kind: k, .. }), Some(kind)) => *k == kind,
            (None, None) => true,
            _ => false,
        },
        _ => false,
    }
}

#[test]
fn an_internal_step_stops_at_once_and_an_external_one_after_the_grace() {
    let (spec, grace) = cancelled_with(
        "workflow W() {
            step work -> u32 { action: f() }
            step call -> u32 { action: g(), effect: external }
        }",
        5_000,
    );
    let machine = in_flight(&spec, grace);
    assert!(machine.is_cancelling());
    let now = next(&machine, 1_000);
    assert_eq!(now.len(), 1, "{now:?}");
    assert!(stop(0, Some(ErrorKind::Cancelled))(&now[0]), "{now:?}");
    // The external effect is waited for until the grace ends, and no sooner.
    assert_eq!(machine.next_wake(), Some(6_000));
    let mut machine = machine;
    if let Command::Stop {
        settle: Some(event),
        ..
    } = &now[0]
    {
        machine.apply(event);
    }
    assert!(next(&machine, 5_999).is_empty());
    let later = next(&machine, 6_000);
    assert_eq!(later.len(), 1, "{later:?}");
    assert!(
        stop(1, Some(ErrorKind::OutcomeUnknown))(&later[0]),
        "{later:?}"
    );
}

#[test]
fn past_the_grace_a_reconciled_effect_is_asked_and_an_idempotent_one_settles_cancelled() {
    let (spec, grace) = cancelled_with(
        "workflow W() {
            step asked -> u32 { action: f(), effect: external, reconcile: r() }
            step safe -> u32 { action: g(), effect: external, idempotent: true }
        }",
        0,
    );
    let mut machine = in_flight(&spec, grace);
    let now = next(&machine, 1_000);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(stop(0, None)(&now[0]), "{now:?}");
    assert!(stop(1, Some(ErrorKind::Cancelled))(&now[1]), "{now:?}");
    // The stopped, reconciled attempt is not stopped twice while its answer is awaited.
    machine.apply(&Event::AttemptStopped {
        step: 0,
        item: None,
        attempt: 1,
        at: 1_000,
    });
    if let Command::Stop {
        settle: Some(event),
        ..
    } = &now[1]
    {
        machine.apply(event);
    }
    assert!(next(&machine, 1_001).is_empty());
    assert_eq!(machine.next_wake(), None);
    // Its answer settles it; compensation (none here) and the end follow.
    machine.apply(&Event::AttemptFailed {
        step: 0,
        attempt: 1,
        kind: ErrorKind::Cancelled,
        message: "not happened".into(),
        retry_after: None,
        safe_after: None,
        at: 1_002,
    });
    assert_eq!(machine.states()[0].name(), "cancelled");
    assert_eq!(next(&machine, 1_002), [Command::Finish(Status::Cancelled)]);
}

#[test]
fn a_replayed_stop_whose_answer_was_lost_is_stopped_again() {
    let (spec, grace) = cancelled_with(
        "workflow W() {
            step asked -> u32 { action: f(), effect: external, reconcile: r() }
            step other -> u32 { action: g() }
        }",
        0,
    );
    let mut machine = in_flight(&spec, grace);
    machine.apply(&Event::AttemptFailed {
        step: 1,
        attempt: 1,
        kind: ErrorKind::Cancelled,
        message: "stopped".into(),
        retry_after: None,
        safe_after: None,
        at: 1_000,
    });
    machine.apply(&Event::AttemptStopped {
        step: 0,
        item: None,
        attempt: 1,
        at: 1_000,
    });
    assert!(next(&machine, 1_000).is_empty());
    let mut events = vec![run_started(false)];
    events.extend([0, 1].map(|step| Event::AttemptStarted {
        step,
        attempt: 1,
        at: 10,
    }));
    events.push(Event::Cancelled {
        by: "ops".into(),
        inbox: None,
        at: 1_000,
    });
    events.push(Event::AttemptFailed {
        step: 1,
        attempt: 1,
        kind: ErrorKind::Cancelled,
        message: "stopped".into(),
        retry_after: None,
        safe_after: None,
        at: 1_000,
    });
    events.push(Event::AttemptStopped {
        step: 0,
        item: None,
        attempt: 1,
        at: 1_000,
    });
    let replayed = Machine::replay(&spec, &events).with_cancel_grace(0);
    let again = next(&replayed, 2_000);
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(stop(0, None)(&again[0]), "{again:?}");
}

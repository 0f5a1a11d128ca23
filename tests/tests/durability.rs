//! Durability in-process: journal replay, resuming after a shutdown (human deadlines,
//! retry waits, interrupted attempts), spec fingerprints and dead letters.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::json;
use workflow_core::clock::TokioClock;
use workflow_core::journal::Event;
use workflow_core::machine::{Command, Machine, NoHooks};
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::testing::{self, Recorder, Script};

#[derive(Default)]
pub struct Env {
    calls: Recorder<String>,
    flaky: Script<u32>,
}

async fn first(env: &Env, ctx: &StepContext, n: u32) -> Result<u32, StepError> {
    env.calls.record(format!("first {}", ctx.idempotency_key));
    Ok(n + 1)
}

async fn slow(env: &Env, ctx: &StepContext, n: u32) -> Result<u32, StepError> {
    env.calls
        .record(format!("slow #{} {}", ctx.attempt, ctx.idempotency_key));
    tokio::time::sleep(Duration::from_secs(30)).await;
    Ok(n * 2)
}

async fn flaky(env: &Env, n: u32) -> Result<u32, StepError> {
    env.calls.record("flaky".into());
    env.flaky.next().await.map(|v| v + n)
}

async fn undo(env: &Env, n: u32) -> Result<(), StepError> {
    env.calls.record(format!("undo {n}"));
    Ok(())
}

workflow! {
    /// Exercises every kind of event.
    workflow Journaled(n: u32) env Env {
        step a -> u32 { action: first(env, ctx, n), compensate: undo(env, a) }
        step b -> u32 {
            action: flaky(env, a),
            retry: { max_attempts: 3, backoff: fixed, initial: 10s, max: 10s, jitter: none },
            on_failure: continue,
        }
        human review -> Approval {
            assignee: "ops",
            depends_on: [a],
            timeout: 1h,
            on_timeout: escalate("leads"),
        }
        step c -> u32 {
            action: slow(env, ctx, a),
            depends_on: [review],
            condition: review.approved,
        }
    }
}

/// Drives a machine with arbitrary choices standing in for the world.
fn simulate(choices: &[u8]) -> Vec<Event> {
    let spec = Journaled::spec();
    let mut live = Machine::new(spec);
    let mut events = vec![Event::RunStarted {
        workflow: "Journaled".into(),
        fingerprint: String::new(),
        input: json!({ "n": 1 }),
        seed: 9,
        trace_id: "t".into(),
        parent_span: None,
        dry_run: false,
        deadline: if choices.first().is_some_and(|c| c % 7 == 0) {
            Some(50_000)
        } else {
            None
        },
        at: 0,
    }];
    live.apply(&events[0]);
    let mut now = 0u64;
    for (i, &choice) in choices.iter().enumerate() {
        let commands = live.next(now, &NoHooks);
        if commands.iter().any(|c| matches!(c, Command::Finish(_))) {
            break;
        }
        let Some(command) = commands
            .get(usize::from(choice) % commands.len().max(1))
            .cloned()
        else {
            // Nothing to do now: settle a running attempt, or let time pass.
            let running = live
                .states()
                .iter()
                .position(|s| matches!(s, workflow_core::machine::StepState::Running { .. }));
            let event = match running {
                Some(step) if choice % 3 == 0 => Event::AttemptFailed {
                    step,
                    attempt: live.attempts()[step],
                    kind: [
                        ErrorKind::Unavailable,
                        ErrorKind::Validation,
                        ErrorKind::RateLimited,
                    ][usize::from(choice) % 3],
                    message: format!("failure {i}"),
                    retry_after: (choice % 2 == 0).then_some(u64::from(choice) * 100),
                    safe_after: None,
                    at: now,
                },
                Some(step) => Event::StepSucceeded {
                    step,
                    output: json!(i),
                    at: now,
                },
                None => {
                    now = live.next_wake().unwrap_or(now + 1_000).max(now + 1);
                    continue;
                }
            };
            live.apply(&event);
            events.push(event);
            continue;
        };
        let event = match command {
            Command::Attempt { step, attempt, .. } => Event::AttemptStarted {
                step,
                attempt,
                at: now,
            },
            // What the machine decided: a skip, a task opened, escalated or expired, the
            // run's deadline.
            Command::Journal(event) => event,
            Command::Compensate { step, item } => {
                let started = Event::CompensationStarted {
                    step,
                    item,
                    at: now,
                };
                live.apply(&started);
                events.push(started);
                Event::Compensated {
                    step,
                    item,
                    error: (choice % 5 == 0).then(|| "undo failed".into()),
                    at: now,
                }
            }
            Command::CancelChild { step, child } => Event::ChildCancelled {
                step,
                child,
                at: now,
            },
            // A cancel stopped an attempt: its settlement, or the stop of a reconciled one.
            Command::Stop {
                step,
                item,
                attempt,
                settle,
            } => settle.unwrap_or(Event::AttemptStopped {
                step,
                item,
                attempt,
                at: now,
            }),
            Command::Finish(_) => break,
        };
        live.apply(&event);
        events.push(event);
        // Sometimes a person decides an open task.
        if choice % 4 == 1 {
            if let Some(step) = live
                .states()
                .iter()
                .position(|s| matches!(s, workflow_core::machine::StepState::Waiting { .. }))
            {
                let decided = Event::TaskDecided {
                    step,
                    inbox: None,
                    via: None,
                    by: "ana@ops".into(),
                    decision: json!({ "approved": choice % 8 == 1, "by": "ana@ops", "comment": null }),
                    at: now,
                };
                live.apply(&decided);
                events.push(decided);
            }
        }
        now += u64::from(choice) * 250;
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Replaying a journal (through its JSON form) gives the state the live machine had,
    /// at every prefix.
    #[test]
    fn replay_rebuilds_the_live_state(choices in proptest::collection::vec(any::<u8>(), 1..120)) {
        let events = simulate(&choices);
        let spec = Journaled::spec();
        let mut live = Machine::new(spec);
        for (n, event) in events.iter().enumerate() {
            live.apply(event);
            let journal: Vec<Event> = events[..=n]
                .iter()
                .map(|e| serde_json::from_str(&serde_json::to_string(e).unwrap()).unwrap())
                .collect();
            let replayed = Machine::replay(spec, &journal);
            prop_assert_eq!(replayed.states(), live.states());
            prop_assert_eq!(replayed.outputs(), live.outputs());
            prop_assert_eq!(replayed.status(), live.status());
            prop_assert_eq!(replayed.stop(), live.stop());
            prop_assert_eq!(replayed.attempts(), live.attempts());
            prop_assert_eq!(replayed.completion_order(), live.completion_order());
            prop_assert_eq!(replayed.next_wake(), live.next_wake());
        }
    }
}

fn engine(store: &Arc<dyn Store>, clock: TokioClock) -> Engine {
    Engine::builder()
        .shared_store(store.clone())
        .clock(clock)
        .seed(5)
        .build()
}

#[tokio::test(start_paused = true)]
async fn a_restarted_engine_resumes_interrupted_work_with_the_same_key() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = TokioClock::starting_at(0);
    let env = Env {
        flaky: Script::new().succeed(0),
        ..Env::default()
    };
    let calls = env.calls.clone();
    let one = engine(&store, clock);
    one.register::<Journaled>(env).unwrap();
    let run = one
        .start::<Journaled>(JournaledInput { n: 1 })
        .await
        .unwrap();
    testing::wait_for_task(&one, run.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    run.review().approve("ana@ops", None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await; // `c` is 10s into its 30s attempt
    one.shutdown();

    let env = Env {
        flaky: Script::new().succeed(0),
        calls: calls.clone(),
    };
    let two = engine(&store, clock);
    two.register::<Journaled>(env).unwrap();
    assert_eq!(two.resume_all().await.unwrap(), 1);
    let outputs = two
        .handle::<Journaled>(run.id())
        .await
        .unwrap()
        .outputs()
        .await
        .unwrap();
    assert_eq!((outputs.a, outputs.b, outputs.c), (2, Some(2), Some(4)));
    let key = format!("Journaled/{}/c", run.id().0);
    let first = format!("Journaled/{}/a", run.id().0);
    assert_eq!(
        calls.calls(),
        [
            format!("first {first}"),
            "flaky".into(),
            format!("slow #1 {key}"),
            format!("slow #1 {key}")
        ],
        "completed steps never re-run; the interrupted attempt re-runs with the same key"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deadline_that_passed_while_down_fires_once_on_resume() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = TokioClock::starting_at(0);
    let one = engine(&store, clock);
    one.register::<Journaled>(Env {
        flaky: Script::new().succeed(0),
        ..Env::default()
    })
    .unwrap();
    let run = one
        .start::<Journaled>(JournaledInput { n: 1 })
        .await
        .unwrap();
    testing::wait_for_task(&one, run.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    one.shutdown();
    tokio::time::sleep(Duration::from_secs(5 * 3600)).await; // down past the deadline

    let two = engine(&store, clock);
    two.register::<Journaled>(Env {
        flaky: Script::new().succeed(0),
        ..Env::default()
    })
    .unwrap();
    two.resume_all().await.unwrap();
    let task = testing::wait_for_task(&two, run.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(
        task.assignee, "leads",
        "the escalation fired right away, once"
    );
    let events = testing::events(&two, run.id()).await.unwrap();
    let escalations = events
        .iter()
        .filter(|e| matches!(e, Event::TaskEscalated { .. }))
        .count();
    assert_eq!(escalations, 1);
    let escalated_at = events
        .iter()
        .find(|e| matches!(e, Event::TaskEscalated { .. }))
        .unwrap()
        .at();
    assert_eq!(
        escalated_at / 1000,
        5 * 3600,
        "fired on resume, not at the next full timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_wait_resumes_at_its_remaining_delay() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = TokioClock::starting_at(0);
    let one = engine(&store, clock);
    let script = Script::new().fail(1, ErrorKind::Unavailable).succeed(5);
    one.register::<Journaled>(Env {
        flaky: script.clone(),
        ..Env::default()
    })
    .unwrap();
    let run = one
        .start::<Journaled>(JournaledInput { n: 1 })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    one.shutdown();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let two = engine(&store, clock);
    two.register::<Journaled>(Env {
        flaky: script,
        ..Env::default()
    })
    .unwrap();
    two.resume_all().await.unwrap();
    let handle = two.handle::<Journaled>(run.id()).await.unwrap();
    testing::wait_for_task(&two, run.id(), "review", Duration::from_secs(60))
        .await
        .unwrap();
    handle.review().reject("ana@ops", None).await.unwrap();
    assert_eq!(handle.outputs().await.unwrap().b, Some(7));
    let events = testing::events(&two, run.id()).await.unwrap();
    let starts: Vec<u64> = events
        .iter()
        .filter(|e| matches!(e, Event::AttemptStarted { step: 1, .. }))
        .map(Event::at)
        .collect();
    assert_eq!(
        starts,
        [0, 10_000],
        "the retry came 10s after the failure, downtime included"
    );
}

mod v1 {
    use super::*;
    workflow! {
        pub workflow Orders(n: u32) env Env {
            step a -> u32 { action: first(env, ctx, n) }
            human review -> Approval { assignee: "ops", depends_on: [a], timeout: 1h, on_timeout: reject }
        }
    }
}

mod v2 {
    use super::*;
    workflow! {
        pub workflow Orders(n: u32) env Env {
            step a -> u32 { action: first(env, ctx, n) }
            human review -> Approval { assignee: "ops", depends_on: [a], timeout: 2h, on_timeout: reject }
            step c -> u32 { action: slow(env, ctx, a), depends_on: [review] }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_spec_changed_is_parked_then_restarted_or_cancelled() {
    assert_ne!(v1::Orders::FINGERPRINT, v2::Orders::FINGERPRINT);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let clock = TokioClock::starting_at(0);
    let one = engine(&store, clock);
    one.register::<v1::Orders>(Env::default()).unwrap();
    let old = one
        .start::<v1::Orders>(v1::OrdersInput { n: 1 })
        .await
        .unwrap();
    let other = one
        .start::<v1::Orders>(v1::OrdersInput { n: 2 })
        .await
        .unwrap();
    testing::wait_for_task(&one, old.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    testing::wait_for_task(&one, other.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    one.shutdown();

    let two = engine(&store, clock);
    two.register::<v2::Orders>(Env::default()).unwrap();
    assert_eq!(
        two.resume_all().await.unwrap(),
        0,
        "no run is driven by the wrong machine"
    );
    let record = store.load(old.id()).await.unwrap().unwrap().record;
    assert_eq!(record.status, RunStatus::Parked);
    let note = record.note.unwrap();
    assert!(
        note.contains(v1::Orders::FINGERPRINT) && note.contains(v2::Orders::FINGERPRINT),
        "{note}"
    );
    let handle = two.handle::<v2::Orders>(old.id()).await.unwrap();
    match handle.outputs().await {
        Err(RunError::SpecChanged {
            recorded, current, ..
        }) => {
            assert_eq!(
                (recorded.as_str(), current.as_str()),
                (v1::Orders::FINGERPRINT, v2::Orders::FINGERPRINT)
            );
        }
        other => panic!("expected SpecChanged, got ok={}", other.is_ok()),
    }
    // The operator restarts one under the new spec and cancels the other.
    let new = two.restart_parked(old.id(), "operator").await.unwrap();
    assert_ne!(new, old.id());
    let restarted = two.handle::<v2::Orders>(new).await.unwrap();
    testing::wait_for_task(&two, new, "review", Duration::from_secs(5))
        .await
        .unwrap();
    restarted.review().approve("ops", None).await.unwrap();
    assert_eq!(restarted.outputs().await.unwrap().c, 4);
    assert_eq!(
        store.load(old.id()).await.unwrap().unwrap().record.status,
        RunStatus::Cancelled
    );
    two.cancel(other.id(), "operator").await.unwrap();
    assert_eq!(
        store.load(other.id()).await.unwrap().unwrap().record.status,
        RunStatus::Cancelled
    );
    assert!(matches!(
        two.restart_parked(other.id(), "operator").await,
        Err(RunError::NotParked(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn a_dead_letter_is_retried_from_its_failed_step() {
    let engine = Engine::builder().build();
    let env = Env {
        flaky: Script::new().fail(1, ErrorKind::Validation).succeed(1),
        ..Env::default()
    };
    let calls = env.calls.clone();
    engine.register::<Journaled>(env).unwrap();
    // The review escalates, then expires: the run fails at `review` and compensates `a`.
    let run = engine
        .start::<Journaled>(JournaledInput { n: 1 })
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3 * 3600)).await; // escalated, then expired
    assert!(
        matches!(run.outputs().await, Err(RunError::Failed { ref step, .. }) if step == "review")
    );
    let dead = engine.dead_letters().await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].step, "review");
    assert!(
        calls.calls().contains(&"undo 2".to_owned()),
        "the abort compensated `a`"
    );

    engine
        .retry_dead_letter(run.id(), "operator")
        .await
        .unwrap();
    assert!(engine.dead_letters().await.unwrap().is_empty());
    testing::wait_for_task(&engine, run.id(), "review", Duration::from_secs(5))
        .await
        .unwrap();
    run.review().approve("ana@ops", None).await.unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.c, Some(4));
    let firsts = calls
        .calls()
        .iter()
        .filter(|c| c.starts_with("first"))
        .count();
    assert_eq!(firsts, 2, "`a` was compensated, so the retry ran it again");
    let flakies = calls.calls().iter().filter(|c| *c == "flaky").count();
    assert_eq!(flakies, 1, "`b` settled (continue) and is reused");
    assert!(matches!(
        engine.retry_dead_letter(run.id(), "operator").await,
        Err(RunError::NotFailed(_))
    ));
}

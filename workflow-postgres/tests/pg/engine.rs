//! Engines on `PgStore`: a run keeps going through dropped connections, and a stopped
//! engine's run is taken over by another, whose timers fire once.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::Store;
use workflow_core::TIMEOUT_DECIDER;
use workflow_postgres::testing::{self as pg_testing, Schema};

/// What the test and the steps share: a gate the first step waits at (when closed), and
/// how often each step ran.
#[derive(Default)]
pub struct GateState {
    closed: AtomicBool,
    open: Notify,
    reached: Notify,
    calls: [AtomicU32; 3],
}

/// The environment.
pub struct Gate(Arc<GateState>);

mod gate {
    use super::*;

    pub async fn first(env: &Gate, n: u64) -> Result<u64, StepError> {
        env.0.calls[0].fetch_add(1, Ordering::SeqCst);
        if env.0.closed.load(Ordering::SeqCst) {
            let open = env.0.open.notified();
            env.0.reached.notify_one();
            open.await;
        }
        Ok(n * 10)
    }

    pub async fn second(env: &Gate, first: u64) -> Result<u64, StepError> {
        env.0.calls[1].fetch_add(1, Ordering::SeqCst);
        Ok(first + 1)
    }

    pub async fn done(env: &Gate, second: u64) -> Result<u64, StepError> {
        env.0.calls[2].fetch_add(1, Ordering::SeqCst);
        Ok(second * 2)
    }
}

workflow! {
    /// Three steps around a human review that approves itself after two seconds.
    pub workflow Gated(n: u64) env Gate {
        step first -> u64 { action: gate::first(env, n) }
        step second -> u64 { action: gate::second(env, first) }
        human review -> Approval {
            assignee: "ops",
            depends_on: [second],
            timeout: 2s,
            on_timeout: approve,
        }
        step done -> u64 {
            action: gate::done(env, second),
            depends_on: [review],
        }
    }
}

fn count(events: &[Event], wanted: impl Fn(&Event) -> bool) -> usize {
    events.iter().filter(|e| wanted(e)).count()
}

fn engine(store: Arc<dyn Store>, lease_ms: u64, state: &Arc<GateState>) -> Engine {
    let engine = Engine::builder()
        .shared_store(store)
        .lease(Duration::from_millis(lease_ms))
        .build();
    engine.register::<Gated>(Gate(Arc::clone(state))).unwrap();
    engine
}

/// Every step of the run completed once, each action started once.
fn assert_once(events: &[Event]) {
    for step in 0..4 {
        assert_eq!(
            count(
                events,
                |e| matches!(e, Event::StepSucceeded { step: s, .. } if *s == step)
            ),
            usize::from(step != 2),
            "step {step}: {events:#?}"
        );
    }
    assert_eq!(
        count(events, |e| matches!(e, Event::TaskDecided { .. })),
        1,
        "{events:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_mid_run_loses_and_repeats_nothing() {
    let Some(url) =
        pg_testing::server("a_connection_dropped_mid_run_loses_and_repeats_nothing").await
    else {
        return;
    };
    let schema = Schema::new(&url, "dropped");
    let store: Arc<dyn Store> = Arc::new(schema.store().await);
    let state = Arc::new(GateState::default());
    state.closed.store(true, Ordering::SeqCst);
    let engine = engine(Arc::clone(&store), 3_000, &state);
    let reached = state.reached.notified();
    let run = engine.start::<Gated>(GatedInput { n: 4 }).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), reached)
        .await
        .expect("the first step runs");
    // Every connection of the store dies while the step is in flight.
    schema
        .execute(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'workflow:{}'",
            schema.name()
        ))
        .await
        .unwrap();
    state.open.notify_waiters();
    let outputs = tokio::time::timeout(Duration::from_secs(30), run.outputs())
        .await
        .expect("the run finishes")
        .unwrap();
    assert_eq!((outputs.first, outputs.second, outputs.done), (40, 41, 82));
    let events = store.load(run.id()).await.unwrap().unwrap().events;
    assert_once(&events);
    assert_eq!(
        count(&events, |e| matches!(e, Event::AttemptStarted { .. })),
        3,
        "each action step started once: {events:#?}"
    );
    let calls: Vec<u32> = state
        .calls
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .collect();
    assert_eq!(calls, [1, 1, 1], "no step ran twice");
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_engines_run_is_taken_over_and_its_deadline_fires_once() {
    let Some(url) =
        pg_testing::server("a_stopped_engines_run_is_taken_over_and_its_deadline_fires_once").await
    else {
        return;
    };
    let schema = Schema::new(&url, "takeover");
    let state = Arc::new(GateState::default());
    let first: Arc<dyn Store> = Arc::new(schema.store().await);
    let a = engine(Arc::clone(&first), 1_000, &state);
    let run = a
        .start_with::<Gated>(GatedInput { n: 1 }, StartOptions::key("order-1"))
        .await
        .unwrap();
    let id = run.id();
    tokio::time::timeout(Duration::from_secs(10), async {
        while a.open_tasks().await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the review opens");
    // `a` stops as a crash would: nothing released, its lease runs out.
    a.shutdown();

    let second: Arc<dyn Store> = Arc::new(schema.store().await);
    let b = engine(Arc::clone(&second), 1_000, &state);
    b.resume_all().await.unwrap();
    let again = b
        .start_with::<Gated>(GatedInput { n: 1 }, StartOptions::key("order-1"))
        .await
        .unwrap();
    assert_eq!(
        again.id(),
        id,
        "the same key names the same run on any worker"
    );
    let outputs = tokio::time::timeout(Duration::from_secs(30), again.outputs())
        .await
        .expect("`b` takes the run over and finishes it")
        .unwrap();
    assert_eq!(outputs.done, 22);
    assert!(outputs.review.approved);
    let stored = second.load(id).await.unwrap().unwrap();
    assert_once(&stored.events);
    assert!(
        stored
            .events
            .iter()
            .any(|e| matches!(e, Event::TaskDecided { by, .. } if by == TIMEOUT_DECIDER)),
        "the deadline decided the review: {:#?}",
        stored.events
    );
    assert_eq!(stored.record.owner, None);
    schema.drop().await;
}

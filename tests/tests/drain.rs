//! `Engine::drain`: a worker that leaves gracefully takes no more work, lets its attempts
//! in flight finish until the deadline (then stops them), commits their outcomes, starts
//! nothing after them, and releases each run so the next engine takes it up at once.
//! Under paused time, on a store two engines share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, Store};

/// What ran: each step's name, per call that finished, and the calls that were dropped.
#[derive(Default, Clone)]
pub struct Env {
    finished: Arc<Mutex<HashMap<String, u32>>>,
    dropped: Arc<Mutex<u32>>,
}

impl Env {
    fn finished(&self, name: &str) -> u32 {
        self.finished
            .lock()
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or(0)
    }
}

struct Dropped(Arc<Mutex<u32>>, bool);

impl Drop for Dropped {
    fn drop(&mut self) {
        if !self.1 {
            *self.0.lock().unwrap() += 1;
        }
    }
}

async fn work(env: &Env, name: &'static str, secs: u64) -> Result<u32, StepError> {
    let mut guard = Dropped(Arc::clone(&env.dropped), false);
    tokio::time::sleep(Duration::from_secs(secs)).await;
    guard.1 = true;
    *env.finished
        .lock()
        .unwrap()
        .entry(name.to_owned())
        .or_default() += 1;
    Ok(1)
}

workflow! {
    /// Two steps of 10 s each.
    workflow Pair() env Env {
        step first -> u32 { action: work(env, "first", 10) }
        step second -> u32 { action: work(env, "second", 10), depends_on: [first] }
    }
}

workflow! {
    /// Waits for a person.
    workflow Ask() env Env {
        human approve -> Approval { assignee: "ops", timeout: 1h, on_timeout: abort }
        step after -> u32 { action: work(env, "after", 1), depends_on: [approve] }
    }
}

fn engine(store: &Arc<dyn Store>, env: &Env) -> Engine {
    let engine = Engine::builder().shared_store(Arc::clone(store)).build();
    engine.register::<Pair>(env.clone()).unwrap();
    engine.register::<Ask>(env.clone()).unwrap();
    engine
}

async fn owner(store: &Arc<dyn Store>, run: RunId) -> Option<String> {
    store.load(run).await.unwrap().unwrap().record.owner
}

#[tokio::test(start_paused = true)]
async fn an_attempt_that_finishes_before_the_deadline_is_committed_and_nothing_starts_after_it() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let env = Env::default();
    let first = engine(&store, &env);
    let run = first.start::<Pair>(PairInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let drained = first.drain(Duration::from_secs(30)).await;
    // `first` finished (6 s later), was committed, and `second` never started here.
    assert_eq!(drained.handed_over.len(), 1, "{drained:?}");
    assert_eq!(drained.handed_over[0].run, run.id());
    assert!(drained.stopped.is_empty());
    assert!(drained.released);
    assert!(first.is_draining());
    assert_eq!(env.finished("first"), 1);
    assert_eq!(env.finished("second"), 0);
    assert_eq!(*env.dropped.lock().unwrap(), 0);
    assert_eq!(
        owner(&store, run.id()).await,
        None,
        "released, not left to lapse"
    );
    let events = store.load(run.id()).await.unwrap().unwrap().events;
    let timeline = workflow_core::testing::timeline(Pair::spec(), &events);
    assert_eq!(
        timeline.last().unwrap(),
        "step_succeeded first",
        "{timeline:?}"
    );

    // The next engine takes it up at once and runs only what is left.
    let next = engine(&store, &env);
    next.resume_all().await.unwrap();
    let handle = next.handle::<Pair>(run.id()).await.unwrap();
    handle.outputs().await.unwrap();
    assert_eq!(env.finished("first"), 1);
    assert_eq!(env.finished("second"), 1);
}

#[tokio::test(start_paused = true)]
async fn at_the_deadline_an_attempt_is_stopped_and_the_next_engine_runs_it_again() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let env = Env::default();
    let first = engine(&store, &env);
    let run = first.start::<Pair>(PairInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let asked = tokio::time::Instant::now();
    let drained = first.drain(Duration::from_secs(3)).await;
    assert_eq!(asked.elapsed(), Duration::from_secs(3));
    assert_eq!(drained.stopped, [run.id()], "{drained:?}");
    assert!(drained.handed_over.is_empty());
    assert!(drained.released);
    assert_eq!(*env.dropped.lock().unwrap(), 1, "the attempt was dropped");
    assert_eq!(owner(&store, run.id()).await, None);

    let next = engine(&store, &env);
    next.resume_all().await.unwrap();
    let handle = next.handle::<Pair>(run.id()).await.unwrap();
    handle.outputs().await.unwrap();
    // The interrupted internal step ran again, once, then the second.
    assert_eq!(env.finished("first"), 1);
    assert_eq!(env.finished("second"), 1);
}

#[tokio::test(start_paused = true)]
async fn runs_waiting_for_a_person_are_handed_over_at_once() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let env = Env::default();
    let first = engine(&store, &env);
    let run = first.start::<Ask>(AskInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let asked = tokio::time::Instant::now();
    let drained = first.drain(Duration::from_secs(30)).await;
    assert_eq!(asked.elapsed(), Duration::ZERO, "nothing was in flight");
    assert_eq!(
        drained
            .handed_over
            .iter()
            .map(|h| h.run)
            .collect::<Vec<_>>(),
        [run.id()]
    );
    assert_eq!(owner(&store, run.id()).await, None);
    // Decided on the next engine, which drives it to the end.
    let next = engine(&store, &env);
    next.resume_all().await.unwrap();
    next.decide(
        run.id(),
        "approve",
        "ana@ops",
        serde_json::json!({ "approved": true, "by": "ana@ops", "comment": null }),
    )
    .await
    .unwrap();
    next.handle::<Ask>(run.id())
        .await
        .unwrap()
        .outputs()
        .await
        .unwrap();
    assert_eq!(env.finished("after"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_draining_engine_queues_new_starts_for_the_other_workers() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let env = Env::default();
    let first = engine(&store, &env);
    first.drain(Duration::from_secs(1)).await;
    let run = first.start::<Pair>(PairInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(env.finished("first"), 0, "the draining engine runs nothing");
    let record = store.load(run.id()).await.unwrap().unwrap().record;
    assert_eq!(record.owner, None);
    let next = engine(&store, &env);
    next.resume_all().await.unwrap();
    next.handle::<Pair>(run.id())
        .await
        .unwrap()
        .outputs()
        .await
        .unwrap();
    assert_eq!(env.finished("second"), 1);
}

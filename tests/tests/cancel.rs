//! What a cancel does to work in flight: an internal step's attempt is dropped at once and
//! settles `cancelled`; an external effect is told (`ctx.cancelled()`) and gets the cancel's
//! grace period, then is dropped and settles by what is known of it (reconciled, or
//! `cancelled` when idempotent, else `outcome_unknown`); compensation follows. Under
//! paused time, so every instant is exact.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use workflow_core::prelude::*;
use workflow_core::testing::{self, Recorder};

#[derive(Default)]
pub struct Env {
    log: Recorder<String>,
    /// What the reconcile function finds: whether the effect happened.
    happened: AtomicBool,
}

/// Records `dropped <name>` when the future holding it is dropped unfinished.
struct DropGuard {
    log: Recorder<String>,
    name: &'static str,
    done: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.done {
            self.log.record(format!("dropped {}", self.name));
        }
    }
}

/// Works for `secs`, ignoring any cancel.
async fn work(env: &Env, name: &'static str, secs: u64) -> Result<u32, StepError> {
    env.log.record(format!("start {name}"));
    let mut guard = DropGuard {
        log: env.log.clone(),
        name,
        done: false,
    };
    tokio::time::sleep(Duration::from_secs(secs)).await;
    guard.done = true;
    env.log.record(format!("end {name}"));
    Ok(1)
}

/// Works for `secs`, or stops cleanly when told the run was cancelled.
async fn polite(env: &Env, ctx: &StepContext, secs: u64) -> Result<u32, StepError> {
    env.log.record("start polite".into());
    tokio::select! {
        () = ctx.cancelled() => {
            env.log.record("told polite".into());
            Err(StepError::permanent("withdrawn: the run was cancelled"))
        }
        () = tokio::time::sleep(Duration::from_secs(secs)) => Ok(2),
    }
}

async fn quick(env: &Env) -> Result<u32, StepError> {
    env.log.record("quick".into());
    Ok(0)
}

async fn undo(env: &Env, name: &'static str) -> Result<(), StepError> {
    env.log.record(format!("undo {name}"));
    Ok(())
}

async fn find(env: &Env) -> Result<Option<u32>, StepError> {
    env.log.record("reconcile".into());
    Ok(env.happened.load(Ordering::SeqCst).then_some(7))
}

workflow! {
    /// An internal step and a completed one to compensate.
    workflow Inner() env Env {
        step first -> u32 { action: quick(env), compensate: undo(env, "first") }
        step long -> u32 { action: work(env, "long", 100), depends_on: [first] }
    }
}

workflow! {
    /// An external effect that stops when told.
    workflow Polite() env Env {
        step call -> u32 { action: polite(env, ctx, 100), effect: external }
    }
}

workflow! {
    /// An external effect that ignores the cancel, neither idempotent nor reconciled.
    workflow Stubborn() env Env {
        step first -> u32 { action: quick(env), compensate: undo(env, "first") }
        step call -> u32 { action: work(env, "call", 1000), effect: external, depends_on: [first] }
    }
}

workflow! {
    /// An idempotent external effect that ignores the cancel.
    workflow Idempotent() env Env {
        step call -> u32 { action: work(env, "call", 1000), effect: external, idempotent: true }
    }
}

workflow! {
    /// A reconciled external effect that ignores the cancel.
    workflow Reconciled() env Env {
        step call -> u32 {
            action: work(env, "call", 1000),
            effect: external,
            reconcile: find(env),
            compensate: undo(env, "call"),
        }
    }
}

workflow! {
    /// A map of internal items, three at a time.
    workflow Items(n: u32) env Env {
        step list -> Vec<u32> { action: list(n) }
        step each -> u32 { for_each: x in list, action: item(env, x), concurrency: 3 }
    }
}

async fn list(n: u32) -> Result<Vec<u32>, StepError> {
    Ok((0..n).collect())
}

async fn item(env: &Env, _item: u32) -> Result<u32, StepError> {
    work(env, "item", 50).await
}

fn engine(grace: Duration) -> Engine {
    Engine::builder().cancel_grace(grace).build()
}

async fn timeline<W: Workflow>(engine: &Engine, run: RunId) -> Vec<String> {
    let events = testing::events(engine, run).await.unwrap();
    testing::timeline(W::spec(), &events)
}

/// The state name of step `id` of a finished run.
async fn state(engine: &Engine, run: RunId, id: &str) -> String {
    let view = engine.inspect(run).await.unwrap();
    let step = view.steps.iter().find(|s| s.id == id).unwrap();
    step.state.name().to_owned()
}

#[tokio::test(start_paused = true)]
async fn an_internal_step_is_dropped_at_once_and_settles_cancelled() {
    let engine = engine(Duration::from_secs(30));
    let env = Env::default();
    let log = env.log.clone();
    engine.register::<Inner>(env).unwrap();
    let run = engine.start::<Inner>(InnerInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let cancelled = tokio::time::Instant::now();
    run.cancel("operator").await.unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
    // Settled without waiting for the step's 100 s, its future dropped, never finished.
    assert_eq!(cancelled.elapsed(), Duration::ZERO);
    assert_eq!(
        log.calls(),
        ["quick", "start long", "dropped long", "undo first"]
    );
    let timeline = timeline::<Inner>(&engine, run.id()).await;
    let at = |line: &str| timeline.iter().position(|l| l == line).unwrap();
    assert!(at("cancelled by operator") < at("attempt_failed long #1 cancelled"));
    assert!(at("attempt_failed long #1 cancelled") < at("compensated first"));
    assert!(!timeline
        .iter()
        .any(|l| l.starts_with("step_succeeded long")));
    assert_eq!(state(&engine, run.id(), "long").await, "cancelled");
    // Nothing runs on: the step never ends later.
    tokio::time::sleep(Duration::from_secs(200)).await;
    assert!(!log.calls().contains(&"end long".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn an_external_effect_is_told_and_may_stop_within_the_grace() {
    let engine = engine(Duration::from_secs(30));
    let env = Env::default();
    let log = env.log.clone();
    engine.register::<Polite>(env).unwrap();
    let run = engine.start::<Polite>(PoliteInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let cancelled = tokio::time::Instant::now();
    run.cancel("operator").await.unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
    assert_eq!(cancelled.elapsed(), Duration::ZERO);
    assert_eq!(log.calls(), ["start polite", "told polite"]);
    let timeline = timeline::<Polite>(&engine, run.id()).await;
    assert!(
        timeline.contains(&"attempt_failed call #1 internal".to_owned()),
        "{timeline:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn past_the_grace_an_unguarded_effect_is_dropped_as_outcome_unknown() {
    let engine = engine(Duration::from_secs(10));
    let env = Env::default();
    let log = env.log.clone();
    engine.register::<Stubborn>(env).unwrap();
    let run = engine.start::<Stubborn>(StubbornInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let cancelled = tokio::time::Instant::now();
    run.cancel("operator").await.unwrap();
    // Within the grace, the effect goes on.
    tokio::time::sleep(Duration::from_secs(9)).await;
    assert_eq!(log.calls(), ["quick", "start call"]);
    assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
    assert_eq!(cancelled.elapsed(), Duration::from_secs(10));
    assert_eq!(
        log.calls(),
        ["quick", "start call", "dropped call", "undo first"]
    );
    let timeline = timeline::<Stubborn>(&engine, run.id()).await;
    assert!(
        timeline.contains(&"attempt_failed call #1 outcome_unknown".to_owned()),
        "{timeline:?}"
    );
    assert_eq!(state(&engine, run.id(), "call").await, "failed");
}

#[tokio::test(start_paused = true)]
async fn past_the_grace_an_idempotent_effect_settles_cancelled() {
    let engine = engine(Duration::from_secs(10));
    let env = Env::default();
    let log = env.log.clone();
    engine.register::<Idempotent>(env).unwrap();
    let run = engine
        .start::<Idempotent>(IdempotentInput {})
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cancelled = tokio::time::Instant::now();
    run.cancel("operator").await.unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
    assert_eq!(cancelled.elapsed(), Duration::from_secs(10));
    assert_eq!(log.calls(), ["start call", "dropped call"]);
    assert_eq!(state(&engine, run.id(), "call").await, "cancelled");
}

#[tokio::test(start_paused = true)]
async fn past_the_grace_a_reconciled_effect_is_asked_and_compensated_if_it_happened() {
    for happened in [true, false] {
        let engine = engine(Duration::from_secs(10));
        let env = Env::default();
        env.happened.store(happened, Ordering::SeqCst);
        let log = env.log.clone();
        engine.register::<Reconciled>(env).unwrap();
        let run = engine
            .start::<Reconciled>(ReconciledInput {})
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        run.cancel("operator").await.unwrap();
        assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
        let timeline = timeline::<Reconciled>(&engine, run.id()).await;
        assert!(
            timeline.contains(&"attempt_stopped call #1".to_owned()),
            "{timeline:?}"
        );
        if happened {
            assert_eq!(
                log.calls(),
                ["start call", "dropped call", "reconcile", "undo call"]
            );
            assert!(timeline.contains(&"step_succeeded call".to_owned()));
            assert_eq!(state(&engine, run.id(), "call").await, "succeeded");
        } else {
            assert_eq!(log.calls(), ["start call", "dropped call", "reconcile"]);
            assert_eq!(state(&engine, run.id(), "call").await, "cancelled");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_map_s_items_in_flight_are_dropped_and_the_rest_never_start() {
    let engine = engine(Duration::from_secs(30));
    let env = Env::default();
    let log = env.log.clone();
    engine.register::<Items>(env).unwrap();
    let run = engine.start::<Items>(ItemsInput { n: 10 }).await.unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let cancelled = tokio::time::Instant::now();
    run.cancel("operator").await.unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
    assert_eq!(cancelled.elapsed(), Duration::ZERO);
    let calls = log.calls();
    let count = |line: &str| calls.iter().filter(|c| *c == line).count();
    // Three finished in the first 50 s, three more were in flight and were dropped.
    assert_eq!(count("end item"), 3);
    assert_eq!(count("dropped item"), 3);
    assert_eq!(count("start item"), 6);
    let timeline = timeline::<Items>(&engine, run.id()).await;
    let stopped = timeline
        .iter()
        .filter(|l| l.starts_with("item_failed each") && l.ends_with("cancelled"))
        .count();
    assert_eq!(stopped, 3, "{timeline:?}");
}

#[tokio::test(start_paused = true)]
async fn a_run_cancelled_before_a_restart_is_stopped_after_it() {
    // A cancel journaled while nobody drove the run: the next engine finds the attempt
    // orphaned and settles it cancelled instead of running it again.
    let store = workflow_core::store::MemoryStore::new();
    let shared: Arc<dyn workflow_core::store::Store> = Arc::new(store);
    let first = Engine::builder().shared_store(Arc::clone(&shared)).build();
    let env = Env::default();
    first.register::<Inner>(env).unwrap();
    let run = first.start::<Inner>(InnerInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    first.shutdown();
    workflow_core::admin::submit_cancel(&*shared, run.id(), "operator", 3_000)
        .await
        .unwrap();
    let second = Engine::builder().shared_store(shared).build();
    let env = Env::default();
    let log = env.log.clone();
    second.register::<Inner>(env).unwrap();
    second.resume_all().await.unwrap();
    let handle = second.handle::<Inner>(run.id()).await.unwrap();
    assert!(matches!(
        handle.outputs().await,
        Err(RunError::Cancelled(_))
    ));
    assert!(
        !log.calls().contains(&"start long".to_owned()),
        "{:?}",
        log.calls()
    );
    assert_eq!(state(&second, run.id(), "long").await, "cancelled");
}

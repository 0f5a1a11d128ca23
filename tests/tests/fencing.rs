//! Fencing that reaches the outside world, under paused time: a worker whose lease is not
//! renewed stops its run's user code before another worker can take the run over
//! (self-fencing); the run's fencing token reaches the action (`ctx.fence()`), so a service
//! that remembers the highest fence per key refuses a request that was already on its way
//! when its worker lost the run; an operator's retry of an interrupted effect waits until
//! the previous owner can no longer be inside it, and continues the attempt count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use workflow_core::clock::TokioClock;
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::testing::FaultyStore;

/// A downstream service: what it applied, and (when `checks_fences`) the highest fence it
/// has seen per idempotency key, refusing lower ones.
#[derive(Default)]
pub struct Service {
    checks_fences: bool,
    highest: Mutex<HashMap<String, u64>>,
    applied: Mutex<Vec<(String, u64)>>,
    refused: Mutex<Vec<(String, u64)>>,
}

impl Service {
    fn checking() -> Arc<Service> {
        Arc::new(Service {
            checks_fences: true,
            ..Service::default()
        })
    }

    fn apply(&self, key: &str, fence: u64) -> bool {
        if self.checks_fences {
            let mut highest = self.highest.lock().unwrap();
            let seen = highest.entry(key.to_owned()).or_insert(0);
            if fence < *seen {
                self.refused.lock().unwrap().push((key.to_owned(), fence));
                return false;
            }
            *seen = fence;
        }
        self.applied.lock().unwrap().push((key.to_owned(), fence));
        true
    }

    fn applied(&self) -> Vec<(String, u64)> {
        self.applied.lock().unwrap().clone()
    }
}

/// The workers' shared environment: two services that receive the same requests, one
/// that checks fences and one that does not, and how long a request takes to arrive.
pub struct Env {
    checked: Arc<Service>,
    unchecked: Arc<Service>,
    /// How long the first request is in flight (a worker that froze after sending it).
    first_delay: Duration,
    entered: Mutex<Vec<(u32, u64)>>,
    slow_effect: bool,
}

fn env(first_delay: Duration, slow_effect: bool) -> Arc<Env> {
    Arc::new(Env {
        checked: Service::checking(),
        unchecked: Arc::new(Service::default()),
        first_delay,
        entered: Mutex::new(Vec::new()),
        slow_effect,
    })
}

/// Sends the notification: the request leaves at once and lands after a delay (the first
/// one late); with `slow_effect` the action then waits for a confirmation that takes
/// longer than the lease.
async fn notify(env: &Arc<Env>, ctx: &StepContext) -> Result<u32, StepError> {
    let first = {
        let mut entered = env.entered.lock().unwrap();
        entered.push((ctx.attempt, ctx.fence()));
        entered.len() == 1
    };
    let delay = if first {
        env.first_delay
    } else {
        Duration::ZERO
    };
    let (key, fence) = (ctx.idempotency_key.clone(), ctx.fence());
    let services = (Arc::clone(&env.checked), Arc::clone(&env.unchecked));
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        services.0.apply(&key, fence);
        services.1.apply(&key, fence);
    });
    if env.slow_effect && first {
        tokio::time::sleep(Duration::from_secs(60)).await;
    }
    Ok(ctx.attempt)
}

workflow! {
    /// One unguarded external effect: not idempotent, no reconcile.
    workflow Notify(user: String) env std::sync::Arc<Env> {
        step notify -> u32 { action: notify(env, ctx), effect: external }
    }
}

const LEASE: Duration = Duration::from_secs(3);
const MARGIN: Duration = Duration::from_secs(1);

fn worker(store: FaultyStore, owner: &str) -> Engine {
    Engine::builder()
        .shared_store(Arc::new(store))
        .clock(TokioClock::starting_at(1_000_000))
        .owner(owner)
        .lease(LEASE)
        .fence_margin(MARGIN)
        .seed(7)
        .build()
}

/// Two workers on one store; the first one's renewals answer `renewal_delay` late.
fn two_workers(renewal_delay: Duration) -> (Engine, Engine, Arc<dyn Store>) {
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let slow = FaultyStore::new(Arc::clone(&inner));
    slow.slow_renewals(renewal_delay);
    let healthy = FaultyStore::new(Arc::clone(&inner));
    healthy.slow_renewals(Duration::ZERO);
    (worker(slow, "worker-a"), worker(healthy, "worker-b"), inner)
}

async fn wait_status(store: &dyn Store, run: RunId, status: RunStatus) {
    for _ in 0..600 {
        let record = store.load(run).await.unwrap().unwrap().record;
        if record.status == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{run} never became {status:?}");
}

/// The reproduction, deterministic: worker A sends the effect's request and
/// freezes (its renewals stall); worker B takes the run over and finds the effect's
/// outcome unknown; an operator retries once that is safe; A's request lands last. The
/// service that checks fences applies the effect once; the one that does not, twice.
#[tokio::test(start_paused = true)]
async fn a_late_request_of_a_worker_that_lost_the_run_is_refused_by_its_fence() {
    let (a, b, store) = two_workers(Duration::from_secs(30));
    let env = env(Duration::from_secs(20), true);
    a.register::<Notify>(Arc::clone(&env)).unwrap();
    b.register::<Notify>(Arc::clone(&env)).unwrap();
    b.resume_all().await.unwrap();
    let run = a
        .start::<Notify>(NotifyInput { user: "u".into() })
        .await
        .unwrap()
        .id();

    wait_status(&*store, run, RunStatus::Failed).await;
    let letters = b.dead_letters().await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].kind, ErrorKind::OutcomeUnknown);
    assert!(
        letters[0].message.contains("lease had ended by"),
        "{}",
        letters[0].message
    );
    let (found, safe_after) = store
        .load(run)
        .await
        .unwrap()
        .unwrap()
        .events
        .iter()
        .find_map(|e| match e {
            Event::AttemptFailed { safe_after, at, .. } => safe_after.map(|s| (*at, s)),
            _ => None,
        })
        .expect("the outcome-unknown failure says from when a retry is safe");
    // The self-fencing margin and twice the clock-skew bound after the discovery.
    assert_eq!(
        Duration::from_millis(safe_after - found),
        MARGIN + 2 * workflow_core::DEFAULT_CLOCK_SKEW
    );

    // Too soon: worker A might still be inside the effect.
    assert_eq!(
        b.retry_dead_letter(run, "ops").await,
        Err(RunError::TooSoon { run, safe_after })
    );
    // Safe after the self-fencing margin and twice the clock-skew bound.
    tokio::time::sleep(MARGIN + 2 * workflow_core::DEFAULT_CLOCK_SKEW).await;
    b.retry_dead_letter(run, "ops").await.unwrap();
    wait_status(&*store, run, RunStatus::Completed).await;
    let outputs = b
        .handle::<Notify>(run)
        .await
        .unwrap()
        .outputs()
        .await
        .unwrap();
    assert_eq!(
        outputs.notify, 2,
        "the retry is attempt 2, not attempt 1 again"
    );

    // A's request, sent under the first fence, lands after the retry's.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let entered = env.entered.lock().unwrap().clone();
    assert_eq!(entered.len(), 2, "{entered:?}");
    assert!(entered[1].1 > entered[0].1, "fences only grow: {entered:?}");
    assert_eq!(
        env.checked.applied().len(),
        1,
        "{:?}",
        env.checked.applied()
    );
    assert_eq!(env.checked.applied()[0].1, entered[1].1);
    assert_eq!(env.checked.refused.lock().unwrap().len(), 1);
    // Without the service's check, the documented outcome: both requests apply.
    assert_eq!(env.unchecked.applied().len(), 2);
}

/// Self-fencing: a worker whose renewals stall stops polling its run's user code a margin
/// before its lease ends, so an effect it would apply after waking never runs; nothing it
/// does after that point reaches the journal.
#[tokio::test(start_paused = true)]
async fn a_worker_whose_lease_is_not_renewed_stops_its_user_code_in_time() {
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let slow = FaultyStore::new(Arc::clone(&inner));
    slow.slow_renewals(Duration::from_secs(30));
    let a = worker(slow, "worker-a");
    let applied = Arc::new(Mutex::new(Vec::new()));

    async fn confirm_then_apply(
        applied: &Arc<Mutex<Vec<u64>>>,
        ctx: &StepContext,
    ) -> Result<(), StepError> {
        // Waits on a confirmation longer than the lease, then applies.
        tokio::time::sleep(Duration::from_secs(5)).await;
        applied.lock().unwrap().push(ctx.fence());
        Ok(())
    }

    workflow! {
        workflow Apply(x: u32) env std::sync::Arc<std::sync::Mutex<Vec<u64>>> {
            step apply -> () { action: confirm_then_apply(env, ctx), effect: external }
        }
    }

    a.register::<Apply>(Arc::clone(&applied)).unwrap();
    let run = a.start::<Apply>(ApplyInput { x: 1 }).await.unwrap().id();
    let started = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(applied.lock().unwrap().is_empty(), "the effect never ran");
    // Nothing but the start was journaled: the attempt's end was never written.
    let events = inner.load(run).await.unwrap().unwrap().events;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::StepSucceeded { .. } | Event::AttemptFailed { .. })),
        "{events:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(10));

    // The same run on a healthy worker: the lease lapsed, it is taken over, and the
    // interrupted effect is not repeated blindly.
    let healthy = FaultyStore::new(Arc::clone(&inner));
    healthy.slow_renewals(Duration::ZERO);
    let b = worker(healthy, "worker-b");
    b.register::<Apply>(Arc::clone(&applied)).unwrap();
    b.resume_all().await.unwrap();
    wait_status(&*inner, run, RunStatus::Failed).await;
    assert!(applied.lock().unwrap().is_empty());
}

/// On a store one engine drives there are no leases: nothing self-fences, however long a
/// step takes.
#[tokio::test(start_paused = true)]
async fn without_leases_a_long_step_is_never_fenced() {
    let engine = Engine::builder()
        .store(MemoryStore::new())
        .clock(TokioClock::starting_at(1_000_000))
        .lease(LEASE)
        .fence_margin(MARGIN)
        .build();
    assert_eq!(engine.fence_margin(), Duration::ZERO);
    let env = env(Duration::ZERO, true);
    engine.register::<Notify>(Arc::clone(&env)).unwrap();
    let run = engine
        .start::<Notify>(NotifyInput { user: "u".into() })
        .await
        .unwrap();
    assert_eq!(run.outputs().await.unwrap().notify, 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        env.checked.applied(),
        vec![(
            "Notify/".to_owned() + &run.id().0.to_string() + "/notify",
            1
        )]
    );
}

//! The engine: registers workflows, starts, takes up and resumes runs, and drives each
//! run's [`Machine`](crate::machine::Machine) with tokio: it carries out what the machine
//! decides, journal first.
//!
//! - [`builder`]: configuration ([`EngineBuilder`]).
//! - `registry`: registered workflows, by type and by version.
//! - `driver`: the loop that drives one run; `work`: running user code.
//! - `lifecycle`: owning runs: creating, claiming, taking up, hibernating and waking them.
//! - `poller`: timers of hibernating runs, inbox messages, lease renewal and takeover.
//! - `queue`: queued starts ([`Engine::enqueue`]) and the admission point.
//! - `api`: the public operations on runs (inspect, decide, cancel, retry, ...).
//! - `scheduler`: fires due schedule ticks; `schedules`: [`Engine::schedules`].
//! - [`handle`]: [`RunRef`] and [`RunHandle`].

mod api;
mod builder;
mod children;
mod commit;
mod drain;
mod driver;
mod fence;
mod gauges;
mod handle;
pub(crate) mod human;
mod lifecycle;
pub(crate) mod limits;
mod plan;
mod poller;
mod purger;
mod queue;
mod registry;
mod requests;
mod scheduler;
mod schedules;
mod steps;
mod ticks;
mod work;
pub(crate) mod workflow;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use workflow_spec::retry::SplitMix64;

pub use self::builder::{
    default_authorizer, Authorizer, EngineBuilder, StartOptions, DEFAULT_CANCEL_GRACE,
    DEFAULT_CLOCK_SKEW, DEFAULT_LEASE,
};
pub use self::drain::{Drained, Handover};
pub use self::handle::{RunHandle, RunRef, RunView, StepView};
pub use self::purger::{BATCHES_PER_PASS, PURGE_EVERY};
pub use self::schedules::{BackfillTick, ScheduleApiError, Schedules};

use self::driver::Msg;
use self::registry::Registry;
pub(crate) use self::registry::Version;
use crate::clock::Clock;
use crate::engine::human::TaskInfo;
use crate::error::RunId;
use crate::journal::{Event, Timestamp, Value};
use crate::machine::{Status, Stop};
use crate::store::{Claimant, Store};

/// How often an engine looks for messages other processes left in the inboxes of the runs
/// it drives (decisions from the CLI, say), and for runs to take over.
const FOREIGN_POLL: Duration = Duration::from_secs(1);

/// A test hook called at named points of the driver (`before_result_append`,
/// `after_result_append`, `before_item_append`, `after_child_start`), so crash tests can
/// kill the process exactly there.
pub type FaultHook = Arc<dyn Fn(&'static str) + Send + Sync>;

/// Runs workflows. Cheap to clone: clones share the same engine.
///
/// A worker keeps its engine for as long as it should work. Once the last clone is
/// dropped and the runs it drives have stopped (finished, or parked on a timer or a
/// person), its background tasks end: it no longer admits queued runs, takes over lapsed
/// ones, wakes parked ones or fires schedules. [`Engine::shutdown`] stops at once.
///
/// ```
/// # use workflow_core::prelude::*;
/// # use workflow_core::store::MemoryStore;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::builder()
///     .store(MemoryStore::new())
///     .authorizer(|assignee, by| by.ends_with(&format!("@{assignee}")))
///     .build();
/// let clone = engine.clone(); // the same engine
/// assert_eq!(clone.owner(), engine.owner());
/// assert!(engine.authorizes("ops", "ana@ops"));
/// assert!(engine.open_tasks().await?.is_empty());
/// engine.shutdown(); // synchronous, and as a crash would: nothing more is journaled
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("owner", &self.inner.owner)
            .field("max_in_flight", &self.inner.max_in_flight)
            .field("live_runs", &self.inner.lock_live().len())
            .finish_non_exhaustive()
    }
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    authorizer: Authorizer,
    max_in_flight: usize,
    log_payloads: bool,
    /// The cancel's grace period of external effects, in ms.
    pub(super) cancel_grace_ms: u64,
    owner: String,
    /// How long a claim lasts: zero in stores only one engine drives (a claim by another
    /// engine takes the run at once), the configured lease in shared ones.
    lease_ms: u64,
    rng: Mutex<SplitMix64>,
    registry: Registry,
    live: Mutex<HashMap<RunId, Live>>,
    tasks: Mutex<BTreeMap<(RunId, usize), TaskInfo>>,
    events: broadcast::Sender<(RunId, Event)>,
    fault_hook: Option<FaultHook>,
    hibernate: bool,
    /// Runs this engine owns with nothing in flight, unloaded from memory until a timer, a
    /// message or a waiter wakes them, with their fencing tokens. Their journal is their
    /// whole state.
    hibernating: Mutex<HashMap<RunId, u64>>,
    wakeups: Mutex<BTreeSet<(Timestamp, RunId)>>,
    wake_notify: Arc<tokio::sync::Notify>,
    /// Told after each admission pass that drove runs, so a waiter on a queued run of this
    /// engine looks again at once instead of at the next poll of the store.
    admitted: tokio::sync::Notify,
    wake_lock: tokio::sync::Mutex<()>,
    poller: Mutex<Option<tokio::task::AbortHandle>>,
    /// The highest inbox message id the poller has seen.
    inbox_seen: AtomicU64,
    /// Runs whose stored history failed verification: never driven.
    damaged: Mutex<BTreeMap<RunId, crate::store::StoreError>>,
    /// This engine's view of its leases, for self-fencing.
    lease: Arc<fence::LeaseWatch>,
    /// The scheduler task, once started.
    scheduler: Mutex<Option<tokio::task::AbortHandle>>,
    /// The engine-wide retention of finished runs ([`EngineBuilder::retention`]).
    retention: Option<Duration>,
    /// The background purge, once started.
    purger: Mutex<Option<tokio::task::AbortHandle>>,
    /// Wakes the scheduler early (a schedule was created or resumed).
    schedule_notify: Arc<tokio::sync::Notify>,
    /// Schedules of registered workflows not yet recorded in the store.
    declared: Mutex<Vec<(String, workflow_spec::Schedule)>>,
    /// Whether this engine claims and drives runs (false: intake only).
    worker: bool,
    /// Told once the engine drains ([`Engine::drain`]): it claims, admits, wakes and
    /// fires nothing more, and its drivers hand their runs over.
    draining: watch::Sender<bool>,
    /// When the engine was built and when it began to drain, by its clock: what its
    /// heartbeats say of it.
    started: Timestamp,
    drain_began: Mutex<Option<Timestamp>>,
    /// The runs drivers handed over while draining, and when.
    handed_over: Mutex<Vec<drain::Handover>>,
    /// The most live runs before this engine stops admitting queued ones.
    max_live_runs: Option<usize>,
    /// Held while the engine claims a run nobody owns and launches it, so two paths (the
    /// admission point, a waiter taking a run up) never both claim one.
    claiming: tokio::sync::Mutex<()>,
    /// Specs this engine recorded for its queued starts.
    queued_specs: queue::RecordedSpecs,
    /// Compiled schedules by definition, shared by every schedule with that definition,
    /// kept for the definitions the last pass met.
    compiled_schedules: Mutex<scheduler::Compiled>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    fn fault(&self, point: &'static str) {
        if let Some(hook) = &self.fault_hook {
            hook(point);
        }
    }

    fn lock_live(&self) -> MutexGuard<'_, HashMap<RunId, Live>> {
        lock(&self.live)
    }

    fn lock_hibernating(&self) -> MutexGuard<'_, HashMap<RunId, u64>> {
        lock(&self.hibernating)
    }

    fn lock_wakeups(&self) -> MutexGuard<'_, BTreeSet<(Timestamp, RunId)>> {
        lock(&self.wakeups)
    }

    fn lock_tasks(&self) -> MutexGuard<'_, BTreeMap<(RunId, usize), TaskInfo>> {
        lock(&self.tasks)
    }
}

/// A run driven by this engine.
struct Live {
    mailbox: mpsc::UnboundedSender<Box<Msg>>,
    done: watch::Receiver<Option<Arc<Finished>>>,
    abort: Option<tokio::task::AbortHandle>,
}

/// How a run ended, kept for its waiters.
#[derive(Debug)]
struct Finished {
    status: Status,
    outputs: Vec<Option<Value>>,
    stop: Option<Stop>,
}

impl Engine {
    /// An engine with default settings over `store`.
    pub fn new(store: impl Store) -> Self {
        Engine::builder().store(store).build()
    }

    /// A builder with defaults: in-memory store, tokio clock, default authorizer.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    fn from_builder(builder: EngineBuilder) -> Engine {
        let seed_now = builder.clock.now();
        let seed = builder.seed.unwrap_or(seed_now);
        let lease_ms = if builder.store.multi_worker() {
            builder.lease.as_millis() as u64
        } else {
            0
        };
        let margin = builder.fence_margin.unwrap_or(builder.lease / 3);
        Engine {
            inner: Arc::new(Inner {
                store: builder.store,
                clock: builder.clock,
                authorizer: builder.authorizer,
                max_in_flight: builder.max_in_flight,
                log_payloads: builder.log_payloads,
                cancel_grace_ms: builder.cancel_grace.as_millis() as u64,
                owner: builder.owner.unwrap_or_else(builder::unique_owner),
                lease_ms,
                rng: Mutex::new(SplitMix64::new(seed)),
                registry: Registry::default(),
                live: Mutex::new(HashMap::new()),
                tasks: Mutex::new(BTreeMap::new()),
                events: broadcast::channel(1024).0,
                fault_hook: builder.fault_hook,
                hibernate: builder.hibernate,
                hibernating: Mutex::new(HashMap::new()),
                wakeups: Mutex::new(BTreeSet::new()),
                wake_notify: Arc::new(tokio::sync::Notify::new()),
                admitted: tokio::sync::Notify::new(),
                wake_lock: tokio::sync::Mutex::new(()),
                poller: Mutex::new(None),
                inbox_seen: AtomicU64::new(0),
                damaged: Mutex::new(BTreeMap::new()),
                lease: Arc::new(
                    fence::LeaseWatch::new(lease_ms, margin).with_skew(builder.clock_skew),
                ),
                scheduler: Mutex::new(None),
                retention: builder.retention,
                purger: Mutex::new(None),
                schedule_notify: Arc::new(tokio::sync::Notify::new()),
                declared: Mutex::new(Vec::new()),
                compiled_schedules: Mutex::new(scheduler::Compiled::default()),
                worker: builder.worker,
                draining: watch::channel(false).0,
                started: seed_now,
                drain_began: Mutex::new(None),
                handed_over: Mutex::new(Vec::new()),
                max_live_runs: builder.max_live_runs,
                claiming: tokio::sync::Mutex::new(()),
                queued_specs: queue::RecordedSpecs::default(),
            }),
        }
    }

    /// The engine's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The name this engine owns runs under.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// Whether the engine's authorizer admits `by` for tasks assigned to `assignee`.
    pub fn authorizes(&self, assignee: &str, by: &str) -> bool {
        (self.inner.authorizer)(assignee, by)
    }

    /// The registration a run of `name` started under `fingerprint` would resume on here.
    pub(crate) fn registration(&self, name: &str, fingerprint: &str) -> Option<Version> {
        self.inner.registry.version(name, fingerprint).map(Version)
    }

    /// The fingerprints registered here under `name`, newest registration first.
    pub(crate) fn registered_fingerprints(&self, name: &str) -> Vec<&'static str> {
        self.inner.registry.fingerprints(name)
    }

    /// Whether this engine writes inputs and outputs to its logs
    /// ([`EngineBuilder::log_payloads`]); front ends show payloads only when it does.
    pub fn logs_payloads(&self) -> bool {
        self.inner.log_payloads
    }

    /// The current time by the engine's clock.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// How much of a run's lease must be left for its user code to run (see
    /// [`EngineBuilder::fence_margin`]); zero in stores one engine drives.
    pub fn fence_margin(&self) -> Duration {
        Duration::from_millis(self.inner.lease.margin_ms())
    }

    fn claimant(&self) -> Claimant<'_> {
        Claimant {
            owner: &self.inner.owner,
            lease_ms: self.inner.lease_ms,
            now: self.now(),
        }
    }

    /// A lease renewal with what this engine says of itself.
    fn heartbeat(&self) -> crate::store::Heartbeat<'_> {
        crate::store::Heartbeat {
            claimant: self.claimant(),
            started: self.inner.started,
            draining: *lock(&self.inner.drain_began),
        }
    }

    /// Stops driving every run at once, as a crash would: in-flight steps are abandoned
    /// and nothing more is journaled. Unfinished runs stay `running` in the store and are
    /// taken up by the next engine (its [`Engine::resume_all`], or a handle's `outputs`).
    pub fn shutdown(&self) {
        let live: Vec<Live> = self
            .inner
            .lock_live()
            .drain()
            .map(|(_, live)| live)
            .collect();
        for entry in live {
            if let Some(abort) = entry.abort {
                abort.abort();
            }
        }
        if let Some(poller) = lock(&self.inner.poller).take() {
            poller.abort();
        }
        if let Some(scheduler) = lock(&self.inner.scheduler).take() {
            scheduler.abort();
        }
        if let Some(purger) = lock(&self.inner.purger).take() {
            purger.abort();
        }
        self.inner.lock_hibernating().clear();
        self.inner.lock_wakeups().clear();
        self.inner.lock_tasks().clear();
    }

    /// How many runs are unloaded from memory, parked until a timer, a decision or a
    /// waiter wakes them (see [`EngineBuilder::hibernate`]).
    pub fn hibernating(&self) -> usize {
        self.inner.lock_hibernating().len()
    }

    /// Every journal event of every run this engine drives, as it is journaled: for
    /// progress displays and live dashboards. A slow receiver misses events (it gets
    /// `Lagged`), the journal in the store is the complete record.
    pub fn subscribe(&self) -> broadcast::Receiver<(RunId, Event)> {
        self.inner.events.subscribe()
    }

    /// The open human tasks of the runs this engine drives, oldest run first, each listed
    /// once the entry that opens it is journaled. (Tasks of runs other engines drive:
    /// [`crate::admin::open_tasks`].)
    pub async fn open_tasks(&self) -> Result<Vec<TaskInfo>, crate::RunError> {
        Ok(self.inner.lock_tasks().values().cloned().collect())
    }

    #[allow(clippy::too_many_arguments)]
    fn index_task(
        &self,
        run: RunId,
        workflow: &str,
        spec: &workflow_spec::Spec,
        step: usize,
        assignee: &str,
        deadline: Timestamp,
        escalated: bool,
    ) {
        let node = &spec.steps[step];
        let prompt = match &node.kind {
            workflow_spec::StepKind::Human(human) => human.prompt.clone(),
            _ => None,
        };
        self.inner.lock_tasks().insert(
            (run, step),
            TaskInfo {
                run,
                workflow: workflow.to_owned(),
                step: node.id.clone(),
                assignee: assignee.to_owned(),
                prompt,
                deadline,
                escalated,
            },
        );
    }

    fn unindex_task(&self, run: RunId, step: usize) {
        self.inner.lock_tasks().remove(&(run, step));
    }
}

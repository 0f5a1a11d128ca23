//! Building an engine: store, clock, authorizer, limits, owner and lease.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Engine, FaultHook};
use crate::clock::{Clock, TokioClock};
use crate::store::{MemoryStore, Store};

/// Decides whether `by` may decide a task assigned to `assignee`: `authorize(assignee, by)`.
pub type Authorizer = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The default authorization: the assignee itself, or a member written `name@assignee`.
pub fn default_authorizer(assignee: &str, by: &str) -> bool {
    by == assignee
        || by
            .strip_suffix(assignee)
            .is_some_and(|rest| rest.ends_with('@') && rest.len() > 1)
}

/// The default lease of a run in a store shared by many engine processes.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How long an external effect in flight may finish once its run is cancelled, unless
/// [`EngineBuilder::cancel_grace`] says otherwise.
pub const DEFAULT_CANCEL_GRACE: Duration =
    Duration::from_millis(crate::machine::DEFAULT_CANCEL_GRACE_MS);

/// The default bound on how far the clocks of the store, the engines, operators and the
/// services that steps call may differ ([`EngineBuilder::clock_skew`]).
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(1);

/// Builds an [`Engine`]: its store, clock, authorizer and limits. Every setting has a
/// default; `Engine::builder().build()` is an engine on a fresh [`MemoryStore`](crate::store::MemoryStore).
///
/// ```
/// use std::time::Duration;
/// use workflow_core::store::MemoryStore;
/// use workflow_core::Engine;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let engine = Engine::builder()
///     .store(MemoryStore::new()) // the default; SqliteStore and PgStore are crates of their own
///     .owner("worker-1") // this engine's name in the store's leases
///     .lease(Duration::from_secs(30))
///     .authorizer(|assignee, by| by == format!("lead@{assignee}"))
///     .max_in_flight(8)
///     .cancel_grace(Duration::from_secs(10))
///     .retention(Duration::from_secs(30 * 86_400))
///     .build();
/// assert_eq!(engine.owner(), "worker-1");
/// assert!(engine.authorizes("finance", "lead@finance"));
/// assert!(!engine.authorizes("finance", "ana@finance"));
/// assert!(!engine.is_intake_only());
///
/// // An engine that takes starts in and queues them for workers, driving nothing.
/// let intake = Engine::builder().intake_only().build();
/// assert!(intake.is_intake_only());
/// # }
/// ```
pub struct EngineBuilder {
    pub(super) store: Arc<dyn Store>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) authorizer: Authorizer,
    pub(super) max_in_flight: usize,
    pub(super) log_payloads: bool,
    pub(super) owner: Option<String>,
    pub(super) lease: Duration,
    pub(super) fence_margin: Option<Duration>,
    pub(super) clock_skew: Duration,
    pub(super) seed: Option<u64>,
    pub(super) fault_hook: Option<FaultHook>,
    pub(super) hibernate: bool,
    pub(super) worker: bool,
    pub(super) max_live_runs: Option<usize>,
    pub(super) retention: Option<Duration>,
    pub(super) cancel_grace: Duration,
}

impl fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("max_in_flight", &self.max_in_flight)
            .field("log_payloads", &self.log_payloads)
            .field("owner", &self.owner)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Default for EngineBuilder {
    fn default() -> Self {
        EngineBuilder {
            store: Arc::new(MemoryStore::new()),
            clock: Arc::new(TokioClock::new()),
            authorizer: Arc::new(default_authorizer),
            max_in_flight: 16,
            log_payloads: false,
            owner: None,
            lease: DEFAULT_LEASE,
            fence_margin: None,
            clock_skew: DEFAULT_CLOCK_SKEW,
            seed: None,
            fault_hook: None,
            hibernate: true,
            worker: true,
            max_live_runs: None,
            retention: None,
            cancel_grace: DEFAULT_CANCEL_GRACE,
        }
    }
}

impl EngineBuilder {
    /// The store (default: a fresh [`MemoryStore`]).
    pub fn store(mut self, store: impl Store) -> Self {
        self.store = Arc::new(store);
        self
    }

    /// A store shared with other code (the CLI, a test asserting on the journal).
    pub fn shared_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = store;
        self
    }

    /// The clock (default: [`TokioClock`]).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Who may decide human tasks: `authorizer(assignee, by)`. The default admits anyone
    /// whose name equals the assignee or ends with `@assignee` (`ana@trust_and_safety_team`).
    /// It governs every decision of the runs this engine drives, including decisions other
    /// processes (the CLI, an HTTP front end) put in a run's inbox.
    pub fn authorizer(
        mut self,
        authorize: impl Fn(&str, &str) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.authorizer = Arc::new(authorize);
        self
    }

    /// How many attempts of one run may be in flight at once (default 16).
    pub fn max_in_flight(mut self, limit: usize) -> Self {
        self.max_in_flight = limit.max(1);
        self
    }

    /// Whether inputs and outputs appear in logs (default: no).
    pub fn log_payloads(mut self, log: bool) -> Self {
        self.log_payloads = log;
        self
    }

    /// The seed runs draw their jitter seeds from (default: from the clock).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// The name this engine owns runs under (default: unique to this engine). Engines
    /// sharing a store need different names.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// How long this engine's claim on a run lasts without renewal, in stores shared by
    /// several engine processes (default 30 s; renewed every third of it). A dead
    /// engine's runs are taken over by another within one lease.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(30));
        self
    }

    /// How much of a run's lease must be left for the run's user code to run, in stores
    /// several engines share (default: a third of the lease; at most half of it).
    ///
    /// The engine renews its leases every third of a lease and keeps its own view of each
    /// on its monotonic clock, counted from when the claim or renewal was sent. Once a
    /// run's lease has less than this margin left (two renewals in a row failed, or the
    /// process was paused), the engine *self-fences*: the run's in-flight attempts and
    /// compensations are never polled again, nothing more is committed, so no attempt of
    /// an external effect starts, and the run is taken up again only if a later renewal
    /// shows the engine still holds it. Another engine can take the run over only once the
    /// lease has lapsed in the store, by then this engine stopped the run's user code.
    /// What it cannot stop is a request already on its way: see `StepContext::fence`.
    pub fn fence_margin(mut self, margin: Duration) -> Self {
        self.fence_margin = Some(margin);
        self
    }

    /// How long an attempt of an external effect in flight may go on once its run is
    /// cancelled (default [`DEFAULT_CANCEL_GRACE`], 30 s). A cancel stops an internal
    /// step's attempt at once; an external effect is told (`StepContext::cancelled`) and
    /// stopped when this ends, settling by what is known of it (its reconcile function is
    /// asked; otherwise `cancelled` when idempotent, else `outcome_unknown`).
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = grace;
        self
    }

    /// The most the clocks of the store (its server), the engines, the operators' machines
    /// and the services that steps call may differ by (default 1 s), in stores several
    /// engines share.
    ///
    /// A step's `StepContext::valid_until` is on the store's clock; a service that refuses
    /// requests it decides after it compares it with its own clock. An operator's retry of
    /// an interrupted external effect whose outcome is unknown is refused as too soon until
    /// the self-fencing margin plus twice this bound after the engine that took the run
    /// over found the interrupted attempt: by then every request of that attempt was
    /// decided (or is refused) by a service whose clock keeps within the bound.
    pub fn clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = skew;
        self
    }

    /// Whether runs with nothing in flight (waiting on a person or a timer) are unloaded
    /// from memory until something wakes them (default: yes). Their journal is their state,
    /// so a hundred thousand parked runs cost little more than their index entries.
    pub fn hibernate(mut self, hibernate: bool) -> Self {
        self.hibernate = hibernate;
        self
    }

    /// How long finished runs (completed, failed, cancelled) are kept before they are
    /// purged, for every workflow without a `retention:` of its own (default: for ever).
    /// The engine purges in the background, every [`PURGE_EVERY`](super::PURGE_EVERY),
    /// in bounded batches; running, waiting and parked runs are never purged.
    pub fn retention(mut self, keep: Duration) -> Self {
        self.retention = Some(keep);
        self
    }

    #[doc(hidden)]
    /// An engine that only takes starts in: it writes them to the store as queued runs
    /// (its `start`, `start_with` and `start_json` enqueue, see [`Engine::enqueue`]) and
    /// reads runs, decides tasks and sends events and cancellations through the runs'
    /// inboxes, but never claims or drives a run: workers (engines built without this,
    /// over the same store) do. For a web tier that takes webhooks and API calls while
    /// other processes execute them.
    ///
    /// [`Engine::enqueue`]: super::Engine::enqueue
    pub fn intake_only(mut self) -> Self {
        self.worker = false;
        self
    }

    /// The most runs this engine keeps live (loaded, with work in flight) before it stops
    /// admitting queued runs ([`Engine::enqueue`]): beyond it, queued runs wait for this
    /// engine to have room or for another worker. Runs started here, taken over or woken
    /// are never held back. Default: no limit.
    ///
    /// [`Engine::enqueue`]: super::Engine::enqueue
    pub fn max_live_runs(mut self, limit: usize) -> Self {
        self.max_live_runs = Some(limit.max(1));
        self
    }

    /// Crash-test hook, see [`FaultHook`].
    pub fn fault_hook(mut self, hook: impl Fn(&'static str) + Send + Sync + 'static) -> Self {
        self.fault_hook = Some(Arc::new(hook));
        self
    }

    /// The engine.
    pub fn build(self) -> Engine {
        let engine = Engine::from_builder(self);
        engine.ensure_purger();
        engine
    }
}

/// A name unique to this engine: the process id and a counter, so engines in one process
/// and in different processes never share one.
pub(super) fn unique_owner() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "local".to_owned());
    format!(
        "{host}:{}:{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Options of one start.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// A key such as an event id: a second start with it returns the first run.
    pub idempotency_key: Option<String>,
    /// Propose external effects instead of executing them.
    pub dry_run: bool,
    /// Fail the run (and compensate) if it is not done within this time.
    pub deadline: Option<Duration>,
    /// Who starts the run: journaled with it, so a human step with
    /// `self_approval: false` refuses this person's decision.
    pub initiator: Option<String>,
    /// The trace the run continues (a W3C `traceparent`, e.g. of the request that starts
    /// it); without one, the run starts a trace of its own.
    pub traceparent: Option<crate::trace::TraceParent>,
}

impl StartOptions {
    /// Options with an idempotency key.
    pub fn key(key: impl Into<String>) -> Self {
        StartOptions {
            idempotency_key: Some(key.into()),
            ..StartOptions::default()
        }
    }

    /// These options, with the person who starts the run (see
    /// [`StartOptions::initiator`]): `StartOptions::default().initiator("alice")`.
    #[must_use]
    pub fn initiator(mut self, who: impl Into<String>) -> Self {
        self.initiator = Some(who.into());
        self
    }
}

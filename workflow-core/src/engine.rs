//! The engine: registers workflows, starts and resumes runs, and drives each run's
//! [`Machine`] with tokio: journal first, then act.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tracing::Instrument;
use workflow_spec::retry::SplitMix64;
use workflow_spec::{Effect, OnTimeout, Spec, StepKind};

use crate::clock::{until, Clock, TokioClock};
use crate::context::StepContext;
use crate::error::{DecisionError, ErrorKind, RunError, RunId, StepError};
use crate::human::TaskInfo;
use crate::journal::{Event, Timestamp, Value};
use crate::machine::{Command, Machine, Status, StepState, Stop};
use crate::store::{
    Created, DeadLetter, MemoryStore, NewRun, RunRecord, RunStatus, Store, StoreError, StoredRun,
};
use crate::workflow::{BoxFuture, CallError, Invocation, Workflow};

/// How often a run waiting on a person checks a shared store for decisions made by other
/// processes (the `workflow tasks approve` command).
const FOREIGN_POLL: Duration = Duration::from_secs(1);

/// Decides whether `by` may decide a task assigned to `assignee`.
pub type Authorizer = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// Runs workflows. Cheap to clone: clones share the same engine.
///
/// ```no_run
/// # use workflow_core::prelude::*;
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::builder()
///     .store(SqliteStore::open("runs.db")?)
///     .authorizer(|assignee, by| by.ends_with(&format!("@{assignee}")))
///     .build();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
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
    owner: String,
    rng: Mutex<SplitMix64>,
    workflows: Mutex<HashMap<&'static str, Arc<dyn Registered>>>,
    live: Mutex<HashMap<RunId, Live>>,
    tasks: Mutex<BTreeMap<(RunId, usize), TaskInfo>>,
    events: broadcast::Sender<(RunId, Event)>,
    fault_hook: Option<FaultHook>,
    hibernate: bool,
    /// Runs with nothing in flight, unloaded from memory until a timer, a decision, a
    /// waiter or another process's write wakes them. Their journal is the whole state.
    hibernating: Mutex<std::collections::HashSet<RunId>>,
    wakeups: Mutex<std::collections::BTreeSet<(Timestamp, RunId)>>,
    wake_notify: Arc<tokio::sync::Notify>,
    wake_lock: tokio::sync::Mutex<()>,
    waker: Mutex<Option<tokio::task::AbortHandle>>,
}

impl Inner {
    fn fault(&self, point: &'static str) {
        if let Some(hook) = &self.fault_hook {
            hook(point);
        }
    }

    fn lock_live(&self) -> MutexGuard<'_, HashMap<RunId, Live>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_hibernating(&self) -> MutexGuard<'_, std::collections::HashSet<RunId>> {
        self.hibernating.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_wakeups(&self) -> MutexGuard<'_, std::collections::BTreeSet<(Timestamp, RunId)>> {
        self.wakeups.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_tasks(&self) -> MutexGuard<'_, BTreeMap<(RunId, usize), TaskInfo>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_workflows(&self) -> MutexGuard<'_, HashMap<&'static str, Arc<dyn Registered>>> {
        self.workflows.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Live {
    mailbox: mpsc::UnboundedSender<Box<Msg>>,
    done: watch::Receiver<Option<Arc<Finished>>>,
    abort: Option<tokio::task::AbortHandle>,
}

/// A test hook called at named points of the driver (`before_result_append`,
/// `after_result_append`), so crash tests can kill the process exactly there.
pub type FaultHook = Arc<dyn Fn(&'static str) + Send + Sync>;

/// How a run ended, kept for its waiters.
#[derive(Debug)]
struct Finished {
    status: Status,
    outputs: Vec<Option<Value>>,
    stop: Option<Stop>,
}

enum Msg {
    Decide {
        step: usize,
        by: String,
        decision: Value,
        reply: oneshot::Sender<Result<(), DecisionError>>,
    },
    Cancel {
        by: String,
    },
}

/// Builds an [`Engine`].
pub struct EngineBuilder {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    authorizer: Authorizer,
    max_in_flight: usize,
    log_payloads: bool,
    owner: String,
    seed: Option<u64>,
    fault_hook: Option<FaultHook>,
    hibernate: bool,
}

impl fmt::Debug for EngineBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EngineBuilder")
            .field("max_in_flight", &self.max_in_flight)
            .field("log_payloads", &self.log_payloads)
            .finish_non_exhaustive()
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

    /// The name this engine claims runs under in a shared store (default `local`).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = owner.into();
        self
    }

    /// Whether runs with nothing in flight (waiting on a person or a timer) are unloaded
    /// from memory until something wakes them (default: yes). Their journal is their state,
    /// so a hundred thousand parked runs cost little more than their index entries.
    pub fn hibernate(mut self, hibernate: bool) -> Self {
        self.hibernate = hibernate;
        self
    }

    #[doc(hidden)]
    /// Crash-test hook, see [`FaultHook`].
    pub fn fault_hook(mut self, hook: impl Fn(&'static str) + Send + Sync + 'static) -> Self {
        self.fault_hook = Some(Arc::new(hook));
        self
    }

    /// The engine.
    pub fn build(self) -> Engine {
        let seed = self.seed.unwrap_or_else(|| self.clock.now());
        Engine {
            inner: Arc::new(Inner {
                store: self.store,
                clock: self.clock,
                authorizer: self.authorizer,
                max_in_flight: self.max_in_flight,
                log_payloads: self.log_payloads,
                owner: self.owner,
                rng: Mutex::new(SplitMix64::new(seed)),
                workflows: Mutex::new(HashMap::new()),
                live: Mutex::new(HashMap::new()),
                tasks: Mutex::new(BTreeMap::new()),
                events: broadcast::channel(1024).0,
                fault_hook: self.fault_hook,
                hibernate: self.hibernate,
                hibernating: Mutex::new(std::collections::HashSet::new()),
                wakeups: Mutex::new(std::collections::BTreeSet::new()),
                wake_notify: Arc::new(tokio::sync::Notify::new()),
                wake_lock: tokio::sync::Mutex::new(()),
                waker: Mutex::new(None),
            }),
        }
    }
}

/// The default authorization: the assignee itself, or a member written `name@assignee`.
pub fn default_authorizer(assignee: &str, by: &str) -> bool {
    by == assignee
        || by
            .strip_suffix(assignee)
            .is_some_and(|rest| rest.ends_with('@') && rest.len() > 1)
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
}

impl StartOptions {
    /// Options with an idempotency key.
    pub fn key(key: impl Into<String>) -> Self {
        StartOptions {
            idempotency_key: Some(key.into()),
            ..StartOptions::default()
        }
    }
}

/// A run's state, for inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    /// The run's row.
    pub record: RunRecord,
    /// Per step, in declaration order: its id, state and attempts.
    pub steps: Vec<StepView>,
}

/// One step of a [`RunView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepView {
    /// The step id.
    pub id: String,
    /// Its state.
    pub state: StepState,
    /// Attempts started.
    pub attempts: u32,
}

impl Engine {
    /// An engine with default settings over `store`.
    pub fn new(store: impl Store) -> Self {
        Engine::builder().store(store).build()
    }

    /// A builder with defaults: in-memory store, tokio clock, default authorizer.
    pub fn builder() -> EngineBuilder {
        EngineBuilder {
            store: Arc::new(MemoryStore::new()),
            clock: Arc::new(TokioClock::new()),
            authorizer: Arc::new(default_authorizer),
            max_in_flight: 16,
            log_payloads: false,
            owner: "local".into(),
            seed: None,
            fault_hook: None,
            hibernate: true,
        }
    }

    /// The engine's store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Stops driving every run at once, as a crash would: in-flight steps are abandoned
    /// and nothing more is journaled. Unfinished runs stay `running` in the store and are
    /// resumed by the next engine's [`Engine::resume_all`].
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
        if let Some(waker) = self
            .inner
            .waker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            waker.abort();
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

    /// The current time by the engine's clock.
    pub fn now(&self) -> Timestamp {
        self.inner.clock.now()
    }

    /// Registers a workflow with its environment. Its retry policies are validated by the
    /// same code the macro ran at compile time.
    pub fn register<W: Workflow>(&self, env: W::Env) -> Result<(), RunError> {
        for step in &W::spec().steps {
            if let Some(policy) = &step.retry {
                if let Err(errors) = policy.validate(step.timeout) {
                    let message = errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ");
                    return Err(RunError::InvalidSpec(format!(
                        "step `{}`: {message}",
                        step.id
                    )));
                }
            }
        }
        self.inner.lock_workflows().insert(
            W::NAME,
            Arc::new(Registration::<W> {
                env: Arc::new(env),
                spec_stored: std::sync::atomic::AtomicBool::new(false),
            }),
        );
        Ok(())
    }

    /// A run with its journal, or `UnknownRun`.
    async fn stored(&self, run: RunId) -> Result<StoredRun, RunError> {
        self.inner
            .store
            .load(run)
            .await?
            .ok_or(RunError::UnknownRun(run))
    }

    /// The registration of a workflow, or `NotRegistered`.
    fn registered(&self, workflow: &str) -> Result<Arc<dyn Registered>, RunError> {
        self.registration(workflow)
            .ok_or_else(|| RunError::NotRegistered(workflow.to_owned()))
    }

    fn registration(&self, workflow: &str) -> Option<Arc<dyn Registered>> {
        self.inner.lock_workflows().get(workflow).cloned()
    }

    fn typed<W: Workflow>(&self) -> Result<Arc<Registration<W>>, RunError> {
        let registered = self
            .registration(W::NAME)
            .ok_or_else(|| RunError::NotRegistered(W::NAME.to_owned()))?;
        registered
            .as_any()
            .downcast::<Registration<W>>()
            .map_err(|_| RunError::NotRegistered(W::NAME.to_owned()))
    }

    /// Starts a run.
    pub async fn start<W: Workflow>(&self, input: W::Input) -> Result<RunHandle<W>, RunError> {
        self.start_with::<W>(input, StartOptions::default()).await
    }

    /// Starts a run with options. With an idempotency key that was used before, returns
    /// the existing run and starts nothing.
    pub async fn start_with<W: Workflow>(
        &self,
        input: W::Input,
        options: StartOptions,
    ) -> Result<RunHandle<W>, RunError> {
        let registration = self.typed::<W>()?;
        registration.store_spec(self).await?;
        let input = serde_json::to_value(&input).map_err(|error| RunError::Decode {
            run: RunId(0),
            step: "<input>".into(),
            message: error.to_string(),
        })?;
        let deadline = options.deadline.map(|d| self.now() + d.as_millis() as u64);
        let key = options.idempotency_key.as_deref();
        let created = self
            .create(
                &*registration,
                W::NAME,
                input,
                key,
                options.dry_run,
                deadline,
            )
            .await?;
        if let Created::Existing(id) = created {
            tracing::info!(workflow = W::NAME, run = %id, key = ?key, "start deduplicated by idempotency key");
        }
        Ok(RunHandle::new(
            RunRef {
                engine: self.clone(),
                id: created.id(),
            },
            matches!(created, Created::New(_)),
        ))
    }

    /// A typed handle to an existing run of `W`.
    pub async fn handle<W: Workflow>(&self, run: RunId) -> Result<RunHandle<W>, RunError> {
        let record = self.record(run).await?;
        if record.workflow != W::NAME {
            return Err(RunError::WrongWorkflow {
                run,
                expected: W::NAME.into(),
                actual: record.workflow,
            });
        }
        Ok(RunHandle::new(
            RunRef {
                engine: self.clone(),
                id: run,
            },
            false,
        ))
    }

    async fn record(&self, run: RunId) -> Result<RunRecord, RunError> {
        let stored = self.inner.store.load(run).await?;
        stored.map(|s| s.record).ok_or(RunError::UnknownRun(run))
    }

    /// Resumes every unfinished run of the registered workflows from its journal. Runs
    /// whose spec changed since they started are parked instead. Returns how many resumed.
    pub async fn resume_all(&self) -> Result<usize, RunError> {
        let registered: Vec<Arc<dyn Registered>> =
            self.inner.lock_workflows().values().cloned().collect();
        for workflow in &registered {
            workflow.store_spec(self).await?;
        }
        let names: Vec<&'static str> = self.inner.lock_workflows().keys().copied().collect();
        let runs = self
            .inner
            .store
            .claim_unfinished(&self.inner.owner, &names)
            .await?;
        let mut resumed = 0;
        for run in runs {
            if self.inner.lock_live().contains_key(&run)
                || self.inner.lock_hibernating().contains(&run)
            {
                continue;
            }
            if self.resume(run).await? {
                resumed += 1;
            }
        }
        Ok(resumed)
    }

    async fn resume(&self, run: RunId) -> Result<bool, RunError> {
        let stored = self.stored(run).await?;
        let registered = self.registered(&stored.record.workflow)?;
        if stored.record.fingerprint != registered.fingerprint() {
            let note = format!(
                "parked: started under spec {} but `{}` is now {}; cancel it or restart it",
                stored.record.fingerprint,
                stored.record.workflow,
                registered.fingerprint()
            );
            tracing::warn!(run = %run, "{note}");
            self.inner
                .store
                .set_status(run, RunStatus::Parked, Some(&note), None)
                .await?;
            return Ok(false);
        }
        tracing::info!(run = %run, events = stored.events.len(), "resuming run from its journal");
        registered.launch(self.clone(), run, stored.events);
        Ok(true)
    }

    /// A run's state, rebuilt from its journal.
    pub async fn inspect(&self, run: RunId) -> Result<RunView, RunError> {
        let stored = self.stored(run).await?;
        let registered = self.registered(&stored.record.workflow)?;
        let machine = Machine::replay(registered.spec(), &stored.events);
        let steps = registered
            .spec()
            .steps
            .iter()
            .enumerate()
            .map(|(index, step)| StepView {
                id: step.id.clone(),
                state: machine.states()[index].clone(),
                attempts: machine.attempts()[index],
            })
            .collect();
        Ok(RunView {
            record: stored.record,
            steps,
        })
    }

    /// The open human tasks of the runs this engine drives, oldest run first.
    pub async fn open_tasks(&self) -> Result<Vec<TaskInfo>, RunError> {
        Ok(self.inner.lock_tasks().values().cloned().collect())
    }

    /// Decides a human task by step id, with the decision as JSON (the CLI's path; typed
    /// code uses the run handle's task methods).
    pub async fn decide(
        &self,
        run: RunId,
        step: &str,
        by: &str,
        decision: Value,
    ) -> Result<(), DecisionError> {
        let record = self
            .record(run)
            .await
            .map_err(|_| DecisionError::UnknownRun(run))?;
        let index = self
            .registration(&record.workflow)
            .and_then(|r| r.spec().step_index(step))
            .ok_or_else(|| DecisionError::UnknownTask {
                run,
                step: step.to_owned(),
            })?;
        RunRef {
            engine: self.clone(),
            id: run,
        }
        .decide_index(index, by, decision)
        .await
    }

    /// Cancels a run: scheduling stops, in-flight steps settle, compensations run.
    /// A parked run is marked cancelled directly.
    pub async fn cancel(&self, run: RunId, by: &str) -> Result<(), RunError> {
        let message = || Box::new(Msg::Cancel { by: by.to_owned() });
        if self.send(run, message).await? {
            return Ok(());
        }
        let record = self.record(run).await?;
        if record.status.is_finished() {
            return Err(RunError::Finished(run));
        }
        let note = format!("cancelled by {by}");
        self.inner
            .store
            .set_status(run, RunStatus::Cancelled, Some(&note), None)
            .await?;
        Ok(())
    }

    /// Every dead letter, newest first.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, RunError> {
        Ok(self.inner.store.dead_letters().await?)
    }

    /// Retries a failed run from its failed step: completed outputs are reused, steps whose
    /// compensation ran are run again.
    pub async fn retry_dead_letter(&self, run: RunId, by: &str) -> Result<(), RunError> {
        let stored = self.stored(run).await?;
        if stored.record.status != RunStatus::Failed {
            return Err(RunError::NotFailed(run));
        }
        let registered = self.registered(&stored.record.workflow)?;
        if stored.record.fingerprint != registered.fingerprint() {
            return Err(RunError::SpecChanged {
                run,
                workflow: stored.record.workflow.clone(),
                recorded: stored.record.fingerprint.clone(),
                current: registered.fingerprint().to_owned(),
            });
        }
        let event = Event::Retried {
            by: by.to_owned(),
            at: self.now(),
        };
        self.inner
            .store
            .append(run, stored.events.len() as u64, &event)
            .await?;
        self.inner.store.remove_dead_letter(run).await?;
        let note = format!("retried by {by}");
        self.inner
            .store
            .set_status(run, RunStatus::Running, Some(&note), None)
            .await?;
        let mut events = stored.events;
        events.push(event);
        registered.launch(self.clone(), run, events);
        Ok(())
    }

    /// Restarts a parked run under the current spec: a new run with the same inputs; the
    /// parked run is marked cancelled with a note naming the new one.
    pub async fn restart_parked(&self, run: RunId, by: &str) -> Result<RunId, RunError> {
        let stored = self.stored(run).await?;
        if stored.record.status != RunStatus::Parked {
            return Err(RunError::NotParked(run));
        }
        let registered = self.registered(&stored.record.workflow)?;
        let Some(Event::RunStarted { input, dry_run, .. }) = stored.events.first() else {
            return Err(RunError::Decode {
                run,
                step: "<input>".into(),
                message: "the journal does not start with the run's inputs".into(),
            });
        };
        let (input, dry_run) = (input.clone(), *dry_run);
        let workflow = stored.record.workflow.clone();
        let created = self
            .create(&*registered, &workflow, input, None, dry_run, None)
            .await?;
        let new = created.id();
        let note = format!("restarted by {by} as {new}");
        self.inner
            .store
            .set_status(run, RunStatus::Cancelled, Some(&note), None)
            .await?;
        Ok(new)
    }

    /// Creates a run with its `RunStarted` event (a fresh jitter seed, the trace id derived
    /// from it) and launches it, or returns the run its idempotency key names.
    async fn create(
        &self,
        registered: &dyn Registered,
        workflow: &str,
        input: Value,
        idempotency_key: Option<&str>,
        dry_run: bool,
        deadline: Option<Timestamp>,
    ) -> Result<Created, RunError> {
        let now = self.now();
        let seed = self
            .inner
            .rng
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_u64();
        let started = Event::RunStarted {
            workflow: workflow.to_owned(),
            fingerprint: registered.fingerprint().to_owned(),
            input,
            seed,
            trace_id: format!("{seed:016x}"),
            dry_run,
            deadline,
            at: now,
        };
        let created = self
            .inner
            .store
            .create_run(NewRun {
                workflow,
                fingerprint: registered.fingerprint(),
                idempotency_key,
                started: &started,
                at: now,
            })
            .await?;
        if let Created::New(id) = created {
            tracing::info!(workflow, run = %id, "run started");
            if self.inner.events.receiver_count() > 0 {
                let _ = self.inner.events.send((id, started.clone()));
            }
            registered.launch(self.clone(), id, vec![started]);
        }
        Ok(created)
    }

    /// Sends a message to a run's driver, waking the run if it hibernates. The send
    /// happens under the lock a driver takes to hibernate, so no message is ever left in
    /// the mailbox of a run that went to sleep. `false` when the run is not driven here.
    async fn send(&self, run: RunId, message: impl Fn() -> Box<Msg>) -> Result<bool, RunError> {
        loop {
            let sent = self
                .inner
                .lock_live()
                .get(&run)
                .map(|live| live.mailbox.send(message()).is_ok());
            match sent {
                Some(sent) => return Ok(sent),
                None if self.wake(run).await? => continue,
                None => return Ok(false),
            }
        }
    }

    /// Reloads a hibernating run from its journal and drives it again. `false` when the
    /// run neither hibernates nor is driven here.
    async fn wake(&self, run: RunId) -> Result<bool, RunError> {
        let _one_at_a_time = self.inner.wake_lock.lock().await;
        if self.inner.lock_live().contains_key(&run) {
            return Ok(true);
        }
        if !self.inner.lock_hibernating().remove(&run) {
            return Ok(false);
        }
        let loaded = async {
            let stored = self.stored(run).await?;
            let registered = self.registered(&stored.record.workflow)?;
            Ok::<_, RunError>((registered, stored.events))
        }
        .await;
        match loaded {
            Ok((registered, events)) => {
                registered.launch(self.clone(), run, events);
                Ok(true)
            }
            Err(error) => {
                self.inner.lock_hibernating().insert(run);
                Err(error)
            }
        }
    }

    /// Called by a driver with nothing in flight: unloads the run unless a message or a
    /// waiter is pending. Decided under the live-runs lock, which senders also hold.
    fn try_hibernate(
        &self,
        run: RunId,
        wake: Option<Timestamp>,
        mailbox: &mpsc::UnboundedReceiver<Box<Msg>>,
        done: &watch::Sender<Option<Arc<Finished>>>,
    ) -> bool {
        {
            let mut live = self.inner.lock_live();
            // The live entry holds one receiver; any other is a waiter.
            if !mailbox.is_empty() || done.receiver_count() > 1 {
                return false;
            }
            live.remove(&run);
            self.inner.lock_hibernating().insert(run);
        }
        if let Some(at) = wake {
            self.inner.lock_wakeups().insert((at, run));
        }
        self.ensure_waker();
        self.inner.wake_notify.notify_one();
        true
    }

    /// Starts the task that wakes hibernating runs when their timers are due and, on a
    /// shared store, when another process wrote to their journals.
    fn ensure_waker(&self) {
        let mut waker = self.inner.waker.lock().unwrap_or_else(|p| p.into_inner());
        if waker.is_some() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let notify = self.inner.wake_notify.clone();
        let handle = tokio::spawn(async move {
            let mut last_poll: Option<Timestamp> = None;
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let engine = Engine { inner };
                let now = engine.now();
                let due: Vec<RunId> = {
                    let mut wakeups = engine.inner.lock_wakeups();
                    let mut due = Vec::new();
                    while let Some(&(at, run)) = wakeups.first() {
                        if at > now {
                            break;
                        }
                        wakeups.pop_first();
                        due.push(run);
                    }
                    due
                };
                for run in due {
                    if let Err(error) = engine.wake(run).await {
                        tracing::error!(run = %run, error = %error, "cannot wake a hibernating run");
                    }
                }
                let shared = engine.inner.store.shared();
                if shared && !engine.inner.lock_hibernating().is_empty() {
                    // Another process (the CLI) may have decided a task: look at the runs
                    // whose journals changed since the last look, with a second of slack.
                    let since = last_poll.map_or(0, |at| at.saturating_sub(1_000));
                    last_poll = Some(now);
                    if let Ok(changed) = engine.inner.store.changed_since(since).await {
                        for run in changed {
                            if engine.inner.lock_hibernating().contains(&run) {
                                let _ = engine.wake(run).await;
                            }
                        }
                    }
                }
                let next = engine.inner.lock_wakeups().first().map(|(at, _)| *at);
                let mut pause =
                    next.map_or(Duration::from_secs(3600), |at| until(engine.now(), at));
                if shared {
                    pause = pause.min(FOREIGN_POLL);
                }
                drop(engine);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = notify.notified() => {}
                }
            }
        });
        *waker = Some(handle.abort_handle());
    }

    async fn wait(&self, run: RunId) -> Result<Arc<Finished>, RunError> {
        let mut done = self
            .inner
            .lock_live()
            .get(&run)
            .map(|live| live.done.clone());
        // A hibernating run is woken; holding its receiver keeps it awake.
        while done.is_none() && self.wake(run).await? {
            done = self
                .inner
                .lock_live()
                .get(&run)
                .map(|live| live.done.clone());
        }
        if let Some(mut done) = done {
            loop {
                if let Some(finished) = done.borrow_and_update().clone() {
                    return Ok(finished);
                }
                if done.changed().await.is_err() {
                    // The driver stopped without finishing (store failure, shutdown).
                    return match done.borrow().clone() {
                        Some(finished) => Ok(finished),
                        None => Err(RunError::EngineStopped(run)),
                    };
                }
            }
        }
        let stored = self.stored(run).await?;
        let registered = self.registered(&stored.record.workflow)?;
        let machine = Machine::replay(registered.spec(), &stored.events);
        if !machine.status().is_terminal() {
            return Err(match stored.record.status {
                RunStatus::Parked => RunError::SpecChanged {
                    run,
                    workflow: stored.record.workflow.clone(),
                    recorded: stored.record.fingerprint.clone(),
                    current: registered.fingerprint().to_owned(),
                },
                RunStatus::Cancelled => RunError::Cancelled(run),
                _ => RunError::EngineStopped(run),
            });
        }
        Ok(Arc::new(Finished {
            status: machine.status(),
            outputs: machine.outputs().to_vec(),
            stop: machine.stop().cloned(),
        }))
    }
}

/// An untyped reference to a run of an engine.
#[derive(Clone)]
pub struct RunRef {
    engine: Engine,
    id: RunId,
}

impl fmt::Debug for RunRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunRef")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl RunRef {
    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) async fn decide_index(
        &self,
        step: usize,
        by: &str,
        decision: Value,
    ) -> Result<(), DecisionError> {
        let run = self.id;
        let answer = Mutex::new(None);
        let message = || {
            let (reply, receiver) = oneshot::channel();
            *answer.lock().unwrap_or_else(|p| p.into_inner()) = Some(receiver);
            Box::new(Msg::Decide {
                step,
                by: by.to_owned(),
                decision: decision.clone(),
                reply,
            })
        };
        let sent = self
            .engine
            .send(run, message)
            .await
            .map_err(|error| match error {
                RunError::Store(error) => DecisionError::Store(error),
                _ => DecisionError::UnknownRun(run),
            })?;
        let receiver = answer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let (true, Some(receiver)) = (sent, receiver) {
            if let Ok(result) = receiver.await {
                return result;
            }
        }
        // Not driven here (finished, or not resumed): explain from the journal.
        let stored = self
            .engine
            .inner
            .store
            .load(run)
            .await?
            .ok_or(DecisionError::UnknownRun(run))?;
        let step_id = self
            .engine
            .registration(&stored.record.workflow)
            .and_then(|r| r.spec().steps.get(step).map(|s| s.id.clone()))
            .unwrap_or_else(|| format!("#{step}"));
        let decided_by = stored.events.iter().find_map(|event| match event {
            Event::TaskDecided { step: s, by, .. } if *s == step => Some(by.clone()),
            _ => None,
        });
        if let Some(by) = decided_by {
            return Err(DecisionError::AlreadyDecided {
                run,
                step: step_id,
                by,
            });
        }
        if stored
            .events
            .iter()
            .any(|e| matches!(e, Event::TaskExpired { step: s, .. } if *s == step))
        {
            return Err(DecisionError::Expired { run, step: step_id });
        }
        if stored.record.status.is_finished() {
            return Err(DecisionError::Finished(run));
        }
        Err(DecisionError::UnknownTask { run, step: step_id })
    }
}

/// A typed handle to a run of `W`. Derefs to `W`'s human-task handles, so a checkpoint is
/// decided with `run.human_review().approve("ana@trust_and_safety_team", None)`.
pub struct RunHandle<W: Workflow> {
    run: RunRef,
    tasks: W::Tasks,
    created: bool,
}

impl<W: Workflow> fmt::Debug for RunHandle<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunHandle")
            .field("workflow", &W::NAME)
            .field("id", &self.run.id)
            .finish()
    }
}

impl<W: Workflow> std::ops::Deref for RunHandle<W> {
    type Target = W::Tasks;

    fn deref(&self) -> &W::Tasks {
        &self.tasks
    }
}

impl<W: Workflow> RunHandle<W> {
    fn new(run: RunRef, created: bool) -> Self {
        RunHandle {
            tasks: W::Tasks::from(run.clone()),
            run,
            created,
        }
    }

    /// Whether this handle's start created the run (false when an idempotency key named
    /// an existing run, or for handles to existing runs).
    pub fn was_created(&self) -> bool {
        self.created
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.run.id
    }

    /// The untyped reference.
    pub fn run_ref(&self) -> &RunRef {
        &self.run
    }

    /// Waits for the run to finish and returns its typed outputs, or why there are none.
    pub async fn outputs(&self) -> Result<W::Outputs, RunError> {
        let run = self.run.id;
        let finished = self.run.engine.wait(run).await?;
        match (&finished.status, &finished.stop) {
            (Status::Completed, _) => W::outputs(&finished.outputs).map_err(|error| {
                let step_name = |step: usize| {
                    W::spec()
                        .steps
                        .get(step)
                        .map_or_else(String::new, |s| s.id.clone())
                };
                match error {
                    CallError::Absent(step) => RunError::Absent {
                        run,
                        step: step_name(step),
                    },
                    CallError::Decode { step, message } => RunError::Decode {
                        run,
                        step: step_name(step),
                        message,
                    },
                    other => RunError::InvalidSpec(other.to_string()),
                }
            }),
            (Status::Cancelled, _) => Err(RunError::Cancelled(run)),
            (_, Some(Stop::Deadline)) => Err(RunError::DeadlineExceeded(run)),
            (_, Some(Stop::Cancelled)) => Err(RunError::Cancelled(run)),
            (
                _,
                Some(Stop::StepFailed {
                    step,
                    attempts,
                    kind,
                    message,
                }),
            ) => Err(RunError::Failed {
                run,
                step: W::spec().steps[*step].id.clone(),
                attempts: *attempts,
                error: StepError::new(*kind, message.clone()),
            }),
            (_, None) => Err(RunError::EngineStopped(run)),
        }
    }

    /// The run's current state.
    pub async fn inspect(&self) -> Result<RunView, RunError> {
        self.run.engine.inspect(self.run.id).await
    }

    /// The effects proposed instead of executed (dry runs): step id and arguments.
    pub async fn proposals(&self) -> Result<Vec<(String, Value)>, RunError> {
        let stored = self
            .run
            .engine
            .inner
            .store
            .load(self.run.id)
            .await?
            .ok_or(RunError::UnknownRun(self.run.id))?;
        Ok(stored
            .events
            .into_iter()
            .filter_map(|event| match event {
                Event::EffectProposed { step, args, .. } => {
                    Some((W::spec().steps.get(step)?.id.clone(), args))
                }
                _ => None,
            })
            .collect())
    }

    /// Cancels the run.
    pub async fn cancel(&self, by: &str) -> Result<(), RunError> {
        self.run.engine.cancel(self.run.id, by).await
    }
}

/// A registered workflow, with its type erased so the engine can resume runs by name.
trait Registered: Send + Sync + 'static {
    /// Records the spec in the store once, for tools that lack the workflow's code.
    fn store_spec<'a>(&'a self, engine: &'a Engine) -> BoxFuture<'a, Result<(), StoreError>>;
    fn fingerprint(&self) -> &'static str;
    fn spec(&self) -> &'static Spec;
    fn launch(&self, engine: Engine, run: RunId, events: Vec<Event>);
    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync>;
}

struct Registration<W: Workflow> {
    env: Arc<W::Env>,
    spec_stored: std::sync::atomic::AtomicBool,
}

impl<W: Workflow> Registered for Registration<W> {
    fn store_spec<'a>(&'a self, engine: &'a Engine) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if !self
                .spec_stored
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                let json = serde_json::to_string(W::spec()).unwrap_or_default();
                engine.inner.store.put_spec(W::FINGERPRINT, &json).await?;
            }
            Ok(())
        })
    }

    fn fingerprint(&self) -> &'static str {
        W::FINGERPRINT
    }

    fn spec(&self) -> &'static Spec {
        W::spec()
    }

    fn launch(&self, engine: Engine, run: RunId, events: Vec<Event>) {
        let (mailbox_tx, mailbox) = mpsc::unbounded_channel();
        let (done_tx, done) = watch::channel(None);
        engine.inner.lock_live().insert(
            run,
            Live {
                mailbox: mailbox_tx,
                done,
                abort: None,
            },
        );
        let env = self.env.clone();
        let trace_id = match events.first() {
            Some(Event::RunStarted { trace_id, .. }) => trace_id.clone(),
            _ => String::new(),
        };
        let span = tracing::info_span!("run", workflow = W::NAME, run = %run, trace_id = %trace_id);
        let live = engine.clone();
        let handle = tokio::spawn(
            async move {
                let driver =
                    Driver::<W>::new(engine.clone(), run, env, events, mailbox, trace_id, done_tx);
                let end = match driver {
                    Ok(driver) => driver.drive().await,
                    Err(error) => {
                        tracing::error!(error = %error, "cannot resume the run");
                        DriveEnd::Stopped
                    }
                };
                if !matches!(end, DriveEnd::Hibernated) {
                    engine.inner.lock_live().remove(&run);
                    engine.inner.lock_tasks().retain(|(r, _), _| *r != run);
                }
            }
            .instrument(span),
        );
        let mut runs = live.inner.lock_live();
        if let Some(entry) = runs.get_mut(&run) {
            entry.abort = Some(handle.abort_handle());
        }
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

/// What a spawned piece of work reports back to its run's driver.
enum Done {
    Attempt {
        step: usize,
        attempt: u32,
        result: Result<Value, StepError>,
        elapsed: Duration,
    },
    Compensation {
        step: usize,
        result: Result<(), StepError>,
    },
}

/// Drives one run: the only writer of its journal while it lives.
struct Driver<W: Workflow> {
    engine: Engine,
    run: RunId,
    env: Arc<W::Env>,
    input: Arc<W::Input>,
    machine: Machine<'static>,
    seq: u64,
    trace_id: String,
    work: JoinSet<Done>,
    mailbox: mpsc::UnboundedReceiver<Box<Msg>>,
    deciders: HashMap<usize, String>,
    compensating: Option<usize>,
    done: watch::Sender<Option<Arc<Finished>>>,
}

/// How a driver stopped.
enum DriveEnd {
    /// The run finished; waiters were told.
    Finished,
    /// Nothing in flight: the run was unloaded until something wakes it.
    Hibernated,
    /// The journal could not be written, or the engine stopped.
    Stopped,
}

impl<W: Workflow> Driver<W> {
    fn new(
        engine: Engine,
        run: RunId,
        env: Arc<W::Env>,
        events: Vec<Event>,
        mailbox: mpsc::UnboundedReceiver<Box<Msg>>,
        trace_id: String,
        done: watch::Sender<Option<Arc<Finished>>>,
    ) -> Result<Self, RunError> {
        let machine =
            Machine::replay(W::spec(), &events).with_max_in_flight(engine.inner.max_in_flight);
        let input_value = machine.input().cloned().unwrap_or(Value::Null);
        let input: W::Input =
            serde_json::from_value(input_value).map_err(|error| RunError::Decode {
                run,
                step: "<input>".into(),
                message: error.to_string(),
            })?;
        let deciders = events
            .iter()
            .filter_map(|event| match event {
                Event::TaskDecided { step, by, .. } => Some((*step, by.clone())),
                _ => None,
            })
            .collect();
        let driver = Driver {
            engine,
            run,
            env,
            input: Arc::new(input),
            machine,
            seq: events.len() as u64,
            trace_id,
            work: JoinSet::new(),
            mailbox,
            deciders,
            compensating: None,
            done,
        };
        for (step, state) in driver.machine.states().iter().enumerate() {
            if let StepState::Waiting {
                assignee,
                deadline,
                escalated,
            } = state
            {
                driver.index_task(step, assignee, *deadline, *escalated);
            }
        }
        Ok(driver)
    }

    fn now(&self) -> Timestamp {
        self.engine.inner.clock.now()
    }

    /// Whether to poll the store for decisions written by other processes: only while a
    /// human task is open, and only on stores other processes can write.
    fn watch_foreign(&self) -> bool {
        self.machine.has_open_tasks() && self.engine.inner.store.shared()
    }

    fn spec(&self) -> &'static Spec {
        W::spec()
    }

    fn step_id(&self, step: usize) -> &'static str {
        self.spec().steps.get(step).map_or("?", |s| s.id.as_str())
    }

    /// Journals an event, then applies it: nothing is acted on before it is durable.
    async fn append(&mut self, event: Event) -> Result<(), StoreError> {
        loop {
            match self
                .engine
                .inner
                .store
                .append(self.run, self.seq, &event)
                .await
            {
                Ok(()) => break,
                Err(StoreError::Conflict { .. }) => {
                    // Another writer (the CLI deciding a task) appended first: take in what
                    // it wrote, then append ours unless it no longer applies.
                    self.catch_up().await?;
                    if !self.still_applies(&event) {
                        return Ok(());
                    }
                }
                Err(error) => return Err(error),
            }
        }
        self.seq += 1;
        self.applied(event);
        Ok(())
    }

    fn applied(&mut self, event: Event) {
        match &event {
            Event::TaskDecided { step, by, .. } => {
                self.deciders.insert(*step, by.clone());
                self.unindex_task(*step);
            }
            Event::TaskExpired { step, .. } => self.unindex_task(*step),
            _ => {}
        }
        self.machine.apply(&event);
        if self.engine.inner.events.receiver_count() > 0 {
            let _ = self.engine.inner.events.send((self.run, event));
        }
    }

    /// Applies what other writers appended to this run's journal since we last wrote.
    async fn catch_up(&mut self) -> Result<(), StoreError> {
        let stored = self.engine.inner.store.load(self.run).await?;
        let events = stored.map(|s| s.events).unwrap_or_default();
        for event in events.into_iter().skip(self.seq as usize) {
            tracing::info!(event = ?event.step(), "took in a journal entry written by another process");
            self.seq += 1;
            self.applied(event);
        }
        Ok(())
    }

    /// Whether an event we meant to append still fits the state after catching up.
    fn still_applies(&self, event: &Event) -> bool {
        match event {
            Event::TaskDecided { step, .. }
            | Event::TaskEscalated { step, .. }
            | Event::TaskExpired { step, .. } => {
                matches!(
                    self.machine.states().get(*step),
                    Some(StepState::Waiting { .. })
                )
            }
            _ => true,
        }
    }

    async fn drive(mut self) -> DriveEnd {
        match self.drive_inner().await {
            Ok(Some(finished)) => {
                let _ = self.done.send(Some(Arc::new(finished)));
                DriveEnd::Finished
            }
            Ok(None) => DriveEnd::Hibernated,
            Err(error) => {
                tracing::error!(error = %error, "the run stopped: its journal could not be written; it resumes on the next start");
                DriveEnd::Stopped
            }
        }
    }

    /// Drives the run until it finishes (`Some`) or hibernates (`None`).
    async fn drive_inner(&mut self) -> Result<Option<Finished>, StoreError> {
        loop {
            // Act until the machine has nothing new to do.
            loop {
                let commands = self.machine.commands(self.now());
                let mut progressed = false;
                for command in commands {
                    if let Command::Finish(status) = command {
                        return Box::pin(self.finish(status)).await.map(Some);
                    }
                    progressed |= Box::pin(self.act(command)).await?;
                }
                if !progressed {
                    break;
                }
            }
            let wake = self.machine.next_wake();
            if self.engine.inner.hibernate
                && self.work.is_empty()
                && self.machine.status() == Status::Running
                && self
                    .engine
                    .try_hibernate(self.run, wake, &self.mailbox, &self.done)
            {
                tracing::debug!("nothing in flight: hibernating until woken");
                return Ok(None);
            }
            // Built every turn but registered with the timer only when polled, i.e. only
            // when there is something to wake for.
            let sleep = tokio::time::sleep(wake.map_or(Duration::ZERO, |at| until(self.now(), at)));
            tokio::select! {
                Some(joined) = self.work.join_next(), if !self.work.is_empty() => {
                    match joined {
                        Ok(done) => Box::pin(self.settle(done)).await?,
                        Err(error) => tracing::error!(error = %error, "a step task was lost"),
                    }
                }
                Some(msg) = self.mailbox.recv() => Box::pin(self.message(msg)).await?,
                () = sleep, if wake.is_some() => {}
                () = tokio::time::sleep(FOREIGN_POLL), if self.watch_foreign() => Box::pin(self.catch_up()).await?,
                // Nothing can wake the run: the engine is shutting down.
                else => return Err(StoreError::Io("the engine stopped driving this run".into())),
            }
        }
    }

    /// Carries out one command; returns whether the machine's state changed.
    async fn act(&mut self, command: Command) -> Result<bool, StoreError> {
        let now = self.now();
        match command {
            Command::Start {
                step,
                attempt,
                resumed,
            } => {
                if attempt == 1 && !resumed {
                    if let Some(reason) = self.skip_reason(step) {
                        self.append(Event::StepSkipped {
                            step,
                            reason,
                            at: now,
                        })
                        .await?;
                        return Ok(true);
                    }
                    if self.machine.dry_run() && self.is_external(step) {
                        let args = W::proposal(step, &self.input, self.machine.outputs());
                        tracing::info!(
                            step = self.step_id(step),
                            "dry run: effect proposed, not executed"
                        );
                        self.append(Event::EffectProposed {
                            step,
                            args,
                            at: now,
                        })
                        .await?;
                        let reason = "dry run: external effect proposed, not executed".to_owned();
                        self.append(Event::StepSkipped {
                            step,
                            reason,
                            at: now,
                        })
                        .await?;
                        return Ok(true);
                    }
                }
                self.append(Event::AttemptStarted {
                    step,
                    attempt,
                    at: now,
                })
                .await?;
                self.spawn_attempt(step, attempt, resumed);
                Ok(true)
            }
            Command::Skip { step, upstream } => {
                let reason = format!("upstream `{}` is absent", self.step_id(upstream));
                self.append(Event::StepSkipped {
                    step,
                    reason,
                    at: now,
                })
                .await?;
                Ok(true)
            }
            Command::OpenTask { step } => {
                if let Some(reason) = self.skip_reason(step) {
                    self.append(Event::StepSkipped {
                        step,
                        reason,
                        at: now,
                    })
                    .await?;
                    return Ok(true);
                }
                let spec = &self.spec().steps[step];
                let StepKind::Human(human) = &spec.kind else {
                    return Ok(false);
                };
                let deadline = now + spec.timeout.map_or(0, |t| t.as_millis() as u64);
                tracing::info!(
                    step = spec.id.as_str(),
                    assignee = human.assignee.as_str(),
                    deadline,
                    "human task opened"
                );
                self.append(Event::TaskOpened {
                    step,
                    assignee: human.assignee.clone(),
                    prompt: human.prompt.clone(),
                    deadline,
                    at: now,
                })
                .await?;
                self.index_task(step, &human.assignee, deadline, false);
                Ok(true)
            }
            Command::TaskDue { step, escalated } => {
                let spec = &self.spec().steps[step];
                let timeout = spec.timeout.map_or(0, |t| t.as_millis() as u64);
                match self.machine.on_timeout(step) {
                    Some(OnTimeout::Escalate(group)) if !escalated => {
                        let deadline = now + timeout;
                        tracing::warn!(
                            step = spec.id.as_str(),
                            to = group.as_str(),
                            "human task timed out: escalated"
                        );
                        self.append(Event::TaskEscalated {
                            step,
                            to: group.clone(),
                            deadline,
                            at: now,
                        })
                        .await?;
                        self.index_task(step, group, deadline, true);
                    }
                    Some(on_timeout @ (OnTimeout::Approve | OnTimeout::Reject)) => {
                        let approved = matches!(on_timeout, OnTimeout::Approve);
                        match W::timeout_decision(step, approved) {
                            Ok(decision) => {
                                self.append(Event::TaskDecided {
                                    step,
                                    by: crate::human::TIMEOUT_DECIDER.to_owned(),
                                    decision,
                                    at: now,
                                })
                                .await?
                            }
                            Err(_) => self.append(Event::TaskExpired { step, at: now }).await?,
                        }
                        self.unindex_task(step);
                    }
                    _ => {
                        tracing::warn!(
                            step = spec.id.as_str(),
                            "human task expired with no escalation left"
                        );
                        self.append(Event::TaskExpired { step, at: now }).await?;
                        self.unindex_task(step);
                    }
                }
                Ok(true)
            }
            Command::DeadlineDue => {
                tracing::warn!("the run passed its deadline");
                self.append(Event::DeadlinePassed { at: now }).await?;
                Ok(true)
            }
            Command::Compensate { step } => {
                if self.compensating == Some(step) {
                    return Ok(false);
                }
                self.compensating = Some(step);
                self.spawn_compensation(step);
                Ok(false)
            }
            Command::Finish(_) => Ok(false),
        }
    }

    fn is_external(&self, step: usize) -> bool {
        matches!(&self.spec().steps[step].kind, StepKind::Action(a) if a.effect == Effect::External)
    }

    /// Why a step must be skipped before its first attempt: a false condition, or an
    /// absent output its condition needs.
    fn skip_reason(&self, step: usize) -> Option<String> {
        let spec = &self.spec().steps[step];
        let condition = spec.condition.as_deref()?;
        match W::condition(step, &self.input, self.machine.outputs()) {
            Ok(true) => None,
            Ok(false) => Some(format!("condition `{condition}` is false")),
            Err(CallError::Absent(dep)) => {
                Some(format!("condition reads absent `{}`", self.step_id(dep)))
            }
            Err(error) => Some(format!("condition could not be evaluated: {error}")),
        }
    }

    /// The journaled outputs a call of `step` reads: its own and its arguments' steps.
    fn snapshot(&self, step: usize) -> Vec<(usize, Value)> {
        let outputs = self.machine.outputs();
        let mut wanted: Vec<usize> = vec![step];
        if let StepKind::Action(action) = &self.spec().steps[step].kind {
            let calls = std::iter::once(&action.call)
                .chain(action.compensate.iter())
                .chain(action.reconcile.iter());
            for call in calls {
                for arg in &call.args {
                    if let workflow_spec::Arg::Step(dep) = arg {
                        if !wanted.contains(dep) {
                            wanted.push(*dep);
                        }
                    }
                }
            }
        }
        wanted
            .into_iter()
            .filter_map(|index| Some((index, outputs.get(index)?.clone()?)))
            .collect()
    }

    fn context(&self, step: usize, attempt: u32) -> StepContext {
        let spec = &self.spec().steps[step];
        StepContext {
            workflow: W::NAME,
            run_id: self.run,
            step: spec.id.as_str(),
            attempt,
            idempotency_key: StepContext::key_for(W::NAME, self.run, &spec.id),
            deadline: spec.timeout.map(|t| self.now() + t.as_millis() as u64),
            dry_run: self.machine.dry_run(),
            trace_id: self.trace_id.clone(),
        }
    }

    fn spawn_attempt(&mut self, step: usize, attempt: u32, resumed: bool) {
        let env = self.env.clone();
        let input = self.input.clone();
        let ctx = self.context(step, attempt);
        let snapshot = self.snapshot(step);
        let spec = &self.spec().steps[step];
        let timeout = spec.timeout;
        // Before re-running an external effect (a retry, or an attempt a crash interrupted),
        // ask whether it already happened: a timeout after the effect must not repeat it.
        let reconcile = (resumed || attempt > 1)
            && matches!(&spec.kind, StepKind::Action(a) if a.effect == Effect::External && a.reconcile.is_some());
        let log_payloads = self.engine.inner.log_payloads;
        let span = tracing::info_span!("step", step = spec.id.as_str(), attempt);
        self.work.spawn(
            async move {
                let started = tokio::time::Instant::now();
                let call = || Invocation::<W> {
                    env: &env,
                    ctx: &ctx,
                    input: &input,
                    outputs: &snapshot,
                };
                if reconcile {
                    match W::reconcile(step, call()) {
                        Ok(check) => match CatchUnwind(check).await {
                            Ok(Some(output)) => {
                                tracing::info!("reconciled: the effect happened before the crash");
                                return Done::Attempt {
                                    step,
                                    attempt,
                                    result: Ok(output),
                                    elapsed: started.elapsed(),
                                };
                            }
                            Ok(None) => {
                                tracing::info!("reconciled: the effect did not happen; running it")
                            }
                            Err(error) => {
                                return Done::Attempt {
                                    step,
                                    attempt,
                                    result: Err(error),
                                    elapsed: started.elapsed(),
                                };
                            }
                        },
                        Err(error) => tracing::warn!(error = %error, "reconcile unavailable"),
                    }
                }
                let result = match W::action(step, call()) {
                    Ok(action) => {
                        let action = CatchUnwind(action);
                        match timeout {
                            Some(limit) => match tokio::time::timeout(limit, action).await {
                                Ok(result) => result,
                                Err(_) => Err(StepError::timeout(format!(
                                    "the attempt took longer than its timeout of {}",
                                    workflow_spec::format_duration(limit)
                                ))),
                            },
                            None => action.await,
                        }
                    }
                    Err(error) => Err(call_error(error)),
                };
                if log_payloads {
                    tracing::debug!(result = ?result, "attempt finished");
                }
                Done::Attempt {
                    step,
                    attempt,
                    result,
                    elapsed: started.elapsed(),
                }
            }
            .instrument(span),
        );
    }

    fn spawn_compensation(&mut self, step: usize) {
        let env = self.env.clone();
        let input = self.input.clone();
        let ctx = self.context(step, self.machine.attempts()[step]);
        let snapshot = self.snapshot(step);
        let span = tracing::info_span!("compensate", step = self.step_id(step));
        self.work.spawn(
            async move {
                let call = Invocation::<W> {
                    env: &env,
                    ctx: &ctx,
                    input: &input,
                    outputs: &snapshot,
                };
                let result = match W::compensate(step, call) {
                    Ok(undo) => CatchUnwind(undo).await,
                    Err(error) => Err(call_error(error)),
                };
                Done::Compensation { step, result }
            }
            .instrument(span),
        );
    }

    async fn settle(&mut self, done: Done) -> Result<(), StoreError> {
        let now = self.now();
        match done {
            Done::Attempt {
                step,
                attempt,
                result,
                elapsed,
            } => {
                let id = self.step_id(step);
                let (outcome, error_type) = match &result {
                    Ok(_) => ("success", "none"),
                    Err(error) => ("failure", error.kind().as_str()),
                };
                metrics::counter!(
                    "workflow_action_total",
                    "workflow" => W::NAME,
                    "step" => id,
                    "outcome" => outcome,
                    "error_type" => error_type
                )
                .increment(1);
                metrics::histogram!("workflow_step_duration_seconds", "workflow" => W::NAME, "step" => id)
                    .record(elapsed.as_secs_f64());
                match result {
                    Ok(output) => {
                        tracing::info!(step = id, attempt, "step succeeded");
                        self.engine.inner.fault("before_result_append");
                        self.append(Event::StepSucceeded {
                            step,
                            output,
                            at: now,
                        })
                        .await?;
                        self.engine.inner.fault("after_result_append");
                        Ok(())
                    }
                    Err(error) => {
                        tracing::warn!(
                            step = id,
                            attempt,
                            error_type = error.kind().as_str(),
                            error = error.message(),
                            "attempt failed"
                        );
                        self.append(Event::AttemptFailed {
                            step,
                            attempt,
                            kind: error.kind(),
                            message: error.message().to_owned(),
                            retry_after: error.retry_after().map(|d| d.as_millis() as u64),
                            at: now,
                        })
                        .await
                    }
                }
            }
            Done::Compensation { step, result } => {
                self.compensating = None;
                let error = result.err().map(|e| e.to_string());
                match &error {
                    None => tracing::info!(step = self.step_id(step), "compensated"),
                    Some(error) => tracing::error!(
                        step = self.step_id(step),
                        error = error.as_str(),
                        "compensation failed"
                    ),
                }
                self.append(Event::Compensated {
                    step,
                    error,
                    at: now,
                })
                .await
            }
        }
    }

    async fn message(&mut self, msg: Box<Msg>) -> Result<(), StoreError> {
        match *msg {
            Msg::Decide {
                step,
                by,
                decision,
                reply,
            } => {
                let result = self.decide(step, &by, decision).await;
                let _ = reply.send(result);
                Ok(())
            }
            Msg::Cancel { by } => {
                if self.machine.status() == Status::Running {
                    tracing::warn!(by = by.as_str(), "run cancelled");
                    let at = self.now();
                    self.append(Event::Cancelled { by, at }).await?;
                }
                Ok(())
            }
        }
    }

    async fn decide(
        &mut self,
        step: usize,
        by: &str,
        decision: Value,
    ) -> Result<(), DecisionError> {
        let run = self.run;
        let id = self.step_id(step).to_owned();
        let now = self.now();
        match self.machine.states().get(step) {
            Some(StepState::Waiting {
                assignee, deadline, ..
            }) => {
                if now >= *deadline {
                    return Err(DecisionError::Expired { run, step: id });
                }
                if !(self.engine.inner.authorizer)(assignee, by) {
                    tracing::warn!(
                        step = id.as_str(),
                        by,
                        assignee = assignee.as_str(),
                        "unauthorized decision refused"
                    );
                    return Err(DecisionError::Unauthorized {
                        step: id,
                        by: by.to_owned(),
                        assignee: assignee.clone(),
                    });
                }
                let mut decision =
                    W::decision(step, decision).map_err(|error| DecisionError::WrongType {
                        step: id.clone(),
                        message: error.to_string(),
                    })?;
                if let Some(slot) = decision.get_mut("by") {
                    *slot = Value::String(by.to_owned());
                }
                tracing::info!(step = id.as_str(), by, "human task decided");
                self.append(Event::TaskDecided {
                    step,
                    by: by.to_owned(),
                    decision,
                    at: now,
                })
                .await?;
                self.unindex_task(step);
                Ok(())
            }
            Some(StepState::Succeeded) if self.deciders.contains_key(&step) => {
                Err(DecisionError::AlreadyDecided {
                    run,
                    step: id,
                    by: self.deciders[&step].clone(),
                })
            }
            Some(StepState::Failed {
                kind: ErrorKind::Timeout,
                ..
            }) => Err(DecisionError::Expired { run, step: id }),
            _ => Err(DecisionError::UnknownTask { run, step: id }),
        }
    }

    fn index_task(&self, step: usize, assignee: &str, deadline: Timestamp, escalated: bool) {
        let spec = &self.spec().steps[step];
        let prompt = match &spec.kind {
            StepKind::Human(human) => human.prompt.clone(),
            StepKind::Action(_) | StepKind::Child(_) | StepKind::Event(_) => None,
        };
        self.engine.inner.lock_tasks().insert(
            (self.run, step),
            TaskInfo {
                run: self.run,
                workflow: W::NAME.to_owned(),
                step: spec.id.clone(),
                assignee: assignee.to_owned(),
                prompt,
                deadline,
                escalated,
            },
        );
    }

    fn unindex_task(&self, step: usize) {
        self.engine.inner.lock_tasks().remove(&(self.run, step));
    }

    async fn finish(&mut self, status: Status) -> Result<Finished, StoreError> {
        let stop = self.machine.stop().cloned();
        let dead_letter = match (&status, &stop) {
            (Status::Failed, Some(stop)) => {
                let (step, attempts, kind, message) = match stop {
                    Stop::StepFailed {
                        step,
                        attempts,
                        kind,
                        message,
                    } => (
                        self.step_id(*step).to_owned(),
                        *attempts,
                        *kind,
                        message.clone(),
                    ),
                    Stop::Deadline => (
                        String::new(),
                        0,
                        ErrorKind::Timeout,
                        "the run passed its deadline".to_owned(),
                    ),
                    Stop::Cancelled => (
                        String::new(),
                        0,
                        ErrorKind::Internal,
                        "cancelled".to_owned(),
                    ),
                };
                Some(DeadLetter {
                    run: self.run,
                    workflow: W::NAME.to_owned(),
                    step,
                    attempts,
                    kind,
                    message,
                    trace_id: self.trace_id.clone(),
                    at: self.now(),
                })
            }
            _ => None,
        };
        let store_status = match status {
            Status::Completed => RunStatus::Completed,
            Status::Cancelled => RunStatus::Cancelled,
            Status::Failed => RunStatus::Failed,
            Status::Running | Status::Compensating => RunStatus::Running,
        };
        let note = dead_letter.as_ref().map(|d| {
            format!(
                "failed at `{}` after {} attempt(s): {}: {}",
                d.step, d.attempts, d.kind, d.message
            )
        });
        self.engine
            .inner
            .store
            .set_status(
                self.run,
                store_status,
                note.as_deref(),
                dead_letter.as_ref(),
            )
            .await?;
        match &dead_letter {
            Some(letter) => tracing::error!(
                step = letter.step.as_str(),
                error_type = letter.kind.as_str(),
                "run failed; recorded as a dead letter"
            ),
            None => tracing::info!(status = status.as_str(), "run finished"),
        }
        Ok(Finished {
            status,
            outputs: self.machine.outputs().to_vec(),
            stop,
        })
    }
}

fn call_error(error: CallError) -> StepError {
    match error {
        CallError::Step(error) => error,
        other => StepError::validation(other.to_string()),
    }
}

/// Turns a panic inside a user action into a permanent step error instead of losing the run.
struct CatchUnwind<'a, T>(BoxFuture<'a, Result<T, StepError>>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, StepError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                Poll::Ready(Err(StepError::permanent(format!(
                    "the action panicked: {message}"
                ))))
            }
        }
    }
}

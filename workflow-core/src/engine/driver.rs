//! The driver of one run: it asks the machine what to do, journals what the machine
//! decided in one commit per step boundary (a step's result together with the starts it
//! makes ready), and only then runs the attempts and compensations that commit started.
//! It decides nothing itself. Its commits are `commit.rs`'s, the requests it answers
//! `requests.rs`'s, the work it starts `steps.rs`'s and `work.rs`'s.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tracing::Instrument;
use workflow_spec::Spec;

use super::plan::{plan, Launch, Start};
use super::registry::Shared;
use super::{Engine, Finished, Live};
use crate::clock::until;
use crate::engine::workflow::Workflow;
use crate::error::{DecisionError, EventError, RunError, RunId};
use crate::journal::{Event, Timestamp, Value};
use crate::machine::{Command, Machine, Status, StepState};
use crate::store::StoreError;

/// How many turns in a row a driver may take without going through its `select!` (where
/// messages, timers and tokio's cooperative budget are looked at), while its work keeps
/// finishing at the first poll.
const QUICK_TURNS: u32 = 64;

/// A request to a run's driver from the engine's API.
pub(super) enum Msg {
    Decide {
        step: String,
        by: String,
        decision: Value,
        via: Option<String>,
        reply: oneshot::Sender<Result<(), DecisionError>>,
    },
    Cancel {
        by: String,
        reply: oneshot::Sender<Result<(), RunError>>,
    },
    Event {
        step: String,
        event_id: String,
        payload: Value,
        reply: oneshot::Sender<Result<(), EventError>>,
    },
    /// Messages may be waiting in the run's inbox.
    Inbox,
    Delegate {
        step: String,
        by: String,
        to: String,
        reply: oneshot::Sender<Result<(), DecisionError>>,
    },
}

/// How a driver stopped.
enum DriveEnd {
    /// The run finished; waiters were told.
    Finished,
    /// Nothing in flight: the run was unloaded until something wakes it.
    Hibernated,
    /// The journal could not be written, the run was lost to another owner, or the engine
    /// stopped.
    Stopped,
    /// The engine drains: the run's work ended and its lease was released.
    Drained,
}

/// Starts driving a run this engine owns under `token`, from `launch` (its journal
/// replayed, or the plan it was created with); a run whose journal cannot be driven (its
/// inputs no longer decode) is parked.
pub(super) fn launch<W: Workflow>(
    engine: Engine,
    shared: Shared<W>,
    run: RunId,
    token: u64,
    launch: Result<Launch<W>, (RunError, u64)>,
) {
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
    if engine.inner.store.shared() || engine.inner.store.multi_worker() {
        engine.ensure_poller();
    }
    let (trace_id, parent_span) = launch
        .as_ref()
        .map(|launch| (launch.trace_id.clone(), launch.parent_span.clone()))
        .unwrap_or_default();
    let span = tracing::info_span!("run", workflow = W::NAME, run = %run, trace_id = %trace_id);
    // Every launch of the run (after a restart, a takeover, a hibernation) continues the
    // journaled trace.
    crate::trace::continue_in(&span, &trace_id, parent_span.as_deref());
    let live = engine.clone();
    let handle = tokio::spawn(
        async move {
            let end = match launch {
                Ok(launch) => {
                    let driver = Driver::<W>::new(
                        engine.clone(),
                        run,
                        token,
                        shared,
                        launch,
                        mailbox,
                        done_tx,
                    );
                    driver.drive().await
                }
                Err((error, seq)) => {
                    tracing::error!(error = %error, "cannot drive the run; parking it");
                    engine
                        .park(run, token, seq, &format!("parked: {error}"))
                        .await;
                    DriveEnd::Stopped
                }
            };
            if !matches!(end, DriveEnd::Hibernated) {
                engine.forget(run);
            }
        }
        .instrument(span),
    );
    let mut runs = live.inner.lock_live();
    if let Some(entry) = runs.get_mut(&run) {
        entry.abort = Some(handle.abort_handle());
    }
}

/// Drives one run: the only writer of its journal while it owns the run.
pub(super) struct Driver<W: Workflow> {
    pub(super) engine: Engine,
    pub(super) run: RunId,
    pub(super) token: u64,
    pub(super) env: Arc<W::Env>,
    pub(super) input: Arc<W::Input>,
    pub(super) machine: Machine<'static>,
    /// The journal's committed length.
    pub(super) seq: u64,
    /// Events applied to the machine and not yet committed.
    pub(super) pending: Vec<Event>,
    /// Work whose start is in `pending`.
    pub(super) starts: Vec<Start>,
    /// The machine's answers while planning, kept from one plan to the next.
    commands: Vec<Command>,
    pub(super) trace_id: String,
    /// The span the run's spans are children of, when journaled.
    pub(super) parent_span: Option<String>,
    pub(super) work: super::work::Work,
    pub(super) mailbox: mpsc::UnboundedReceiver<Box<Msg>>,
    pub(super) done: watch::Sender<Option<Arc<Finished>>>,
    /// The items of map steps, listed once.
    pub(super) items: super::steps::Items,
    /// Metric handles, by step, shared by the workflow's runs.
    pub(super) metrics: Arc<[super::steps::StepMetrics]>,
    /// `workflow_store_commit_seconds`, registered at the run's first commit.
    pub(super) commit_seconds: Option<metrics::Histogram>,
    /// The run's lease had less than the self-fencing margin left: stop, commit nothing.
    pub(super) self_fenced: bool,
    /// Tells the run's attempts (`StepContext::cancelled`) that it was cancelled or that
    /// this engine drains.
    pub(super) cancel: crate::context::Canceller,
    /// Told when the engine drains.
    drain: watch::Receiver<bool>,
    /// The driver stopped because the engine drains and handed the run over.
    drained: bool,
    /// The run was created just now and its inbox not read yet: its next commit asks
    /// whether messages wait (one round trip instead of two). Any other run reads its
    /// inbox before anything else.
    pub(super) inbox_by_commit: bool,
}

impl<W: Workflow> Driver<W> {
    fn new(
        engine: Engine,
        run: RunId,
        token: u64,
        shared: Shared<W>,
        launch: Launch<W>,
        mailbox: mpsc::UnboundedReceiver<Box<Msg>>,
        done: watch::Sender<Option<Arc<Finished>>>,
    ) -> Self {
        let engine_drain = engine.drain_signal();
        let mut driver = Driver {
            engine,
            run,
            token,
            env: shared.env,
            input: launch.input,
            machine: launch.machine,
            seq: launch.seq,
            pending: Vec::new(),
            starts: Vec::new(),
            commands: Vec::new(),
            trace_id: launch.trace_id,
            parent_span: launch.parent_span,
            work: Default::default(),
            mailbox,
            done,
            items: Default::default(),
            metrics: shared.metrics,
            commit_seconds: None,
            self_fenced: false,
            cancel: crate::context::Cancellation::new().0,
            drain: engine_drain,
            drained: false,
            inbox_by_commit: launch.fresh,
        };
        for (step, assignee, deadline, escalated, _) in driver.machine.open_tasks() {
            driver.index_task(step, assignee, deadline, escalated);
        }
        // Work the run was created with: journaled already, started now.
        for start in launch.starts {
            driver.start(start);
        }
        driver
    }

    pub(super) fn now(&self) -> Timestamp {
        self.engine.inner.clock.now()
    }

    pub(super) fn spec(&self) -> &'static Spec {
        W::spec()
    }

    pub(super) fn step_id(&self, step: usize) -> &'static str {
        self.spec().steps.get(step).map_or("?", |s| s.id.as_str())
    }

    async fn drive(mut self) -> DriveEnd {
        match self.drive_inner().await {
            Ok(Some(finished)) => {
                let _ = self.done.send(Some(Arc::new(finished)));
                DriveEnd::Finished
            }
            Ok(None) => DriveEnd::Hibernated,
            Err(_) if self.drained => DriveEnd::Drained,
            Err(_) if self.self_fenced => {
                metrics::counter!("workflow_self_fenced_total", "workflow" => W::NAME).increment(1);
                tracing::warn!(
                    owner = self.engine.inner.owner.as_str(),
                    token = self.token,
                    "self-fenced: the run's lease was not renewed in time, so its user code was \
                     stopped and nothing more was committed; it is taken up again if this \
                     engine still holds it"
                );
                DriveEnd::Stopped
            }
            Err(StoreError::Rejected { reason }) => {
                let note = format!(
                    "parked: the store refused a write of this run for good ({reason}); \
                     nothing of that write was kept. Fix the cause, then restart or cancel the run"
                );
                tracing::error!(
                    reason = reason.as_str(),
                    "the store refused a write for good; the run is parked"
                );
                metrics::counter!(
                    "workflow_runs_parked_total",
                    "workflow" => W::NAME,
                    "reason" => "store_rejected"
                )
                .increment(1);
                self.engine
                    .park(self.run, self.token, self.seq, &note)
                    .await;
                DriveEnd::Stopped
            }
            Err(StoreError::Fenced { owner, .. }) => {
                metrics::counter!("workflow_fenced_writes_total", "workflow" => W::NAME)
                    .increment(1);
                let now_owner = match self.engine.inner.store.load(self.run).await {
                    Ok(Some(stored)) => stored.record.owner.unwrap_or_else(|| "nobody".into()),
                    _ => "unknown".into(),
                };
                tracing::warn!(
                    refused = owner.as_str(),
                    token = self.token,
                    owner_now = now_owner.as_str(),
                    "a write of {owner} (token {}) was refused: {now_owner} owns the run now; \
                     this engine stopped driving it",
                    self.token
                );
                DriveEnd::Stopped
            }
            Err(error) => {
                tracing::error!(error = %error, "the run stopped: its journal could not be written; it resumes when taken up again");
                DriveEnd::Stopped
            }
        }
    }

    /// Drives the run until it finishes (`Some`) or hibernates (`None`).
    async fn drive_inner(&mut self) -> Result<Option<Finished>, StoreError> {
        if self.engine.inner.log_payloads {
            if let Some(input) = self.machine.input() {
                tracing::debug!(input = %input, "the run's inputs");
            }
        }
        // Messages sent while nobody drove the run come first; a run created just now can
        // have none but those sent since, which its first commit looks for.
        if !self.inbox_by_commit {
            self.take_inbox().await?;
        }
        let mut quick_turns = 0;
        loop {
            if *self.drain.borrow() {
                return self.drain_out().await;
            }
            if let Some(status) = self.step().await? {
                return Ok(Some(self.finished(status)));
            }
            // Work that finished at its first poll (a step that does not wait) is settled
            // and planned at once, without the `select!` below; every `QUICK_TURNS` turns,
            // and whenever a message waits, the run goes through it all the same.
            if quick_turns < QUICK_TURNS && self.mailbox.is_empty() && self.settle_ready()? {
                quick_turns += 1;
                continue;
            }
            quick_turns = 0;
            if self.inbox_by_commit {
                // No commit looked at the inbox yet: read it before waiting.
                self.take_inbox().await?;
                continue;
            }
            let wake = self.machine.next_wake();
            if self.engine.inner.hibernate
                && self.work.is_empty()
                && self.machine.status() == Status::Running
                && self
                    .engine
                    .try_hibernate(self.run, self.token, wake, &self.mailbox, &self.done)
            {
                tracing::debug!("nothing in flight: hibernating until woken");
                return Ok(None);
            }
            // Built every turn but registered with the timer only when polled, i.e. only
            // when there is something to wake for.
            let sleep = tokio::time::sleep(wake.map_or(Duration::ZERO, |at| until(self.now(), at)));
            // Messages first (they are rare, and a cancellation must not wait behind a
            // stream of finishing items), then finished work, then the timer.
            tokio::select! {
                biased;
                Ok(()) = self.drain.changed() => {}
                Some(msg) = self.mailbox.recv() => self.message(*msg).await?,
                Some(done) = self.work.next(), if !self.work.is_empty() => {
                    self.settle(done);
                    self.settle_ready()?;
                }
                () = sleep, if wake.is_some() => {
                    // A decision sent just before a deadline wins over the deadline.
                    if self.engine.inner.store.shared() && self.machine.has_open_tasks() {
                        self.take_inbox().await?;
                    }
                }
                // Nothing can wake the run: the engine is shutting down.
                else => return Err(StoreError::Io("the engine stopped driving this run".into())),
            }
        }
    }

    /// The engine drains: settles and commits what finishes, starts nothing after it, and
    /// hands the run over once no user code of it runs (the engine stops the rest at its
    /// drain's deadline). Ends with an error that `drive` reads as drained.
    async fn drain_out(&mut self) -> Result<Option<Finished>, StoreError> {
        self.drained = true;
        loop {
            self.settle_ready()?;
            if !self.pending.is_empty() {
                self.commit(None).await?;
            }
            if !self.work.runs_user_code() {
                break;
            }
            if let Some(done) = self.work.next().await {
                self.settle(done);
            }
        }
        if self.engine.release(self.run).await {
            self.engine.record_handover(self.run, self.seq);
        }
        Err(StoreError::Io(
            "the engine drains: the run was handed over".into(),
        ))
    }

    /// Settles every piece of work that finished already, without waiting; `true` when
    /// there was any. Fails once a piece of work found the run self-fenced.
    fn settle_ready(&mut self) -> Result<bool, StoreError> {
        let mut settled = false;
        while let Some(done) = self.work.try_next() {
            self.settle(done);
            settled = true;
        }
        if self.self_fenced {
            return Err(self.fenced_self());
        }
        Ok(settled)
    }

    /// Asks the machine until it has nothing more to decide now, commits everything it
    /// decided in one transaction, then starts the work that commit journaled. Returns the
    /// terminal status once the run finished.
    pub(super) async fn step(&mut self) -> Result<Option<Status>, StoreError> {
        // One read of the clock for the turn: the machine's time is the commit's.
        let now = self.now();
        let finish = self.plan(now);
        self.commit_at(finish, now).await?;
        if self.machine.is_cancelling() && !self.cancel.is_cancelled() {
            tracing::info!("the run was cancelled: its attempts in flight are told");
            self.cancel.cancel();
        }
        Ok(finish)
    }

    fn plan(&mut self, now: Timestamp) -> Option<Status> {
        plan::<W>(
            &mut self.machine,
            &self.input,
            now,
            (&mut self.pending, &mut self.starts),
            &mut self.commands,
        )
    }

    /// Applies an event the machine decided or an outcome reported, to be committed with
    /// the next commit.
    pub(super) fn record(&mut self, event: Event) {
        self.machine.apply(&event);
        self.pending.push(event);
    }

    /// Logs a committed event and keeps the index of open tasks in step with it.
    pub(super) fn note(&self, event: &Event) {
        match event {
            Event::StepSucceeded { step, .. } => {
                let attempt = self.machine.attempts().get(*step).copied().unwrap_or(0);
                tracing::info!(step = self.step_id(*step), attempt, "step succeeded");
            }
            Event::TaskOpened {
                step,
                assignee,
                deadline,
                ..
            } => {
                tracing::info!(
                    step = self.step_id(*step),
                    assignee = assignee.as_str(),
                    deadline,
                    "human task opened"
                );
                self.index_task(*step, assignee, *deadline, false);
            }
            Event::TaskEscalated {
                step, to, deadline, ..
            } => {
                tracing::warn!(
                    step = self.step_id(*step),
                    to = to.as_str(),
                    "human task timed out: escalated"
                );
                self.index_task(*step, to, *deadline, true);
            }
            Event::TaskDecided {
                step, by, decision, ..
            } => {
                let step_id = self.step_id(*step);
                if self.engine.inner.log_payloads {
                    tracing::info!(step = step_id, by = by.as_str(), decision = %decision, "human task decided");
                } else {
                    tracing::info!(step = step_id, by = by.as_str(), "human task decided");
                }
                self.unindex_task(*step);
            }
            Event::TaskApproved { step, by, .. } => {
                tracing::info!(
                    step = self.step_id(*step),
                    by = by.as_str(),
                    "human task approved; the quorum is not reached yet"
                );
            }
            Event::TaskDelegated { step, by, to, .. } => {
                tracing::info!(
                    step = self.step_id(*step),
                    by = by.as_str(),
                    to = to.as_str(),
                    "human task delegated"
                );
                if let Some(StepState::Waiting {
                    deadline,
                    escalated,
                    ..
                }) = self.machine.states().get(*step)
                {
                    let (deadline, escalated) = (*deadline, *escalated);
                    self.index_task(*step, to, deadline, escalated);
                }
            }
            Event::TaskExpired { step, .. } => {
                tracing::warn!(
                    step = self.step_id(*step),
                    "human task expired with no escalation left"
                );
                self.unindex_task(*step);
            }
            Event::MessageRefused {
                by, code, reason, ..
            } => {
                tracing::warn!(
                    by = by.as_str(),
                    code = code.as_str(),
                    reason = reason.as_str(),
                    "a message from the run's inbox was refused"
                );
            }
            Event::EffectProposed { step, .. } => {
                tracing::info!(
                    step = self.step_id(*step),
                    "dry run: effect proposed, not executed"
                );
            }
            Event::DeadlinePassed { .. } => tracing::warn!("the run passed its deadline"),
            Event::Cancelled { by, .. } => tracing::warn!(by = by.as_str(), "run cancelled"),
            _ => {}
        }
    }

    fn finished(&self, status: Status) -> Finished {
        Finished {
            status,
            outputs: self.machine.outputs().to_vec(),
            stop: self.machine.stop().cloned(),
        }
    }

    fn index_task(&self, step: usize, assignee: &str, deadline: Timestamp, escalated: bool) {
        self.engine.index_task(
            self.run,
            W::NAME,
            self.spec(),
            step,
            assignee,
            deadline,
            escalated,
        );
    }

    fn unindex_task(&self, step: usize) {
        self.engine.unindex_task(self.run, step);
    }
}

//! Owning runs: registering workflows, creating runs, claiming and resuming them, taking up
//! runs nobody drives, hibernating and waking them, and waiting for them to finish.

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use super::driver::Msg;
use super::plan::Options;
use super::registry::{Registered, Registration};
use super::{Engine, Finished, RunHandle, RunRef, StartOptions, FOREIGN_POLL};
use crate::engine::workflow::Workflow;
use crate::error::{RunError, RunId};
use crate::journal::{Event, Timestamp, Value};
use crate::machine::Machine;
use crate::store::{Claim, Commit, Created, RunStatus, StoreError, StoredRun};

impl Engine {
    /// Registers a workflow with its environment. Its retry policies are validated by the
    /// same code the macro ran at compile time. Several versions of one workflow (types
    /// sharing a `#[workflow(name = "...")]`) may be registered side by side: a run resumes
    /// on the version whose fingerprint it recorded, new runs start on the type named in
    /// `start`.
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
        if let Some(schedule) = W::schedule() {
            crate::schedule::CompiledSchedule::new(schedule.clone()).map_err(|error| {
                RunError::InvalidSpec(format!("schedule of `{}`: {error}", W::NAME))
            })?;
        }
        self.inner.registry.insert(Registration::<W>::new(env));
        if let Some(schedule) = W::schedule() {
            self.declare_schedule(W::NAME, schedule);
        }
        self.ensure_purger();
        Ok(())
    }

    /// Starts a run.
    pub async fn start<W: Workflow>(&self, input: W::Input) -> Result<RunHandle<W>, RunError> {
        self.start_with::<W>(input, StartOptions::default()).await
    }

    /// Starts a run with options. With an idempotency key that was used before, returns
    /// the existing run and starts nothing. An intake-only engine enqueues the run instead
    /// ([`Engine::enqueue`]).
    pub async fn start_with<W: Workflow>(
        &self,
        input: W::Input,
        options: StartOptions,
    ) -> Result<RunHandle<W>, RunError> {
        // A start of a limited workflow (`concurrency`, `priority`, `debounce`) is queued
        // and admitted, so the store decides it with every other start of its key.
        if !self.is_worker() || super::limits::is_gated(W::spec()) {
            return self.enqueue::<W>(input, options).await;
        }
        let registration = self
            .inner
            .registry
            .typed::<W>()
            .ok_or_else(|| RunError::NotRegistered(W::NAME.to_owned()))?;
        let input = serde_json::to_value(&input).map_err(|error| RunError::Decode {
            run: RunId(0),
            step: "<input>".into(),
            message: error.to_string(),
        })?;
        let created = self.create(&*registration, input, &options).await?;
        Ok(RunHandle::new(
            RunRef {
                engine: self.clone(),
                id: created.id(),
            },
            matches!(created, Created::New { .. }),
        ))
    }

    /// A typed handle to an existing run of `W`.
    pub async fn handle<W: Workflow>(&self, run: RunId) -> Result<RunHandle<W>, RunError> {
        let record = self.stored(run).await?.record;
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

    /// Starts a run of a registered workflow by its journaled name, with its inputs as
    /// JSON (they are checked against the workflow's input type): for front ends that do
    /// not know the workflow's Rust type. New runs start on the newest registered version.
    /// Returns the run and whether this start created it (an idempotency key that was used
    /// before names the existing run).
    pub async fn start_json(
        &self,
        workflow: &str,
        input: Value,
        options: StartOptions,
    ) -> Result<(RunId, bool), RunError> {
        let registered = self
            .inner
            .registry
            .any(workflow)
            .ok_or_else(|| RunError::NotRegistered(workflow.to_owned()))?;
        let created = self.create(&*registered, input, &options).await?;
        Ok((created.id(), matches!(created, Created::New { .. })))
    }

    async fn create(
        &self,
        registered: &dyn Registered,
        input: Value,
        options: &StartOptions,
    ) -> Result<Created, RunError> {
        if !self.is_worker() || super::limits::is_gated(registered.spec()) {
            return self
                .enqueue_registered(registered, input, options, None)
                .await;
        }
        let deadline = options.deadline.map(|d| self.now() + d.as_millis() as u64);
        let key = options.idempotency_key.as_deref();
        let created = registered
            .create(
                self,
                input,
                Options {
                    idempotency_key: key,
                    dry_run: options.dry_run,
                    deadline,
                    initiator: options.initiator.as_deref(),
                    parent: None,
                    trace: options.traceparent.clone(),
                },
            )
            .await?;
        if let Created::Existing(id) = created {
            tracing::info!(workflow = registered.name(), run = %id, key = ?key, "start deduplicated by idempotency key");
        }
        Ok(created)
    }

    pub(super) fn next_seed(&self) -> u64 {
        self.inner
            .rng
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_u64()
    }

    /// A run with its journal, or `UnknownRun`.
    pub(super) async fn stored(&self, run: RunId) -> Result<StoredRun, RunError> {
        self.inner
            .store
            .load(run)
            .await?
            .ok_or(RunError::UnknownRun(run))
    }

    /// Resumes every unfinished run of the registered workflows that no live engine
    /// drives, from its journal, and admits queued runs ([`Engine::enqueue`]) of the
    /// versions registered here. Runs whose spec no registration matches are parked
    /// instead (in a store several workers share, queued ones wait for a worker that
    /// registers their version). Returns how
    /// many resumed or were admitted. From then on the engine's background task admits
    /// queued runs as they come. An intake-only engine only records its specs.
    ///
    /// In a store several engine processes share ([`Store::multi_worker`]), this also
    /// starts the engine's background work for good: from then on it renews its leases and
    /// takes over the runs of engines that stopped, even while it drives no run itself.
    ///
    /// [`Store::multi_worker`]: crate::store::Store::multi_worker
    pub async fn resume_all(&self) -> Result<usize, RunError> {
        for registered in self.inner.registry.all() {
            registered.store_spec(self).await?;
        }
        if !self.is_worker() {
            return Ok(0);
        }
        // Runs this engine owns but does not drive (a driver that stopped on an error).
        let mine: Vec<RunId> = self
            .inner
            .store
            .runs(crate::store::RunFilter {
                status: Some(RunStatus::Running),
                ..Default::default()
            })
            .await?
            .into_iter()
            .filter(|r| r.owner.as_deref() == Some(self.inner.owner.as_str()))
            .map(|r| r.id)
            .filter(|run| !self.drives(*run) && !self.is_damaged(*run))
            .collect();
        let names = self.inner.registry.names();
        let sent = self.inner.lease.now_ms();
        let mut leases = self
            .inner
            .store
            .claim(Claim {
                claimant: self.claimant(),
                workflows: &names,
                run: None,
                reclaim_own: false,
                limit: None,
                // Among many workers, queued runs are the admission point's (below), and
                // wait for a worker that registers their version. A store one engine
                // drives has no other worker: every run is taken, and one of a version
                // not registered here is parked.
                claimable: if self.inner.store.multi_worker() {
                    crate::store::Claimable::Begun
                } else {
                    crate::store::Claimable::Any
                },
                versions: None,
            })
            .await?;
        for lease in &leases {
            self.inner.lease.claimed(lease.run, sent);
        }
        for run in mine {
            leases.extend(self.claim_one(run).await?);
        }
        // Every journal is read before any run is launched, so that the reads do not
        // queue behind the work of the runs already resumed.
        let mut ready = Vec::with_capacity(leases.len());
        for lease in leases {
            match self.prepare_resume(lease.run, lease.token).await {
                Ok(Some(launch)) => ready.push(launch),
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(run = %lease.run, error = %error, "cannot resume the run");
                    return Err(error);
                }
            }
        }
        let resumed = ready.len();
        for launch in ready {
            launch.go(self);
        }
        let admitted = self.admit_queued().await;
        // From now on the engine's background task admits queued runs (and, in shared
        // stores, takes over lapsed ones).
        self.ensure_poller();
        Ok(resumed + admitted)
    }

    /// Whether this engine drives the run (live or hibernating).
    pub(super) fn drives(&self, run: RunId) -> bool {
        self.inner.lock_live().contains_key(&run)
            || self.inner.lock_hibernating().contains_key(&run)
    }

    async fn claim_one(&self, run: RunId) -> Result<Option<crate::store::Lease>, StoreError> {
        let names = self.inner.registry.names();
        let sent = self.inner.lease.now_ms();
        let leases = self
            .inner
            .store
            .claim(Claim {
                claimant: self.claimant(),
                workflows: &names,
                run: Some(run),
                reclaim_own: true,
                limit: Some(1),
                claimable: crate::store::Claimable::Any,
                versions: None,
            })
            .await?;
        for lease in &leases {
            self.inner.lease.claimed(lease.run, sent);
        }
        Ok(leases.into_iter().next())
    }

    /// Launches a run this engine just claimed, on the registration of the version it
    /// started on; parks it when no registration matches. Returns whether it launched.
    pub(super) async fn resume_claimed(&self, run: RunId, token: u64) -> Result<bool, RunError> {
        let launch = self.prepare_resume(run, token).await?;
        Ok(launch.map(|launch| launch.go(self)).is_some())
    }

    /// Reads a claimed run's journal and finds its registration; a damaged run is listed
    /// as damaged and a run whose version is not registered is parked (both `None`).
    async fn prepare_resume(&self, run: RunId, token: u64) -> Result<Option<Resume>, RunError> {
        let stored = match self.stored(run).await {
            Ok(stored) => stored,
            Err(RunError::Store(error)) if is_damage(&error) => {
                self.set_damaged(run, error).await;
                return Ok(None);
            }
            Err(error) => return Err(error),
        };
        let record = &stored.record;
        let Some(registered) = self
            .inner
            .registry
            .version(&record.workflow, &record.fingerprint)
        else {
            let current = self
                .inner
                .registry
                .fingerprints(&record.workflow)
                .join(", ");
            let note = format!(
                "parked: started under spec {} but `{}` is now registered as {current}; cancel it or restart it",
                record.fingerprint, record.workflow
            );
            tracing::warn!(run = %run, "{note}");
            self.park(run, token, stored.events.len() as u64, &note)
                .await;
            return Ok(None);
        };
        Ok(Some(Resume {
            registered,
            run,
            token,
            events: stored.events,
        }))
    }

    /// Never drives a run whose stored history fails verification: it is listed as
    /// damaged (not failed, not dead-lettered). In a store one engine drives, its claim is
    /// given up. In a store several workers share, the engine keeps the claim (its
    /// heartbeats renew it and it does not take the run up again): a released run would
    /// be claimed at once by the next worker, found damaged and released again, round
    /// and round. The worker that found the damage holds the run until it stops.
    pub(super) async fn set_damaged(&self, run: RunId, error: StoreError) {
        tracing::error!(run = %run, error = %error, "the run's stored history is damaged; it is not driven (see `workflow check`)");
        self.inner
            .damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run, error);
        if self.inner.store.multi_worker() {
            return;
        }
        if let Err(error) = self
            .inner
            .store
            .release(&self.inner.owner, Some(&[run]))
            .await
        {
            tracing::warn!(run = %run, error = %error, "cannot give up the claim of a damaged run");
        }
    }

    /// Whether this engine found the run's stored history damaged.
    pub(super) fn is_damaged(&self, run: RunId) -> bool {
        self.inner
            .damaged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&run)
    }

    /// The runs this engine refused to drive because their stored history is damaged,
    /// with what was found.
    pub fn damaged(&self) -> Vec<(RunId, StoreError)> {
        let damaged = self.inner.damaged.lock().unwrap_or_else(|p| p.into_inner());
        damaged.iter().map(|(run, e)| (*run, e.clone())).collect()
    }

    /// Takes up a running run that no live engine drives (its owner died, it was retried or
    /// restarted by an operator), when its workflow is registered here. Returns whether
    /// this engine drives it now.
    pub(super) async fn take_up(&self, run: RunId) -> Result<bool, RunError> {
        if !self.is_worker() {
            return Ok(false);
        }
        let _one_claimer = self.inner.claiming.lock().await;
        if self.drives(run) {
            return Ok(true);
        }
        let record = self.stored(run).await?.record;
        if record.status != RunStatus::Running
            || self.inner.registry.any(&record.workflow).is_none()
        {
            return Ok(false);
        }
        match self.claim_one(run).await? {
            Some(lease) => self.resume_claimed(run, lease.token).await,
            None => Ok(false),
        }
    }

    /// Marks a run this engine owns as parked, with a note saying why.
    pub(super) async fn park(&self, run: RunId, token: u64, seq: u64, note: &str) {
        let parked = self
            .inner
            .store
            .commit(Commit {
                fence: Some(crate::store::Fence {
                    owner: &self.inner.owner,
                    token,
                }),
                status: Some((RunStatus::Parked, Some(note))),
                ..Commit::events(run, seq, &[], self.now())
            })
            .await;
        if let Err(error) = parked {
            tracing::error!(run = %run, error = %error, "cannot park the run");
        }
    }

    /// Called by a driver with nothing in flight: unloads the run unless a message or a
    /// waiter is pending. Decided under the live-runs lock, which senders also hold.
    pub(super) fn try_hibernate(
        &self,
        run: RunId,
        token: u64,
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
            self.inner.lock_hibernating().insert(run, token);
        }
        if let Some(at) = wake {
            self.inner.lock_wakeups().insert((at, run));
        }
        self.ensure_poller();
        self.inner.wake_notify.notify_one();
        true
    }

    /// Reloads a hibernating run from its journal and drives it again. `false` when the
    /// run neither hibernates nor is driven here.
    pub(super) async fn wake(&self, run: RunId) -> Result<bool, RunError> {
        let _one_at_a_time = self.inner.wake_lock.lock().await;
        if self.inner.lock_live().contains_key(&run) {
            return Ok(true);
        }
        let Some(token) = self.inner.lock_hibernating().remove(&run) else {
            return Ok(false);
        };
        let loaded = async {
            let stored = self.stored(run).await?;
            let record = &stored.record;
            let registered = self
                .inner
                .registry
                .version(&record.workflow, &record.fingerprint)
                .ok_or_else(|| RunError::NotRegistered(record.workflow.clone()))?;
            Ok::<_, RunError>((registered, stored.events))
        }
        .await;
        match loaded {
            Ok((registered, events)) => {
                registered.launch(self.clone(), run, token, events);
                Ok(true)
            }
            Err(RunError::Store(error)) if is_damage(&error) => {
                self.set_damaged(run, error).await;
                Ok(false)
            }
            Err(error) => {
                self.inner.lock_hibernating().insert(run, token);
                Err(error)
            }
        }
    }

    /// Sends a message to a run's driver, waking the run if it hibernates. The send
    /// happens under the lock a driver takes to hibernate, so no message is ever left in
    /// the mailbox of a run that went to sleep. `false` when the run is not driven here.
    pub(super) async fn send(
        &self,
        run: RunId,
        message: impl Fn() -> Box<Msg>,
    ) -> Result<bool, RunError> {
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

    /// Forgets a run whose driver stopped for good.
    pub(super) fn forget(&self, run: RunId) {
        self.inner.lease.forget(run);
        self.inner.lock_live().remove(&run);
        self.inner.lock_tasks().retain(|(r, _), _| *r != run);
        if self.inner.max_live_runs.is_some() || self.inner.registry.any_gated() {
            // Room for a queued run, or a key's slot freed for a gated one.
            self.inner.wake_notify.notify_one();
        }
    }

    /// Waits for a run to finish. A run this engine can drive and nobody else does is taken
    /// up; a run another live engine drives is watched in the store until it finishes.
    pub(super) async fn wait(&self, run: RunId) -> Result<Arc<Finished>, RunError> {
        loop {
            // Made before the run is looked at, so an admission in between is not missed.
            let admitted = self.inner.admitted.notified();
            tokio::pin!(admitted);
            admitted.as_mut().enable();
            let done = self
                .inner
                .lock_live()
                .get(&run)
                .map(|live| live.done.clone());
            if let Some(mut done) = done {
                loop {
                    if let Some(finished) = done.borrow_and_update().clone() {
                        return Ok(finished);
                    }
                    if done.changed().await.is_err() {
                        break;
                    }
                }
                // The driver stopped: it finished, or lost the run; look again.
                if let Some(finished) = done.borrow().clone() {
                    return Ok(finished);
                }
            }
            // A hibernating run is woken; holding its receiver keeps it awake.
            if self.wake(run).await? {
                continue;
            }
            let stored = self.stored(run).await?;
            let record = &stored.record;
            if let Some(spec) = self.spec_of(record).await? {
                if let Some(finished) = replayed_finish(&spec, &stored.events) {
                    return Ok(Arc::new(finished));
                }
            }
            match record.status {
                RunStatus::Parked => {
                    return Err(RunError::SpecChanged {
                        run,
                        workflow: record.workflow.clone(),
                        recorded: record.fingerprint.clone(),
                        current: self
                            .inner
                            .registry
                            .fingerprints(&record.workflow)
                            .join(", "),
                    })
                }
                RunStatus::Cancelled => return Err(RunError::Cancelled(run)),
                RunStatus::Running if self.take_up(run).await? => continue,
                RunStatus::Running
                    if record.owner.is_some()
                        || !self.is_worker()
                        || self.waits_for_admission(run).await? =>
                {
                    // Another engine drives it (or, queued, will): watch the store; an
                    // admission by this engine ends the wait at once.
                    tokio::select! {
                        () = tokio::time::sleep(FOREIGN_POLL) => {}
                        () = admitted => {}
                    }
                }
                // Read while it was queued, admitted since (by this engine or another):
                // look again.
                RunStatus::Running if self.stored(run).await?.record.owner.is_some() => {}
                RunStatus::Running => return Err(RunError::NotRegistered(record.workflow.clone())),
                RunStatus::Completed | RunStatus::Failed => {
                    return Err(RunError::EngineStopped(run))
                }
            }
        }
    }

    /// The spec a run was started under: its registration's, or the one recorded in the
    /// store.
    pub(super) async fn spec_of(
        &self,
        record: &crate::store::RunRecord,
    ) -> Result<Option<Arc<workflow_spec::Spec>>, StoreError> {
        if let Some(registered) = self
            .inner
            .registry
            .version(&record.workflow, &record.fingerprint)
        {
            return Ok(Some(Arc::new(registered.spec().clone())));
        }
        crate::admin::stored_spec(&*self.inner.store, &record.fingerprint)
            .await
            .map(|spec| spec.map(Arc::new))
    }
}

/// Whether a run's journal says it finished, and how: for waiters of runs not driven here.
fn replayed_finish(spec: &workflow_spec::Spec, events: &[Event]) -> Option<Finished> {
    let machine = Machine::replay(spec, events);
    machine.status().is_terminal().then(|| Finished {
        status: machine.status(),
        outputs: machine.outputs().to_vec(),
        stop: machine.stop().cloned(),
    })
}

/// Whether a store error says stored data is damaged.
pub(super) fn is_damage(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::Corrupt { .. } | StoreError::CorruptRow { .. } | StoreError::BadRow { .. }
    )
}

/// A claimed run whose journal is read, ready to be driven.
struct Resume {
    registered: Arc<dyn Registered>,
    run: RunId,
    token: u64,
    events: Vec<Event>,
}

impl Resume {
    fn go(self, engine: &Engine) {
        tracing::info!(run = %self.run, events = self.events.len(), "resuming run from its journal");
        self.registered
            .launch(engine.clone(), self.run, self.token, self.events);
    }
}

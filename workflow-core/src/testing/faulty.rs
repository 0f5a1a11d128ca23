//! A store that fails on demand: for testing what the engine and the admin operations do
//! when a write does not land (a full disk, a lost connection, a crash in the middle of an
//! operation): every write either lands whole or not at all, and nothing is half done.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::RunId;
use crate::future::BoxFuture;
use crate::journal::Timestamp;
use crate::store::{
    Claim, Claimant, Commit, Created, DeadLetter, InboxItem, Lease, Message, NewRun, RunFilter,
    RunRecord, SpecRecord, Store, StoreError, StoredRun, Submitted,
};

/// The writes a [`FaultyStore`] can refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// [`Store::create_run`] and [`Store::create_runs`].
    Create,
    /// [`Store::commit`].
    Commit,
    /// [`Store::submit`].
    Submit,
    /// [`Store::purge`].
    Purge,
    /// [`Store::runs`] (a read, refused as a store that is down refuses it).
    ListRuns,
}

/// Wraps a store and refuses the next writes of a kind with a given error, writing
/// nothing, as a store whose disk is full or whose connection dropped would.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::sync::Arc;
/// use workflow_core::store::{MemoryStore, StoreError};
/// use workflow_core::testing::{FaultyStore, Write};
///
/// let store = FaultyStore::new(Arc::new(MemoryStore::new()));
/// store.fail_next(Write::Commit, 1, StoreError::Io("disk full".into()));
/// assert_eq!(store.failures(), 0);
/// # }
/// ```
#[derive(Clone)]
pub struct FaultyStore {
    inner: Arc<dyn Store>,
    faults: Arc<Mutex<Vec<(Write, usize, StoreError)>>>,
    failures: Arc<AtomicU64>,
    renew_delay: Arc<Mutex<Option<Duration>>>,
}

impl std::fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyStore")
            .field("failures", &self.failures())
            .finish_non_exhaustive()
    }
}

impl FaultyStore {
    /// A store that passes everything to `inner` until told to fail.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        FaultyStore {
            inner,
            faults: Arc::new(Mutex::new(Vec::new())),
            failures: Arc::new(AtomicU64::new(0)),
            renew_delay: Arc::new(Mutex::new(None)),
        }
    }

    /// Refuses the next `times` writes of kind `write` with `error`.
    pub fn fail_next(&self, write: Write, times: usize, error: StoreError) {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((write, times, error));
    }

    /// Refuses writes of kind `write` with `error` until [`FaultyStore::heal`].
    pub fn fail_always(&self, write: Write, error: StoreError) {
        self.fail_next(write, usize::MAX, error);
    }

    /// Stops refusing anything.
    pub fn heal(&self) {
        self.faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Answers every lease renewal `delay` late, with the leases as they stood when it was
    /// asked, as a renewal over a slow connection does; and says the store is shared by
    /// several workers, so that engines renew their leases on it.
    pub fn slow_renewals(&self, delay: Duration) {
        *self.renew_delay.lock().unwrap_or_else(|p| p.into_inner()) = Some(delay);
    }

    /// How many writes were refused so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The error to refuse a write of kind `write` with, if one is armed.
    fn fault(&self, write: Write) -> Option<StoreError> {
        let mut faults = self.faults.lock().unwrap_or_else(|p| p.into_inner());
        let index = faults.iter().position(|(w, n, _)| *w == write && *n > 0)?;
        let (_, times, error) = &mut faults[index];
        *times = times.saturating_sub(1);
        let error = error.clone();
        faults.retain(|(_, n, _)| *n > 0);
        self.failures.fetch_add(1, Ordering::Relaxed);
        Some(error)
    }
}

fn refused<'a, T: Send + 'a>(error: StoreError) -> BoxFuture<'a, Result<T, StoreError>> {
    Box::pin(std::future::ready(Err(error)))
}

impl Store for FaultyStore {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        match self.fault(Write::Create) {
            Some(error) => refused(error),
            None => self.inner.create_run(run),
        }
    }

    fn create_runs<'a>(
        &'a self,
        runs: &'a [NewRun<'a>],
    ) -> BoxFuture<'a, Result<Vec<Created>, StoreError>> {
        match self.fault(Write::Create) {
            Some(error) => refused(error),
            None => self.inner.create_runs(runs),
        }
    }

    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        match self.fault(Write::Commit) {
            Some(error) => refused(error),
            None => self.inner.commit(commit),
        }
    }

    fn create_gated<'a>(
        &'a self,
        run: NewRun<'a>,
        gate: crate::store::limits::Gate<'a>,
    ) -> BoxFuture<'a, Result<Created, StoreError>> {
        match self.fault(Write::Create) {
            Some(error) => refused(error),
            None => self.inner.create_gated(run, gate),
        }
    }

    fn admit<'a>(
        &'a self,
        admit: crate::store::limits::Admit<'a>,
    ) -> BoxFuture<'a, Result<crate::store::limits::Admission, StoreError>> {
        self.inner.admit(admit)
    }

    fn acquire_slot<'a>(
        &'a self,
        request: crate::store::limits::SlotRequest<'a>,
    ) -> BoxFuture<'a, Result<crate::store::limits::Acquired, StoreError>> {
        self.inner.acquire_slot(request)
    }

    fn release_slot<'a>(
        &'a self,
        run: RunId,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.release_slot(run, holder)
    }

    fn flow_of(
        &self,
        run: RunId,
    ) -> BoxFuture<'_, Result<crate::store::limits::RunFlow, StoreError>> {
        self.inner.flow_of(run)
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        self.inner.load(run)
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        if let Some(error) = self.fault(Write::ListRuns) {
            return Box::pin(std::future::ready(Err(error)));
        }
        self.inner.runs(filter)
    }

    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        self.inner.claim(claim)
    }

    fn renew<'a>(
        &'a self,
        claimant: Claimant<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        let delay = *self.renew_delay.lock().unwrap_or_else(|p| p.into_inner());
        Box::pin(async move {
            let held = self.inner.renew(claimant).await?;
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            Ok(held)
        })
    }

    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.release(owner, runs)
    }

    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>> {
        match self.fault(Write::Submit) {
            Some(error) => refused(error),
            None => self.inner.submit(run, message, key, at),
        }
    }

    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>> {
        self.inner.inbox(run, after)
    }

    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>> {
        self.inner.pending_inbox(after)
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        self.inner.dead_letters()
    }

    fn open_tasks(
        &self,
        filter: crate::store::TaskFilter,
    ) -> BoxFuture<'_, Result<Vec<crate::store::OpenTask>, StoreError>> {
        self.inner.open_tasks(filter)
    }

    fn task_counts(&self) -> BoxFuture<'_, Result<Vec<crate::store::TaskCount>, StoreError>> {
        self.inner.task_counts()
    }

    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_spec::Schedule,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<crate::store::ScheduleRow, StoreError>> {
        self.inner.put_schedule(id, workflow, schedule, at)
    }

    fn schedules(&self) -> BoxFuture<'_, Result<Vec<crate::store::ScheduleRow>, StoreError>> {
        self.inner.schedules()
    }

    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: crate::store::ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.inner.update_schedule(id, version, change)
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.inner.delete_schedule(id)
    }

    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<crate::store::MissedTicks>, StoreError>> {
        self.inner.missed_ticks(id, limit)
    }

    fn purge(
        &self,
        filter: crate::store::PurgeFilter,
    ) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        match self.fault(Write::Purge) {
            Some(error) => refused(error),
            None => self.inner.purge(filter),
        }
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.put_spec(fingerprint, workflow, spec_json, at)
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.inner.spec(fingerprint)
    }

    fn specs<'a>(
        &'a self,
        workflow: &'a str,
    ) -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>> {
        self.inner.specs(workflow)
    }

    fn shared(&self) -> bool {
        self.inner.shared()
    }

    fn multi_worker(&self) -> bool {
        self.inner.multi_worker()
            || self
                .renew_delay
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some()
    }

    fn clock_offset_ms(&self) -> i64 {
        self.inner.clock_offset_ms()
    }
}

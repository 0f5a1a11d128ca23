//! An in-memory store: for tests, and for workflows that need no durability.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};

use super::limits::RateBucket;
use super::tasks::{self, OpenTask, TaskCount, TaskFilter};
use super::{
    Claim, Claimant, Commit, Created, DeadLetter, DeadLetterChange, Heartbeat, InboxItem, Lease,
    Message, MissedTicks, NewRun, PurgeFilter, RunFilter, RunRecord, ScheduleChange, ScheduleRow,
    ScheduleState, SpecRecord, Store, StoreError, StoredRun, Submitted, Verification, WorkerRow,
};
use crate::error::RunId;
use crate::future::BoxFuture;
use crate::journal::Timestamp;

#[path = "memory_limits.rs"]
mod limits;
#[path = "memory_run.rs"]
mod run;
#[path = "memory_workers.rs"]
mod workers;

use self::run::Run;

/// Keeps everything in memory; lost when the process ends.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
    /// Bumped when a run anyone may claim is created (a queued start), so that the other
    /// engines over this store admit it at once.
    claimable: tokio::sync::watch::Sender<u64>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            inner: Mutex::default(),
            claimable: tokio::sync::watch::channel(0).0,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    runs: BTreeMap<RunId, Run>,
    keys: HashMap<(String, String), RunId>,
    dead: BTreeMap<RunId, DeadLetter>,
    specs: Vec<SpecRecord>,
    schedules: BTreeMap<String, ScheduleRow>,
    /// Missed-tick records per schedule, oldest first.
    missed: HashMap<String, Vec<MissedTicks>>,
    inbox: Vec<InboxItem>,
    inbox_keys: HashMap<(RunId, String), u64>,
    /// The open-task index: the open tasks of each running run, by step.
    tasks: BTreeMap<RunId, BTreeMap<usize, tasks::Row>>,
    /// Each run's search values.
    search: HashMap<RunId, Vec<(String, String)>>,
    appends: u64,
    commits: u64,
    /// Journal entries marked damaged by [`MemoryStore::damage_entry`].
    damaged: BTreeSet<(RunId, u64)>,
    /// Gates, slots, buckets and waits.
    flow: limits::Flow,
    /// Worker rows, by name.
    workers: BTreeMap<String, WorkerRow>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated: every method
        // does its checks before its first write.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// How many journal entries were written (run creations included).
    pub fn journal_writes(&self) -> u64 {
        self.lock().appends
    }

    /// How many atomic writes (creations and commits) changed the journal.
    pub fn commits(&self) -> u64 {
        self.lock().commits
    }

    /// Marks journal entry `seq` of `run` damaged, as a bad disk would leave it in a
    /// durable store (this store keeps values, not bytes, so it has nothing to flip):
    /// loading the run then fails with [`StoreError::Corrupt`] and [`Store::verify`]
    /// reports the entry. For the conformance suite's damage checks (feature `test-util`).
    #[cfg(feature = "test-util")]
    pub fn damage_entry(&self, run: RunId, seq: u64) {
        self.lock().damaged.insert((run, seq));
    }
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Inner {
    fn commit(&mut self, commit: &Commit<'_>) -> Result<(), StoreError> {
        let Some(run) = self.runs.get_mut(&commit.run) else {
            return Err(StoreError::UnknownRun(commit.run));
        };
        if let Some(fence) = commit.fence {
            let record = &run.stored.record;
            if record.owner.as_deref() != Some(fence.owner) || run.token != fence.token {
                return Err(StoreError::Fenced {
                    run: commit.run,
                    owner: fence.owner.to_owned(),
                });
            }
        }
        if run.stored.events.len() as u64 != commit.seq {
            return Err(StoreError::Conflict {
                run: commit.run,
                seq: commit.seq,
            });
        }
        let before = run.stored.record.status;
        run.stored.events.extend_from_slice(commit.events);
        if let Some(cursor) = commit.inbox_cursor {
            run.inbox_cursor = run.inbox_cursor.max(cursor);
        }
        if let Some((status, note)) = commit.status {
            let record = &mut run.stored.record;
            record.status = status;
            record.note = note.map(str::to_owned);
            record.updated_at = commit.at;
            if !status.is_driven() {
                record.owner = None;
            }
        }
        match commit.dead_letter {
            DeadLetterChange::Keep => {}
            DeadLetterChange::Put(letter) => {
                self.dead.insert(commit.run, letter.clone());
            }
            DeadLetterChange::Remove => {
                self.dead.remove(&commit.run);
            }
        }
        let status = commit.status.map(|(s, _)| s);
        // Closing rows of a run that has none (a step's commit, mostly) changes nothing.
        let changes_rows =
            self.tasks.contains_key(&commit.run) || tasks::opens(commit.events, status, before);
        let changes = match changes_rows {
            true => tasks::changes(commit.events, status, before),
            false => Vec::new(),
        };
        if !changes.is_empty() {
            let journal = std::mem::take(&mut run.stored.events);
            self.index(commit.run, &changes, &journal);
            if let Some(run) = self.runs.get_mut(&commit.run) {
                run.stored.events = journal;
            }
        }
        if !commit.events.is_empty() {
            self.appends += commit.events.len() as u64;
            self.commits += 1;
        }
        Ok(())
    }

    /// Applies index changes to `run`'s rows (its whole journal at hand for a rebuild).
    fn index(
        &mut self,
        run: RunId,
        changes: &[tasks::TaskChange],
        journal: &[crate::journal::Event],
    ) {
        let rows = self.tasks.entry(run).or_default();
        tasks::apply(rows, changes, journal);
        if rows.is_empty() {
            self.tasks.remove(&run);
        }
    }

    fn open_tasks(&self) -> impl Iterator<Item = OpenTask> + '_ {
        self.tasks.iter().flat_map(move |(run, rows)| {
            let workflow = self
                .runs
                .get(run)
                .map_or("", |r| r.stored.record.workflow.as_str());
            rows.values()
                .map(move |row| row.clone().task(*run, workflow))
        })
    }

    /// Whether `run` has every search value of `wanted`.
    fn has_search(&self, run: RunId, wanted: &[(String, String)]) -> bool {
        let values = self.search.get(&run).map_or(&[][..], Vec::as_slice);
        wanted.iter().all(|pair| values.contains(pair))
    }

    /// The finished runs `filter` takes, lowest id first.
    fn purgeable(&self, filter: &PurgeFilter) -> Vec<RunId> {
        self.runs
            .values()
            .map(|run| &run.stored.record)
            .filter(|r| filter.after.is_none_or(|after| r.id > after))
            .filter(|r| r.status.is_finished() && r.updated_at < filter.before)
            .filter(|r| filter.workflow.as_ref().is_none_or(|w| *w == r.workflow))
            .filter(|r| !filter.except.contains(&r.workflow))
            .filter(|r| {
                r.parent.is_none_or(|parent| {
                    self.runs
                        .get(&parent)
                        .is_none_or(|p| p.stored.record.status.is_finished())
                })
            })
            .take(filter.limit.max(1))
            .map(|r| r.id)
            .collect()
    }

    /// Removes a run and every row that belongs to it. Every kind of per-run row is
    /// deleted here, and only here.
    fn delete_run(&mut self, run: RunId) {
        if let Some(removed) = self.runs.remove(&run) {
            if let Some(key) = removed.stored.record.idempotency_key {
                self.keys.remove(&(removed.stored.record.workflow, key));
            }
        }
        self.dead.remove(&run);
        self.inbox.retain(|item| item.run != run);
        self.inbox_keys.retain(|(owner, _), _| *owner != run);
        self.search.remove(&run);
        self.tasks.remove(&run);
        self.damaged.retain(|(owner, _)| *owner != run);
        self.flow.forget(run);
    }

    fn submit(
        &mut self,
        run: RunId,
        message: &Message,
        key: Option<&str>,
        at: Timestamp,
    ) -> Result<Submitted, StoreError> {
        let Some(target) = self.runs.get(&run) else {
            return Err(StoreError::UnknownRun(run));
        };
        if let Some(id) = key.and_then(|key| self.inbox_keys.get(&(run, key.to_owned()))) {
            return Ok(Submitted::Duplicate(*id));
        }
        if target.stored.record.status.is_finished() {
            return Err(StoreError::Finished(run));
        }
        let id = self.inbox.last().map_or(1, |item| item.id + 1);
        if let Some(key) = key {
            self.inbox_keys.insert((run, key.to_owned()), id);
        }
        self.inbox.push(InboxItem {
            id,
            run,
            message: message.clone(),
            at,
        });
        Ok(Submitted::New(id))
    }
}

impl Store for MemoryStore {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        ready(
            self.create_batch(std::slice::from_ref(&run))
                .map(|mut c| c.remove(0)),
        )
    }

    fn create_runs<'a>(
        &'a self,
        runs: &'a [NewRun<'a>],
    ) -> BoxFuture<'a, Result<Vec<Created>, StoreError>> {
        ready(self.create_batch(runs))
    }

    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut inner = self.lock();
        let done = inner.commit(&commit);
        // A gated run that finished frees its key's slot: other engines admit at once.
        let freed = done.is_ok()
            && commit
                .status
                .is_some_and(|(status, _)| status.is_finished())
            && inner.flow.has_gate(commit.run);
        drop(inner);
        if freed {
            self.wake();
        }
        ready(done)
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        let inner = self.lock();
        if let Some((_, seq)) = inner.damaged.range((run, 0)..=(run, u64::MAX)).next() {
            return ready(Err(StoreError::Corrupt { run, seq: *seq }));
        }
        ready(Ok(inner.runs.get(&run).map(|run| run.stored.clone())))
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        let inner = self.lock();
        let records = inner
            .runs
            .values()
            .rev()
            .map(|run| &run.stored.record)
            .filter(|r| filter.workflow.as_ref().is_none_or(|w| *w == r.workflow))
            .filter(|r| filter.status.is_none_or(|s| s == r.status))
            .filter(|r| filter.before.is_none_or(|before| r.id < before))
            .filter(|r| inner.has_search(r.id, &filter.search))
            .take(filter.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect();
        ready(Ok(records))
    }

    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        let mut inner = self.lock();
        let Inner { runs, flow, .. } = &mut *inner;
        let leases = runs
            .values_mut()
            .filter(|run| run.claimable(&claim) && !flow.gated(run.stored.record.id))
            .take(claim.limit.unwrap_or(usize::MAX))
            .map(|run| run.take(claim.claimant))
            .collect();
        ready(Ok(leases))
    }

    fn renew<'a>(
        &'a self,
        claimant: Claimant<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        ready(Ok(self.lock().renew(claimant)))
    }

    fn heartbeat<'a>(
        &'a self,
        beat: Heartbeat<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        ready(Ok(self.lock().heartbeat(beat)))
    }

    fn workers(&self) -> BoxFuture<'_, Result<Vec<WorkerRow>, StoreError>> {
        ready(Ok(self.lock().workers.values().cloned().collect()))
    }

    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock().release(owner, runs);
        ready(Ok(()))
    }

    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>> {
        ready(self.lock().submit(run, message, key, at))
    }

    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>> {
        let inner = self.lock();
        if !inner.runs.contains_key(&run) {
            return ready(Err(StoreError::UnknownRun(run)));
        }
        let items = inner
            .inbox
            .iter()
            .filter(|item| item.run == run && item.id > after)
            .cloned()
            .collect();
        ready(Ok(items))
    }

    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>> {
        let inner = self.lock();
        let mut runs: Vec<RunId> = inner
            .inbox
            .iter()
            .filter(|item| item.id > after)
            .filter(|item| {
                inner.runs.get(&item.run).is_some_and(|run| {
                    item.id > run.inbox_cursor && !run.stored.record.status.is_finished()
                })
            })
            .map(|item| item.run)
            .collect();
        runs.sort_unstable();
        runs.dedup();
        let last = inner.inbox.last().map_or(after, |item| item.id.max(after));
        ready(Ok((runs, last)))
    }

    fn open_tasks(&self, filter: TaskFilter) -> BoxFuture<'_, Result<Vec<OpenTask>, StoreError>> {
        ready(Ok(filter.page(self.lock().open_tasks())))
    }

    fn task_counts(&self) -> BoxFuture<'_, Result<Vec<TaskCount>, StoreError>> {
        ready(Ok(tasks::count(self.lock().open_tasks())))
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        ready(Ok(self.lock().dead.values().rev().cloned().collect()))
    }

    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_spec::Schedule,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<ScheduleRow, StoreError>> {
        let mut inner = self.lock();
        let row = inner
            .schedules
            .entry(id.to_owned())
            .and_modify(|row| {
                row.workflow = workflow.to_owned();
                row.schedule = schedule.clone();
                row.version += 1;
            })
            .or_insert_with(|| ScheduleRow {
                id: id.to_owned(),
                workflow: workflow.to_owned(),
                schedule: schedule.clone(),
                paused: false,
                state: ScheduleState {
                    after: at,
                    ..ScheduleState::default()
                },
                version: 1,
                created_at: at,
            })
            .clone();
        ready(Ok(row))
    }

    fn schedules(&self) -> BoxFuture<'_, Result<Vec<ScheduleRow>, StoreError>> {
        ready(Ok(self.lock().schedules.values().cloned().collect()))
    }

    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut inner = self.lock();
        let applied = match inner.schedules.get_mut(id) {
            Some(row) if row.version == version => {
                if let Some(state) = change.state {
                    row.state = state;
                }
                if let Some(paused) = change.paused {
                    row.paused = paused;
                }
                row.version += 1;
                true
            }
            _ => false,
        };
        if let (true, Some(missed)) = (applied, change.missed) {
            let records = inner.missed.entry(id.to_owned()).or_default();
            if !records.iter().any(|r| r.first == missed.first) {
                records.push(missed);
            }
        }
        ready(Ok(applied))
    }

    fn purge(&self, filter: PurgeFilter) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        let mut inner = self.lock();
        let runs = inner.purgeable(&filter);
        if !filter.dry_run {
            for run in &runs {
                inner.delete_run(*run);
            }
        }
        ready(Ok(runs))
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let mut inner = self.lock();
        inner.missed.remove(id);
        ready(Ok(inner.schedules.remove(id).is_some()))
    }

    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<MissedTicks>, StoreError>> {
        let inner = self.lock();
        let records = inner.missed.get(id).map_or_else(Vec::new, |records| {
            records.iter().rev().take(limit).cloned().collect()
        });
        ready(Ok(records))
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut inner = self.lock();
        match inner
            .specs
            .iter_mut()
            .find(|spec| spec.fingerprint == fingerprint)
        {
            Some(spec) => spec.last_registered = spec.last_registered.max(at),
            None => inner.specs.push(SpecRecord {
                fingerprint: fingerprint.to_owned(),
                workflow: workflow.to_owned(),
                spec: spec_json.to_owned(),
                first_registered: at,
                last_registered: at,
            }),
        }
        ready(Ok(()))
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let inner = self.lock();
        let spec = inner
            .specs
            .iter()
            .find(|spec| spec.fingerprint == fingerprint)
            .map(|spec| spec.spec.clone());
        ready(Ok(spec))
    }

    fn specs<'a>(
        &'a self,
        workflow: &'a str,
    ) -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>> {
        let inner = self.lock();
        let mut specs: Vec<SpecRecord> = inner
            .specs
            .iter()
            .filter(|spec| spec.workflow == workflow)
            .cloned()
            .collect();
        specs.sort_by_key(|s| std::cmp::Reverse((s.last_registered, s.first_registered)));
        ready(Ok(specs))
    }

    fn create_gated<'a>(
        &'a self,
        run: NewRun<'a>,
        gate: super::limits::Gate<'a>,
    ) -> BoxFuture<'a, Result<Created, StoreError>> {
        let created = self.lock().create_gated(&run, &gate);
        if matches!(created, Ok(Created::New { .. })) {
            self.wake();
        }
        ready(created)
    }

    fn admit<'a>(
        &'a self,
        admit: super::limits::Admit<'a>,
    ) -> BoxFuture<'a, Result<super::limits::Admission, StoreError>> {
        ready(Ok(self.lock().admit(&admit)))
    }

    fn acquire_slot<'a>(
        &'a self,
        request: super::limits::SlotRequest<'a>,
    ) -> BoxFuture<'a, Result<super::limits::Acquired, StoreError>> {
        ready(self.lock().acquire(&request))
    }

    fn release_slot<'a>(
        &'a self,
        run: RunId,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock().release_slot(run, holder);
        self.wake();
        ready(Ok(()))
    }

    fn flow_of(&self, run: RunId) -> BoxFuture<'_, Result<super::limits::RunFlow, StoreError>> {
        ready(Ok(self.lock().flow_of(run)))
    }

    fn rate_buckets(&self, limit: usize) -> BoxFuture<'_, Result<Vec<RateBucket>, StoreError>> {
        ready(Ok(self.lock().rate_buckets(limit)))
    }

    fn wake_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.claimable.subscribe())
    }

    fn verify(&self) -> BoxFuture<'_, Result<Verification, StoreError>> {
        let inner = self.lock();
        let entries: usize = inner.runs.values().map(|run| run.stored.events.len()).sum();
        let rows = inner.runs.len() + entries + inner.dead.len() + inner.specs.len();
        ready(Ok(Verification {
            integrity: Vec::new(),
            damaged: inner
                .damaged
                .iter()
                .map(|(run, seq)| super::Damage {
                    table: "journal".to_owned(),
                    run: Some(*run),
                    key: format!("run-{}/{seq}", run.0),
                    reason: "marked damaged".to_owned(),
                })
                .collect(),
            rows: (rows + inner.inbox.len()) as u64,
        }))
    }
}

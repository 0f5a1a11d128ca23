//! An in-memory store: for tests, and for workflows that need no durability.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use super::{
    Created, DeadLetter, NewRun, RunFilter, RunRecord, RunStatus, Store, StoreError, StoredRun,
};
use crate::error::RunId;
use crate::journal::Event;
use crate::workflow::BoxFuture;

/// Keeps everything in memory; lost when the process ends.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    runs: BTreeMap<RunId, StoredRun>,
    keys: HashMap<(String, String), RunId>,
    dead: BTreeMap<RunId, DeadLetter>,
    specs: HashMap<String, String>,
    appends: u64,
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
}

fn ready<'a, T: Send + 'a>(value: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Store for MemoryStore {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        let mut inner = self.lock();
        if let Some(key) = run.idempotency_key {
            if let Some(id) = inner.keys.get(&(run.workflow.to_owned(), key.to_owned())) {
                return ready(Ok(Created::Existing(*id)));
            }
        }
        inner.next_id += 1;
        let id = RunId(inner.next_id);
        if let Some(key) = run.idempotency_key {
            inner
                .keys
                .insert((run.workflow.to_owned(), key.to_owned()), id);
        }
        inner.appends += 1;
        inner.runs.insert(
            id,
            StoredRun {
                record: RunRecord {
                    id,
                    workflow: run.workflow.to_owned(),
                    fingerprint: run.fingerprint.to_owned(),
                    status: RunStatus::Running,
                    idempotency_key: run.idempotency_key.map(str::to_owned),
                    note: None,
                    created_at: run.at,
                    updated_at: run.at,
                },
                events: vec![run.started.clone()],
            },
        );
        ready(Ok(Created::New(id)))
    }

    fn append<'a>(
        &'a self,
        run: RunId,
        seq: u64,
        event: &'a Event,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut inner = self.lock();
        let result = match inner.runs.get_mut(&run) {
            None => Err(StoreError::UnknownRun(run)),
            Some(stored) if stored.events.len() as u64 != seq => {
                Err(StoreError::Conflict { run, seq })
            }
            Some(stored) => {
                stored.record.updated_at = event.at();
                stored.events.push(event.clone());
                Ok(())
            }
        };
        if result.is_ok() {
            inner.appends += 1;
        }
        ready(result)
    }

    fn set_status<'a>(
        &'a self,
        run: RunId,
        status: RunStatus,
        note: Option<&'a str>,
        dead_letter: Option<&'a DeadLetter>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let mut inner = self.lock();
        let Some(stored) = inner.runs.get_mut(&run) else {
            return ready(Err(StoreError::UnknownRun(run)));
        };
        stored.record.status = status;
        stored.record.note = note.map(str::to_owned);
        if let Some(letter) = dead_letter {
            inner.dead.insert(run, letter.clone());
        }
        ready(Ok(()))
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        ready(Ok(self.lock().runs.get(&run).cloned()))
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        let inner = self.lock();
        let records = inner
            .runs
            .values()
            .rev()
            .map(|stored| &stored.record)
            .filter(|r| filter.workflow.as_ref().is_none_or(|w| *w == r.workflow))
            .filter(|r| filter.status.is_none_or(|s| s == r.status))
            .take(filter.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect();
        ready(Ok(records))
    }

    fn claim_unfinished<'a>(
        &'a self,
        _owner: &'a str,
        workflows: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        let inner = self.lock();
        let ids = inner
            .runs
            .values()
            .filter(|s| {
                s.record.status == RunStatus::Running
                    && workflows.contains(&s.record.workflow.as_str())
            })
            .map(|s| s.record.id)
            .collect();
        ready(Ok(ids))
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        ready(Ok(self.lock().dead.values().rev().cloned().collect()))
    }

    fn remove_dead_letter(&self, run: RunId) -> BoxFuture<'_, Result<(), StoreError>> {
        self.lock().dead.remove(&run);
        ready(Ok(()))
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        spec_json: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock()
            .specs
            .entry(fingerprint.to_owned())
            .or_insert_with(|| spec_json.to_owned());
        ready(Ok(()))
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        ready(Ok(self.lock().specs.get(fingerprint).cloned()))
    }
}

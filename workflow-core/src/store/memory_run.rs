//! A run as the memory store keeps it: its row and journal, its lease, its inbox cursor;
//! and the creation of runs, one or a batch.

use std::collections::HashSet;

use super::super::tasks;
use super::super::{
    queued_journal, Claim, Claimable, Claimant, Created, Lease, NewRun, RunRecord, RunStatus,
    StoreError, StoredRun,
};
use super::{Inner, MemoryStore};
use crate::error::RunId;
use crate::journal::Timestamp;

#[derive(Debug)]
pub(super) struct Run {
    pub(super) stored: StoredRun,
    pub(super) token: u64,
    pub(super) lease_until: Timestamp,
    pub(super) inbox_cursor: u64,
}

impl Run {
    pub(super) fn claimable(&self, claim: &Claim<'_>) -> bool {
        let record = &self.stored.record;
        let mine = record.owner.as_deref() == Some(claim.claimant.owner);
        record.status == RunStatus::Running
            && claim.workflows.contains(&record.workflow.as_str())
            && claim.run.is_none_or(|run| run == record.id)
            && claim
                .versions
                .is_none_or(|versions| versions.contains(&record.fingerprint.as_str()))
            && match &record.owner {
                None => true,
                Some(_) if mine => claim.reclaim_own,
                Some(_) => self.lease_until <= claim.claimant.now,
            }
            && match claim.claimable {
                Claimable::Any => true,
                Claimable::Queued => self.is_queued(),
                Claimable::Begun => !self.is_queued(),
            }
    }

    /// Nobody owns it and its journal holds only its start.
    pub(super) fn is_queued(&self) -> bool {
        self.stored.record.owner.is_none() && queued_journal(&self.stored.events)
    }

    pub(super) fn take(&mut self, claimant: Claimant<'_>) -> Lease {
        self.token += 1;
        self.lease_until = claimant.now.saturating_add(claimant.lease_ms);
        self.stored.record.owner = Some(claimant.owner.to_owned());
        Lease {
            run: self.stored.record.id,
            token: self.token,
        }
    }
}

impl MemoryStore {
    /// Creates `runs` in order, all or none (`Store::create_runs`).
    pub(super) fn create_batch(&self, runs: &[NewRun<'_>]) -> Result<Vec<Created>, StoreError> {
        let mut inner = self.lock();
        // Every failure is found before the first write, so a refused batch writes nothing.
        if let Some(error) = inner.refused(runs) {
            return Err(error);
        }
        let commits = inner.commits;
        let mut created = Vec::with_capacity(runs.len());
        for new in runs {
            created.push(inner.create(new)?);
        }
        let claimable = runs
            .iter()
            .zip(&created)
            .filter(|(new, created)| new.owner.is_none() && matches!(created, Created::New { .. }))
            .count() as u64;
        if commits != inner.commits {
            // One transaction, however many runs it created.
            inner.commits = commits + 1;
        }
        drop(inner);
        if claimable > 0 {
            self.claimable.send_modify(|n| *n += claimable);
        }
        Ok(created)
    }
}

impl Inner {
    /// Why creating `runs` in order would fail, if it would: a superseded run that is
    /// unknown, not parked, or superseded by an earlier run of the batch.
    fn refused(&self, runs: &[NewRun<'_>]) -> Option<StoreError> {
        let mut keys = HashSet::new();
        let mut superseded = HashSet::new();
        for new in runs {
            if let Some(key) = new.idempotency_key {
                let known = self
                    .keys
                    .contains_key(&(new.workflow.to_owned(), key.to_owned()));
                // A key used before, or earlier in the batch, names that run: no write.
                if known || !keys.insert((new.workflow, key)) {
                    continue;
                }
            }
            let Some((old, _)) = new.supersedes else {
                continue;
            };
            let Some(run) = self.runs.get(&old) else {
                return Some(StoreError::UnknownRun(old));
            };
            if run.stored.record.status != RunStatus::Parked || !superseded.insert(old) {
                return Some(StoreError::Conflict {
                    run: old,
                    seq: run.stored.events.len() as u64,
                });
            }
        }
        None
    }

    pub(super) fn create(&mut self, new: &NewRun<'_>) -> Result<Created, StoreError> {
        if let Some(key) = new.idempotency_key {
            if let Some(id) = self.keys.get(&(new.workflow.to_owned(), key.to_owned())) {
                return Ok(Created::Existing(*id));
            }
        }
        if let Some((old, _)) = new.supersedes {
            match self.runs.get(&old) {
                None => return Err(StoreError::UnknownRun(old)),
                Some(run) if run.stored.record.status != RunStatus::Parked => {
                    return Err(StoreError::Conflict {
                        run: old,
                        seq: run.stored.events.len() as u64,
                    })
                }
                Some(_) => {}
            }
        }
        self.next_id += 1;
        let id = RunId(self.next_id);
        if let Some(key) = new.idempotency_key {
            self.keys
                .insert((new.workflow.to_owned(), key.to_owned()), id);
        }
        if let Some((old, note)) = new.supersedes {
            if let Some(run) = self.runs.get_mut(&old) {
                let record = &mut run.stored.record;
                record.status = RunStatus::Cancelled;
                record.note = Some(note.to_owned());
                record.owner = None;
                record.updated_at = new.at;
            }
            self.tasks.remove(&old);
        }
        self.appends += new.events.len() as u64;
        self.commits += 1;
        let mut run = Run {
            stored: StoredRun {
                record: RunRecord {
                    id,
                    workflow: new.workflow.to_owned(),
                    fingerprint: new.fingerprint.to_owned(),
                    status: RunStatus::Running,
                    idempotency_key: new.idempotency_key.map(str::to_owned),
                    note: None,
                    parent: new.parent,
                    owner: None,
                    created_at: new.at,
                    updated_at: new.at,
                },
                events: new.events.to_vec(),
            },
            token: 0,
            lease_until: 0,
            inbox_cursor: 0,
        };
        let token = new.owner.map_or(0, |claimant| run.take(claimant).token);
        let changes = tasks::changes(new.events, None, RunStatus::Running);
        self.index(id, &changes, new.events);
        self.runs.insert(id, run);
        if !new.search.is_empty() {
            self.search.insert(id, new.search.to_vec());
        }
        Ok(Created::New { run: id, token })
    }
}

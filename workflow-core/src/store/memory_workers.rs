//! The memory store's leases and worker rows: renewals, heartbeats and releases.

use super::super::workers::kept;
use super::super::{Claimant, Heartbeat, WorkerRow};
use super::Inner;
use crate::error::RunId;

impl Inner {
    pub(super) fn renew(&mut self, claimant: Claimant<'_>) -> Vec<RunId> {
        self.runs
            .values_mut()
            .filter(|run| run.stored.record.owner.as_deref() == Some(claimant.owner))
            .map(|run| {
                run.lease_until = claimant.now.saturating_add(claimant.lease_ms);
                run.stored.record.id
            })
            .collect()
    }

    pub(super) fn heartbeat(&mut self, beat: Heartbeat<'_>) -> Vec<RunId> {
        let held = self.renew(beat.claimant);
        let now = beat.claimant.now;
        let name = beat.claimant.owner;
        self.workers
            .retain(|other, row| other == name || kept(row, now));
        // A draining engine's beat that arrives after its release leaves it stopped.
        let stopped =
            beat.draining.is_some() && self.workers.get(name).is_some_and(|row| row.stopped);
        let row = WorkerRow {
            name: name.to_owned(),
            started_at: beat.started,
            renewed_at: now,
            lease_until: now.saturating_add(beat.claimant.lease_ms),
            draining_since: beat.draining,
            stopped,
        };
        self.workers.insert(name.to_owned(), row);
        held
    }

    pub(super) fn release(&mut self, owner: &str, runs: Option<&[RunId]>) {
        for run in self.runs.values_mut() {
            let record = &mut run.stored.record;
            if record.owner.as_deref() == Some(owner) && runs.is_none_or(|r| r.contains(&record.id))
            {
                record.owner = None;
            }
        }
        if runs.is_none() {
            if let Some(row) = self.workers.get_mut(owner) {
                row.stopped = true;
            }
        }
    }
}

//! A run as the memory store keeps it: its row and journal, its lease, its inbox cursor.

use super::super::{queued_journal, Claim, Claimable, Claimant, Lease, RunStatus, StoredRun};
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

//! The run rows this store last read or wrote, so that a commit that changes a run's row
//! (its end, a moved inbox cursor) computes the row's new checksum without reading the
//! row first. The server writes that checksum only over the row it was computed from
//! (`workflow_commit` compares the stored checksum), so a row another process changed
//! meanwhile costs a read and a second try, never a wrong checksum. (A row damaged in
//! place keeps its old checksum; a commit made from the cache then overwrites the fields
//! it sets, and a damaged field it does not set still fails its next read.)

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::read::RawRun;
use workflow_core::RunId;

/// How many rows are kept; when full, the cache starts over.
const CAPACITY: usize = 4_096;

#[derive(Debug, Default)]
pub(super) struct Known {
    rows: Mutex<HashMap<RunId, RawRun>>,
}

impl Known {
    fn lock(&self) -> MutexGuard<'_, HashMap<RunId, RawRun>> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The row as this store last saw it, if it did.
    pub(super) fn get(&self, run: RunId) -> Option<RawRun> {
        self.lock().get(&run).cloned()
    }

    /// Notes a row as read or written (verified, or computed with its checksum).
    pub(super) fn put(&self, raw: RawRun) {
        let mut rows = self.lock();
        if rows.len() >= CAPACITY && !rows.contains_key(&raw.id) {
            rows.clear();
        }
        rows.insert(raw.id, raw);
    }

    /// Forgets a row whose state this store no longer knows.
    pub(super) fn forget(&self, run: RunId) {
        self.lock().remove(&run);
    }
}

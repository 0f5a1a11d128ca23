//! The background purge: finished runs older than their retention (a workflow's
//! `retention:`, else [`EngineBuilder::retention`](super::EngineBuilder::retention)) are
//! purged every [`PURGE_EVERY`] (the first time one period after the engine starts), at most [`BATCHES_PER_PASS`] batches of
//! [`DEFAULT_BATCH`] runs per pass, so a large backlog is worked off over several passes
//! without holding the store for long. Each batch is one
//! [`Store::purge`](crate::store::Store::purge).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::{lock, Engine};
use crate::search::{purge_all, Retention, DEFAULT_BATCH};
use crate::store::StoreError;

/// How often the background purge runs.
pub const PURGE_EVERY: Duration = Duration::from_secs(60);

/// The most batches one pass of the background purge runs, per workflow.
pub const BATCHES_PER_PASS: usize = 10;

impl Engine {
    /// The retention policy of this engine: each registered workflow's `retention:` (the
    /// longest of its versions'), and the engine-wide default.
    pub fn retention(&self) -> Retention {
        let mut workflows: BTreeMap<String, Duration> = BTreeMap::new();
        for registered in self.inner.registry.all() {
            if let Some(keep) = registered.spec().retention {
                let entry = workflows
                    .entry(registered.name().to_owned())
                    .or_insert(keep);
                *entry = (*entry).max(keep);
            }
        }
        Retention {
            default: self.inner.retention,
            workflows: workflows.into_iter().collect(),
        }
    }

    /// Purges finished runs older than their retention, at most [`BATCHES_PER_PASS`]
    /// batches per workflow; returns how many runs it purged. The background purge calls
    /// it every [`PURGE_EVERY`]; call it to purge now.
    pub async fn purge_expired(&self) -> Result<usize, StoreError> {
        let retention = self.retention();
        let mut purged = 0;
        for filter in retention.filters(self.now(), DEFAULT_BATCH) {
            let report =
                purge_all(&*self.inner.store, filter, Some(BATCHES_PER_PASS), |_| {}).await?;
            purged += report.runs.len();
        }
        if purged > 0 {
            metrics::counter!("workflow_runs_purged_total").increment(purged as u64);
            tracing::info!(purged, "purged finished runs past their retention");
        }
        Ok(purged)
    }

    /// Starts the background purge unless it runs or nothing is ever purged (only inside a
    /// tokio runtime).
    pub(super) fn ensure_purger(&self) {
        if tokio::runtime::Handle::try_current().is_err() || self.retention().is_empty() {
            return;
        }
        let mut purger = lock(&self.inner.purger);
        if purger.is_some() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let handle = tokio::spawn(async move {
            // The first pass waits too: the workflows registered right after the engine
            // was built keep their own retention, not the default's.
            loop {
                tokio::time::sleep(PURGE_EVERY).await;
                let Some(inner) = weak.upgrade() else { return };
                let engine = Engine { inner };
                if let Err(error) = engine.purge_expired().await {
                    tracing::warn!(%error, "the background purge failed; it tries again later");
                }
            }
        });
        *purger = Some(handle.abort_handle());
    }
}

//! Purging finished runs in bounded batches: the loop the CLI's `workflow runs purge` and
//! the engine's background purge share, and the retention policy the engine derives from
//! its workflows' `retention:` keys and [`EngineBuilder::retention`](crate::EngineBuilder::retention).
//!
//! Each batch is one [`Store::purge`], which deletes whole runs (each in one transaction),
//! so a process killed between (or inside) batches leaves every run there whole or gone
//! whole.

use std::time::Duration;

use serde::Serialize;

use crate::error::RunId;
use crate::journal::Timestamp;
use crate::store::{PurgeFilter, Store, StoreError};

/// How many runs one batch purges by default.
pub const DEFAULT_BATCH: usize = 100;

/// What a purge did (or, dry, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PurgeReport {
    /// The runs purged (or that would be), lowest id first.
    pub runs: Vec<RunId>,
    /// How many batches ran.
    pub batches: usize,
    /// Whether no matching run is left (false: `max_batches` stopped it first).
    pub complete: bool,
}

/// Purges the runs `filter` takes, `filter.limit` per batch (one [`Store::purge`] each),
/// until none is left or `max_batches` batches ran; `progress` sees each batch. With
/// `filter.dry_run` nothing is deleted and the batches page through what would be.
pub async fn purge_all(
    store: &dyn Store,
    mut filter: PurgeFilter,
    max_batches: Option<usize>,
    mut progress: impl FnMut(&[RunId]),
) -> Result<PurgeReport, StoreError> {
    filter.limit = filter.limit.max(1);
    let mut report = PurgeReport::default();
    loop {
        if max_batches.is_some_and(|max| report.batches >= max) {
            return Ok(report);
        }
        let batch = store.purge(filter.clone()).await?;
        report.batches += 1;
        progress(&batch);
        let full = batch.len() >= filter.limit;
        if let Some(last) = batch.last() {
            filter.after = Some(*last);
        }
        report.runs.extend(batch);
        if !full {
            report.complete = true;
            return Ok(report);
        }
    }
}

/// How long finished runs are kept: per workflow (its `retention:`), else the engine-wide
/// default, else for ever.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// The engine-wide default, for runs of every workflow without a retention of its own.
    pub default: Option<Duration>,
    /// Workflows (by journaled name) with a retention of their own.
    pub workflows: Vec<(String, Duration)>,
}

impl Retention {
    /// Whether anything is ever purged.
    pub fn is_empty(&self) -> bool {
        self.default.is_none() && self.workflows.is_empty()
    }

    /// The purges that carry out this policy at `now`, `batch` runs per batch: one per
    /// workflow with a retention of its own, then the default for every other workflow.
    pub fn filters(&self, now: Timestamp, batch: usize) -> Vec<PurgeFilter> {
        let before = |keep: Duration| now.saturating_sub(keep.as_millis() as u64);
        let mut filters: Vec<PurgeFilter> = self
            .workflows
            .iter()
            .map(|(workflow, keep)| PurgeFilter {
                before: before(*keep),
                workflow: Some(workflow.clone()),
                limit: batch,
                ..PurgeFilter::default()
            })
            .collect();
        if let Some(keep) = self.default {
            filters.push(PurgeFilter {
                before: before(keep),
                except: self.workflows.iter().map(|(w, _)| w.clone()).collect(),
                limit: batch,
                ..PurgeFilter::default()
            });
        }
        filters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workflows_own_retention_wins_over_the_default() {
        let retention = Retention {
            default: Some(Duration::from_secs(10)),
            workflows: vec![("Order".into(), Duration::from_secs(100))],
        };
        let filters = retention.filters(1_000_000, 5);
        assert_eq!(filters.len(), 2);
        assert_eq!(filters[0].workflow.as_deref(), Some("Order"));
        assert_eq!(filters[0].before, 900_000);
        assert_eq!(filters[1].workflow, None);
        assert_eq!(filters[1].except, vec!["Order".to_owned()]);
        assert_eq!(filters[1].before, 990_000);
        assert!(filters.iter().all(|f| f.limit == 5 && !f.dry_run));
        assert!(Retention::default().filters(1, 1).is_empty());
    }
}

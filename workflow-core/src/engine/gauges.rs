//! The gauges an operator looks at first, read from the store when an exporter asks
//! ([`Engine::record_gauges`]): runs by workflow and status, open human tasks and the age
//! of the oldest, dead letters, damaged runs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Engine;
use crate::error::RunError;
use crate::store::{RunFilter, RunStatus};

impl Engine {
    /// Sets the gauges of [`telemetry::METRICS`](crate::telemetry::METRICS) from the
    /// store: `workflow_runs{workflow, status}`, `workflow_open_tasks{workflow}`,
    /// `workflow_oldest_open_task_age_seconds{workflow}`, `workflow_dead_letters{workflow}`,
    /// `workflow_damaged_runs` and `workflow_draining`. Every registered workflow gets every
    /// status, so a count that fell to zero reads zero. It reads every run's row and the store's
    /// open-task index (no journal): call it per scrape, not per request.
    pub async fn record_gauges(&self) -> Result<(), RunError> {
        let now = self.now();
        let mut workflows: BTreeSet<String> = self
            .inner
            .registry
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut runs: HashMap<(String, RunStatus), u64> = HashMap::new();
        let mut open: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for record in self.inner.store.runs(RunFilter::default()).await? {
            workflows.insert(record.workflow.clone());
            *runs.entry((record.workflow, record.status)).or_default() += 1;
        }
        // Open tasks, from the index: an escalated task counts since its first opening.
        for group in self.inner.store.task_counts().await? {
            workflows.insert(group.workflow.clone());
            let entry = open.entry(group.workflow).or_default();
            entry.0 += group.count;
            entry.1 = entry.1.max(now.saturating_sub(group.oldest_opened_at));
        }
        let mut letters: BTreeMap<String, u64> = BTreeMap::new();
        for letter in self.inner.store.dead_letters().await? {
            workflows.insert(letter.workflow.clone());
            *letters.entry(letter.workflow).or_default() += 1;
        }
        for workflow in &workflows {
            for status in RunStatus::ALL {
                let count = runs.get(&(workflow.clone(), status)).copied().unwrap_or(0);
                metrics::gauge!(
                    "workflow_runs",
                    "workflow" => workflow.clone(),
                    "status" => status.as_str()
                )
                .set(count as f64);
            }
            let (tasks, oldest_ms) = open.get(workflow).copied().unwrap_or((0, 0));
            metrics::gauge!("workflow_open_tasks", "workflow" => workflow.clone())
                .set(tasks as f64);
            metrics::gauge!(
                "workflow_oldest_open_task_age_seconds",
                "workflow" => workflow.clone()
            )
            .set(oldest_ms as f64 / 1000.0);
            metrics::gauge!("workflow_dead_letters", "workflow" => workflow.clone())
                .set(letters.get(workflow).copied().unwrap_or(0) as f64);
        }
        metrics::gauge!("workflow_damaged_runs").set(self.damaged().len() as f64);
        metrics::gauge!("workflow_draining").set(if self.is_draining() { 1.0 } else { 0.0 });
        Ok(())
    }
}

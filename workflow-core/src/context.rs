//! What a step action gets to know about its run: [`StepContext`].

use crate::error::RunId;
use crate::journal::Timestamp;

/// The context of one attempt of one step, passed to actions that name `ctx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepContext {
    /// The workflow's name.
    pub workflow: &'static str,
    /// The run.
    pub run_id: RunId,
    /// The step id.
    pub step: &'static str,
    /// The attempt, from 1.
    pub attempt: u32,
    /// `workflow/run/step`: the same across retries and restarts, never per attempt. Pass it
    /// to external services as their idempotency key.
    pub idempotency_key: String,
    /// When this attempt must be done by (the step timeout), if the step has one.
    pub deadline: Option<Timestamp>,
    /// Whether this is a dry run (external effects are proposed, not executed).
    pub dry_run: bool,
    /// The run's trace id, for correlating logs.
    pub trace_id: String,
}

impl StepContext {
    /// The key for a step of a run: `workflow/run/step`.
    pub fn key_for(workflow: &str, run: RunId, step: &str) -> String {
        format!("{workflow}/{}/{step}", run.0)
    }

    /// The key for one item of a map step: `workflow/run/step/index`.
    pub fn item_key_for(workflow: &str, run: RunId, step: &str, index: usize) -> String {
        format!("{workflow}/{}/{step}/{index}", run.0)
    }
}

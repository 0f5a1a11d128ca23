//! Child runs: started once per parent step (keyed by the parent's run and step), linked
//! to the parent, waited for (and taken up when no engine drives them), their outcome
//! the step's.

use std::time::Duration;

use super::plan::Options;
use super::{Engine, StartOptions};
use crate::engine::workflow::ChildStart;
use crate::error::{RunError, RunId, StepError};
use crate::journal::{Timestamp, Value};
use crate::machine::{Status, Stop};

impl Engine {
    /// Starts the child run a parent's step asks for, or finds the one it started before a
    /// crash: the start is keyed by the parent's step key (`workflow/run/step`).
    pub(super) async fn start_child(
        &self,
        parent: RunId,
        step_key: &str,
        start: ChildStart,
        dry_run: bool,
        deadline: Option<Timestamp>,
        trace: Option<crate::trace::TraceParent>,
    ) -> Result<RunId, RunError> {
        let registered = self
            .inner
            .registry
            .any(start.workflow)
            .ok_or_else(|| RunError::NotRegistered(start.workflow.to_owned()))?;
        let key = format!("child-of-{step_key}");
        if super::limits::is_gated(registered.spec()) {
            // A child of a limited workflow is admitted like any other start of it, so
            // its keys hold for children too.
            let options = StartOptions {
                idempotency_key: Some(key),
                dry_run,
                deadline: deadline
                    .map(|at| Duration::from_millis(at.saturating_sub(self.now()).max(1))),
                initiator: None,
                traceparent: trace,
            };
            let created = self
                .enqueue_registered(&*registered, start.input, &options, Some(parent))
                .await?;
            return Ok(created.id());
        }
        let created = registered
            .create(
                self,
                start.input,
                Options {
                    idempotency_key: Some(&key),
                    dry_run,
                    deadline,
                    initiator: None,
                    parent: Some(parent),
                    trace,
                },
            )
            .await?;
        Ok(created.id())
    }

    /// Waits for a child run to finish: its outputs as JSON (the parent step's output), or
    /// its failure as the step's error.
    pub(super) async fn child_result(&self, child: RunId) -> Result<Value, StepError> {
        let finished = match self.wait(child).await {
            Ok(finished) => finished,
            Err(RunError::Cancelled(_)) => {
                return Err(StepError::new(
                    crate::ErrorKind::Internal,
                    format!("the child run {child} was cancelled"),
                ))
            }
            Err(error) => {
                return Err(StepError::permanent(format!(
                    "the child run {child} cannot finish: {error}"
                )))
            }
        };
        match (finished.status, &finished.stop) {
            (Status::Completed, _) => {
                let record = self
                    .stored(child)
                    .await
                    .map_err(|e| StepError::unavailable(e.to_string()))?
                    .record;
                let registered = self
                    .inner
                    .registry
                    .version(&record.workflow, &record.fingerprint)
                    .ok_or_else(|| {
                        StepError::permanent(format!(
                            "the child workflow `{}` is not registered",
                            record.workflow
                        ))
                    })?;
                registered
                    .outputs_value(&finished.outputs)
                    .map_err(|error| StepError::validation(error.to_string()))
            }
            (_, Some(Stop::StepFailed {
                step,
                attempts,
                kind,
                message,
            })) => Err(StepError::new(
                *kind,
                format!(
                    "the child run {child} failed at step #{step} after {attempts} attempt(s): {message}"
                ),
            )),
            (_, Some(Stop::Deadline)) => Err(StepError::timeout(format!(
                "the child run {child} passed its deadline"
            ))),
            (_, _) => Err(StepError::new(
                crate::ErrorKind::Internal,
                format!("the child run {child} was cancelled"),
            )),
        }
    }
}

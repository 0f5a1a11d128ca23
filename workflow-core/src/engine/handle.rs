//! Handles to runs: the untyped [`RunRef`] and the typed [`RunHandle`], and what
//! inspecting a run returns.

use std::fmt;

use super::Engine;
use crate::engine::workflow::{CallError, Workflow};
use crate::error::{RunError, RunId, StepError};
use crate::journal::{Event, Value};
use crate::machine::{Status, StepState, Stop};
use crate::store::RunRecord;

/// A run's state, for inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    /// The run's row.
    pub record: RunRecord,
    /// Per step, in declaration order: its id, state and attempts.
    pub steps: Vec<StepView>,
}

/// One step of a [`RunView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepView {
    /// The step id.
    pub id: String,
    /// Its state.
    pub state: StepState,
    /// Attempts started.
    pub attempts: u32,
}

/// An untyped reference to a run of an engine.
#[derive(Clone)]
pub struct RunRef {
    pub(super) engine: Engine,
    pub(super) id: RunId,
}

impl fmt::Debug for RunRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunRef")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl RunRef {
    /// The run's id.
    pub fn id(&self) -> RunId {
        self.id
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// A typed handle to a run of `W`. Derefs to `W`'s human-task handles, so a checkpoint is
/// decided with `run.human_review().approve("ana@trust_and_safety_team", None)`.
///
/// [`Engine::start`] and [`Engine::start_with`] return one; [`Engine::handle`] gives one for
/// a run that exists.
///
/// ```
/// use workflow_core::prelude::*;
///
/// async fn total(amount: u32) -> Result<u32, StepError> {
///     Ok(amount + 100)
/// }
///
/// workflow! {
///     workflow Refund(amount: u32) {
///         step total -> u32 { action: total(amount) }
///         human approve -> Approval {
///             assignee: "finance", depends_on: [total], timeout: 24h, on_timeout: reject,
///         }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::builder().build();
/// engine.register::<Refund>(())?;
/// let run = engine
///     .start_with::<Refund>(RefundInput { amount: 900 }, StartOptions::key("refund-7"))
///     .await?;
/// assert!(run.was_created());
///
/// while run.approve().info().await.is_none() {
///     tokio::task::yield_now().await; // until the task is open
/// }
/// run.approve().approve("bob@finance", Some("ok")).await?;
///
/// let outputs = run.outputs().await?; // waits for the end: typed outputs, or a RunError
/// assert_eq!(outputs.total, 1000);
/// assert!(outputs.approve.approved);
///
/// // The same run, found again by id.
/// let again = engine.handle::<Refund>(run.id()).await?;
/// assert_eq!(again.inspect().await?.record.status.as_str(), "completed");
/// # Ok(()) }
/// ```
pub struct RunHandle<W: Workflow> {
    run: RunRef,
    tasks: W::Tasks,
    created: bool,
}

impl<W: Workflow> fmt::Debug for RunHandle<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunHandle")
            .field("workflow", &W::NAME)
            .field("id", &self.run.id)
            .finish()
    }
}

impl<W: Workflow> std::ops::Deref for RunHandle<W> {
    type Target = W::Tasks;

    fn deref(&self) -> &W::Tasks {
        &self.tasks
    }
}

impl<W: Workflow> RunHandle<W> {
    pub(super) fn new(run: RunRef, created: bool) -> Self {
        RunHandle {
            tasks: W::Tasks::from(run.clone()),
            run,
            created,
        }
    }

    /// Whether this handle's start created the run (false when an idempotency key named
    /// an existing run, or for handles to existing runs).
    pub fn was_created(&self) -> bool {
        self.created
    }

    /// The run's id.
    pub fn id(&self) -> RunId {
        self.run.id
    }

    /// The untyped reference.
    pub fn run_ref(&self) -> &RunRef {
        &self.run
    }

    /// Waits for the run to finish and returns its typed outputs, or why there are none.
    /// A run that no live engine drives (after a restart, say) is taken up by this engine
    /// and driven to its end.
    pub async fn outputs(&self) -> Result<W::Outputs, RunError> {
        let run = self.run.id;
        let finished = self.run.engine.wait(run).await?;
        let step_name = |step: usize| {
            W::spec()
                .steps
                .get(step)
                .map_or_else(String::new, |s| s.id.clone())
        };
        match (&finished.status, &finished.stop) {
            (Status::Completed, _) => W::outputs(&finished.outputs).map_err(|error| match error {
                CallError::Absent(step) => RunError::Absent {
                    run,
                    step: step_name(step),
                },
                CallError::Decode { step, message } => RunError::Decode {
                    run,
                    step: step_name(step),
                    message,
                },
                other => RunError::InvalidSpec(other.to_string()),
            }),
            (Status::Cancelled, _) | (_, Some(Stop::Cancelled)) => Err(RunError::Cancelled(run)),
            (_, Some(Stop::Deadline)) => Err(RunError::DeadlineExceeded(run)),
            (
                _,
                Some(Stop::StepFailed {
                    step,
                    attempts,
                    kind,
                    message,
                }),
            ) => Err(RunError::Failed {
                run,
                step: step_name(*step),
                attempts: *attempts,
                error: StepError::new(*kind, message.clone()),
            }),
            (_, None) => Err(RunError::EngineStopped(run)),
        }
    }

    /// The run's current state.
    pub async fn inspect(&self) -> Result<RunView, RunError> {
        self.run.engine.inspect(self.run.id).await
    }

    /// The effects proposed instead of executed (dry runs): step id and arguments.
    pub async fn proposals(&self) -> Result<Vec<(String, Value)>, RunError> {
        let events = self.run.engine.events(self.run.id).await?;
        Ok(events
            .into_iter()
            .filter_map(|event| match event {
                Event::EffectProposed { step, args, .. } => {
                    Some((W::spec().steps.get(step)?.id.clone(), args))
                }
                _ => None,
            })
            .collect())
    }

    /// Cancels the run.
    pub async fn cancel(&self, by: &str) -> Result<(), RunError> {
        self.run.engine.cancel(self.run.id, by).await
    }
}

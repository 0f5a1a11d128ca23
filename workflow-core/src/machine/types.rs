//! What the machine is made of: where a step is, where the run is, why it stopped, and
//! the commands it gives its driver.

use crate::error::{ErrorKind, RunId};
use crate::journal::{Event, Timestamp};

/// Where one step is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepState {
    /// Not started.
    Pending,
    /// An attempt is in flight.
    Running {
        /// The attempt, from 1.
        attempt: u32,
    },
    /// An attempt failed; the next starts at `until`.
    RetryWait {
        /// The attempt that failed.
        attempt: u32,
        /// When the next attempt is due.
        until: Timestamp,
    },
    /// A human task is open.
    Waiting {
        /// Who may decide now.
        assignee: String,
        /// When the task times out.
        deadline: Timestamp,
        /// Whether it was escalated already.
        escalated: bool,
    },
    /// A map step's items are in progress.
    Mapping {
        /// Items settled so far.
        done: usize,
        /// Items in all.
        count: usize,
    },
    /// An event step waits for its event until `deadline`.
    Awaiting {
        /// When the wait times out.
        deadline: Timestamp,
    },
    /// Done with an output.
    Succeeded,
    /// Failed for good.
    Failed {
        /// Attempts made.
        attempts: u32,
        /// The last error's kind.
        kind: ErrorKind,
        /// The last error's message.
        message: String,
    },
    /// Skipped: false condition, absent upstream, or proposed in a dry run.
    Skipped {
        /// Why.
        reason: String,
    },
}

impl StepState {
    /// How a diagram of the run colours this state (the CLI's `runs show --diagram`, the
    /// server's run pages): a step between two attempts is running, an open human task or
    /// an awaited event is waiting.
    pub fn mark(&self) -> workflow_spec::render::StepMark {
        use workflow_spec::render::StepMark;
        match self {
            StepState::Pending => StepMark::Pending,
            StepState::Running { .. } | StepState::RetryWait { .. } | StepState::Mapping { .. } => {
                StepMark::Running
            }
            StepState::Waiting { .. } | StepState::Awaiting { .. } => StepMark::Waiting,
            StepState::Succeeded => StepMark::Done,
            StepState::Failed { .. } => StepMark::Failed,
            StepState::Skipped { .. } => StepMark::Skipped,
        }
    }

    /// Whether the step has settled for good (its dependents may start).
    pub fn is_settled(&self) -> bool {
        matches!(
            self,
            StepState::Succeeded | StepState::Failed { .. } | StepState::Skipped { .. }
        )
    }

    /// A short name: `pending`, `running`, `retry_wait`, `waiting`, `mapping`, `awaiting`,
    /// `succeeded`, `failed`, `cancelled` (failed as a cancel stopped it), `skipped`.
    pub fn name(&self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::Running { .. } => "running",
            StepState::RetryWait { .. } => "retry_wait",
            StepState::Waiting { .. } => "waiting",
            StepState::Mapping { .. } => "mapping",
            StepState::Awaiting { .. } => "awaiting",
            StepState::Succeeded => "succeeded",
            StepState::Failed {
                kind: ErrorKind::Cancelled,
                ..
            } => "cancelled",
            StepState::Failed { .. } => "failed",
            StepState::Skipped { .. } => "skipped",
        }
    }
}

/// Where the whole run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Steps are being scheduled.
    Running,
    /// A step failed under `abort` (or the run was cancelled or ran past its deadline):
    /// in-flight steps settle, then compensations run in reverse completion order.
    Compensating,
    /// Every step settled without an abort.
    Completed,
    /// Aborted; compensations have run.
    Failed,
    /// Cancelled by an operator; compensations have run.
    Cancelled,
}

impl Status {
    /// Whether the run is over.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    /// The name used in the store and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Compensating => "compensating",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// Why a run stopped scheduling.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Stop {
    /// A step failed under `abort`.
    StepFailed {
        /// The step.
        step: usize,
        /// Attempts made.
        attempts: u32,
        /// The last error's kind.
        kind: ErrorKind,
        /// The last error's message.
        message: String,
    },
    /// The workflow-level deadline passed.
    Deadline,
    /// An operator cancelled the run.
    Cancelled,
}

/// What the driver must do next. Every rule is decided here: the driver only journals,
/// runs actions and compensations, and reports their results as events.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Journal this event and apply it: a decision the machine made (a task opened with
    /// its assignee and deadline, an escalation, an auto-decision, an expiry, a skip, a
    /// dry-run proposal, the run's deadline, an interrupted effect whose outcome is
    /// unknown).
    Journal(Event),
    /// Journal `AttemptStarted` for this attempt, then run it. With `reconcile`, the
    /// step's reconcile function is asked first whether the effect already happened.
    Attempt {
        /// The step.
        step: usize,
        /// The item, for a map step (journal `ItemStarted` instead).
        item: Option<usize>,
        /// The attempt, from 1 (an attempt a crash interrupted keeps its number).
        attempt: u32,
        /// Whether to reconcile before running the effect again.
        reconcile: bool,
    },
    /// Journal `CompensationStarted`, then run the compensation of a completed step (of
    /// one completed item, for a map step).
    Compensate {
        /// The step.
        step: usize,
        /// The item, for a map step.
        item: Option<usize>,
    },
    /// Journal `ChildCancelled`, then cancel the child run of a step: the run stopped.
    CancelChild {
        /// The step.
        step: usize,
        /// The child run.
        child: RunId,
    },
    /// The run was cancelled: drop this attempt's future (when it still runs here), then
    /// journal `settle`; with none (an external effect with a reconcile function), journal
    /// `AttemptStopped` and ask the reconcile function whether the effect happened, whose
    /// answer settles the step.
    Stop {
        /// The step.
        step: usize,
        /// The item, for a map step.
        item: Option<usize>,
        /// The attempt in flight.
        attempt: u32,
        /// How the attempt settles (`AttemptFailed` or `ItemFailed`).
        settle: Option<Event>,
    },
    /// The run reached a terminal status.
    Finish(Status),
}

/// The name recorded as the decider when `on_timeout: approve | reject` decides a task.
pub const TIMEOUT_DECIDER: &str = "workflow:on_timeout";

/// What `via` records for a decision made through a signed single-use link.
pub const VIA_LINK: &str = "link";

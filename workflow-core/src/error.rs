//! Errors: what a step returns ([`StepError`], classified by a bounded [`ErrorKind`]) and
//! what the engine's API returns.

use std::fmt;
use std::time::Duration;

pub use workflow_spec::ErrorKind;

/// The error a step action returns. Its [`ErrorKind`] decides whether it is retried.
///
/// ```
/// use workflow_core::{ErrorKind, StepError};
/// let e = StepError::transient("connection reset");
/// assert_eq!(e.kind(), ErrorKind::Unavailable);
/// let e = StepError::permanent("schema violation");
/// assert!(!e.kind().is_transient());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct StepError {
    kind: ErrorKind,
    message: String,
    retry_after: Option<Duration>,
}

impl StepError {
    /// An error of the given kind.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        StepError {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }

    /// A transient failure (kind `unavailable`): retried under the step's policy.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// A permanent failure (kind `internal`): never retried unless `retry_on` lists it.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// The dependency timed out (transient).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Timeout, message)
    }

    /// The dependency is unavailable: connection errors, 5xx (transient).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// The dependency rate-limited us; `retry_after` is honoured up to the policy's cap.
    pub fn rate_limited(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        StepError {
            retry_after,
            ..Self::new(ErrorKind::RateLimited, message)
        }
    }

    /// Bad input or output: schema violations (permanent, never retried).
    pub fn validation(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Validation, message)
    }

    /// Not allowed (permanent, never retried).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthorized, message)
    }

    /// The thing acted on does not exist (permanent).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// The request is unsafe to carry out automatically (permanent, never retried).
    pub fn unsafe_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsafe, message)
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The error's message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The delay the dependency asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl From<std::io::Error> for StepError {
    fn from(error: std::io::Error) -> Self {
        use std::io::ErrorKind as Io;
        let kind = match error.kind() {
            Io::TimedOut => ErrorKind::Timeout,
            Io::ConnectionRefused
            | Io::ConnectionReset
            | Io::ConnectionAborted
            | Io::NotConnected
            | Io::BrokenPipe
            | Io::Interrupted
            | Io::WouldBlock
            | Io::AddrInUse
            | Io::AddrNotAvailable
            | Io::UnexpectedEof => ErrorKind::Unavailable,
            Io::NotFound => ErrorKind::NotFound,
            Io::PermissionDenied => ErrorKind::Unauthorized,
            Io::InvalidInput | Io::InvalidData => ErrorKind::Validation,
            _ => ErrorKind::Internal,
        };
        StepError::new(kind, error.to_string())
    }
}

impl From<serde_json::Error> for StepError {
    fn from(error: serde_json::Error) -> Self {
        StepError::validation(error.to_string())
    }
}

impl From<tokio::time::error::Elapsed> for StepError {
    fn from(error: tokio::time::error::Elapsed) -> Self {
        StepError::timeout(error.to_string())
    }
}

impl From<std::convert::Infallible> for StepError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

/// A run's identifier.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct RunId(pub u64);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run-{}", self.0)
    }
}

impl std::str::FromStr for RunId {
    type Err = std::num::ParseIntError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.strip_prefix("run-").unwrap_or(text).parse().map(RunId)
    }
}

/// Why a human decision was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// No such run.
    #[error("unknown run {0}")]
    UnknownRun(RunId),
    /// The run has no human step of that name, or the task is not open yet.
    #[error("run {run} has no open task `{step}`")]
    UnknownTask {
        /// The run.
        run: RunId,
        /// The step named.
        step: String,
    },
    /// The task was decided before; the first decision stands.
    #[error("task `{step}` of {run} was already decided by {by}")]
    AlreadyDecided {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
        /// Who decided first.
        by: String,
    },
    /// The deadline passed before the decision arrived.
    #[error("task `{step}` of {run} expired before the decision arrived")]
    Expired {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
    },
    /// The authorization hook did not admit this approver for the task's assignee.
    #[error("{by} may not decide task `{step}` assigned to {assignee}")]
    Unauthorized {
        /// The step.
        step: String,
        /// Who tried.
        by: String,
        /// Who the task is assigned to.
        assignee: String,
    },
    /// The decision does not deserialize into the step's decision type.
    #[error("the decision for `{step}` does not match its type: {message}")]
    WrongType {
        /// The step.
        step: String,
        /// The decode error.
        message: String,
    },
    /// The run is finished.
    #[error("{0} is finished")]
    Finished(RunId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// This person approved the task already; a quorum (`approvals: N`) needs distinct
    /// approvers.
    #[error("{by} approved task `{step}` already; it needs approvals from distinct people")]
    AlreadyApproved {
        /// The step.
        step: String,
        /// Who tried again.
        by: String,
    },
    /// The step has `self_approval: false` and this person started the run.
    #[error("{by} started this run and may not decide task `{step}` (`self_approval: false`)")]
    SelfApproval {
        /// The step.
        step: String,
        /// The run's initiator.
        by: String,
    },
    /// A delegation that cannot be made: to nobody, or to the current assignee.
    #[error("task `{step}` cannot be delegated: {reason}")]
    InvalidDelegate {
        /// The step.
        step: String,
        /// Why.
        reason: String,
    },
    /// This person approved towards the task's quorum and may not hand the rest of it on
    /// (they would choose who completes it).
    #[error("{by} approved task `{step}` already and may not delegate it: the rest of its quorum is for others to decide")]
    ApproverDelegating {
        /// The step.
        step: String,
        /// Who tried to delegate.
        by: String,
    },
    /// The delegate is not someone the authorizer admits for the step's assignee or its
    /// escalation target.
    #[error("task `{step}` cannot be delegated to {to}: they are not admitted for its assignee or escalation target")]
    DelegateNotAdmitted {
        /// The step.
        step: String,
        /// The delegate named.
        to: String,
    },
    /// The delegate approved towards the task's quorum already.
    #[error("task `{step}` cannot be delegated to {to}: they approved it already")]
    DelegateApproved {
        /// The step.
        step: String,
        /// The delegate named.
        to: String,
    },
    /// The step has `self_approval: false` and the delegate started the run.
    #[error(
        "task `{step}` cannot be delegated to {to}: they started the run (`self_approval: false`)"
    )]
    DelegateIsInitiator {
        /// The step.
        step: String,
        /// The delegate named.
        to: String,
    },
}

impl DecisionError {
    /// A stable code for the refusal, for APIs and the journal: `unknown_run`,
    /// `unknown_task`, `already_decided`, `expired`, `unauthorized`, `wrong_type`,
    /// `finished`, `store`, `already_approved`, `self_approval`, `invalid_delegate`,
    /// `approver_may_not_delegate`, `delegate_not_admitted`, `delegate_approved`,
    /// `delegate_is_initiator`.
    pub fn code(&self) -> &'static str {
        match self {
            DecisionError::UnknownRun(_) => "unknown_run",
            DecisionError::UnknownTask { .. } => "unknown_task",
            DecisionError::AlreadyDecided { .. } => "already_decided",
            DecisionError::Expired { .. } => "expired",
            DecisionError::Unauthorized { .. } => "unauthorized",
            DecisionError::WrongType { .. } => "wrong_type",
            DecisionError::Finished(_) => "finished",
            DecisionError::Store(_) => "store",
            DecisionError::AlreadyApproved { .. } => "already_approved",
            DecisionError::SelfApproval { .. } => "self_approval",
            DecisionError::InvalidDelegate { .. } => "invalid_delegate",
            DecisionError::ApproverDelegating { .. } => "approver_may_not_delegate",
            DecisionError::DelegateNotAdmitted { .. } => "delegate_not_admitted",
            DecisionError::DelegateApproved { .. } => "delegate_approved",
            DecisionError::DelegateIsInitiator { .. } => "delegate_is_initiator",
        }
    }
}

/// Why an event sent into a run was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// No such run.
    #[error("unknown run {0}")]
    UnknownRun(RunId),
    /// The run's workflow has no event step of that name.
    #[error("{run} has no event step `{step}`")]
    UnknownEvent {
        /// The run.
        run: RunId,
        /// The step named.
        step: String,
    },
    /// The payload does not deserialize into the event's type; nothing was kept.
    #[error("the payload for event `{step}` does not match its type: {message}")]
    WrongType {
        /// The step.
        step: String,
        /// The decode error.
        message: String,
    },
    /// The step took this very event before: the same event id is taken once.
    #[error("event `{event_id}` for `{step}` of {run} was taken already")]
    Duplicate {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
        /// The sender's event id.
        event_id: String,
    },
    /// The step does not wait any more (it timed out, was skipped, or took another event).
    #[error("`{step}` of {run} does not wait for an event: {reason}")]
    NotWaiting {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
        /// Why.
        reason: String,
    },
    /// The run is finished.
    #[error("{0} is finished")]
    Finished(RunId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EventError {
    /// A stable code: `unknown_run`, `unknown_event`, `wrong_type`, `duplicate`,
    /// `not_waiting`, `finished`, `store`.
    pub fn code(&self) -> &'static str {
        match self {
            EventError::UnknownRun(_) => "unknown_run",
            EventError::UnknownEvent { .. } => "unknown_event",
            EventError::WrongType { .. } => "wrong_type",
            EventError::Duplicate { .. } => "duplicate",
            EventError::NotWaiting { .. } => "not_waiting",
            EventError::Finished(_) => "finished",
            EventError::Store(_) => "store",
        }
    }
}

/// Why a run did not produce its outputs, or an engine call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// No such run.
    #[error("unknown run {0}")]
    UnknownRun(RunId),
    /// The run belongs to another workflow than the one asked for.
    #[error("{run} is a run of `{actual}`, not `{expected}`")]
    WrongWorkflow {
        /// The run.
        run: RunId,
        /// The workflow asked for.
        expected: String,
        /// The run's workflow.
        actual: String,
    },
    /// The workflow was not registered with the engine.
    #[error("workflow `{0}` is not registered with this engine")]
    NotRegistered(String),
    /// A step failed under `abort`; compensations have run.
    #[error("{run} failed at step `{step}` after {attempts} attempt(s): {error}")]
    Failed {
        /// The run.
        run: RunId,
        /// The failed step.
        step: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        error: StepError,
    },
    /// The run was cancelled by an operator.
    #[error("{0} was cancelled")]
    Cancelled(RunId),
    /// The run was started under another version of the spec and is parked.
    #[error(
        "{run} was started under spec {recorded} but `{workflow}` is now {current}; it is parked"
    )]
    SpecChanged {
        /// The run.
        run: RunId,
        /// The workflow.
        workflow: String,
        /// The fingerprint the run recorded.
        recorded: String,
        /// The fingerprint of the registered workflow.
        current: String,
    },
    /// A dry run, or a step the outputs need, is absent.
    #[error("{run} has no output for step `{step}` (it was skipped or proposed in a dry run)")]
    Absent {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
    },
    /// A journaled value does not deserialize into the current types.
    #[error("{run}: the journaled value of `{step}` does not match its type: {message}")]
    Decode {
        /// The run.
        run: RunId,
        /// The step.
        step: String,
        /// The decode error.
        message: String,
    },
    /// The workflow's deadline passed.
    #[error("{0} passed its deadline")]
    DeadlineExceeded(RunId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The spec or registration is invalid.
    #[error("invalid workflow: {0}")]
    InvalidSpec(String),
    /// The run is already finished.
    #[error("{0} is already finished")]
    Finished(RunId),
    /// Only failed runs can be retried from the dead-letter list.
    #[error("{0} has not failed; only failed runs can be retried")]
    NotFailed(RunId),
    /// Only parked runs can be restarted under a new spec.
    #[error("{0} is not parked")]
    NotParked(RunId),
    /// The run failed because an interrupted external effect's outcome is unknown, and its
    /// previous owner may still be inside that effect until `safe_after` (its lease ended,
    /// plus the self-fencing margin). Retrying before then is refused unless insisted.
    #[error(
        "{run}: its previous owner may still be inside the interrupted effect until {}; \
         retry after that, or insist",
        crate::clock::rfc3339(*safe_after)
    )]
    TooSoon {
        /// The run.
        run: RunId,
        /// From when a retry is safe.
        safe_after: crate::clock::Timestamp,
    },
    /// The engine shut down before the run finished.
    #[error("the engine stopped before {0} finished")]
    EngineStopped(RunId),
}

/// Why a generated call could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// A required upstream output is absent.
    #[error("the output of step #{0} is absent")]
    Absent(usize),
    /// A journaled value does not deserialize into the current types.
    #[error("the journaled output of step #{step} does not match its type: {message}")]
    Decode {
        /// The step whose value failed.
        step: usize,
        /// The decode error.
        message: String,
    },
    /// The step has no such call (no compensation, no reconcile, not an action).
    #[error("step #{0} has no such call")]
    NoSuchCall(usize),
    /// A call of a map step was made without the item it is for ([`OutputSource::item`](crate::OutputSource::item)).
    #[error("step #{0} maps over items and was called without one")]
    NoItem(usize),
    /// The step failed.
    #[error(transparent)]
    Step(#[from] StepError),
}

/// What can go wrong in a store. Every variant names what it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The run does not exist.
    #[error("unknown run {0}")]
    UnknownRun(RunId),
    /// The journal is not the length the writer expected: someone else appended first.
    #[error("{run}: journal entry {seq} was written by someone else")]
    Conflict {
        /// The run.
        run: RunId,
        /// The sequence number expected.
        seq: u64,
    },
    /// The writer no longer owns the run (its lease lapsed and another owner took over).
    #[error("{run}: no longer owned by {owner} (its lease was taken over); the write was refused")]
    Fenced {
        /// The run.
        run: RunId,
        /// The owner whose write was refused.
        owner: String,
    },
    /// The run is finished: it takes no more messages.
    #[error("{0} is finished")]
    Finished(RunId),
    /// The store file is not a valid store, or SQLite found it damaged (it is left
    /// untouched).
    #[error("{path} is not a workflow store or is corrupt: {reason}")]
    CorruptFile {
        /// The file.
        path: String,
        /// What was found.
        reason: String,
    },
    /// A journal entry is damaged: its checksum does not match what it says, or it is
    /// missing from the middle of the journal. The run is not driven on a damaged history.
    #[error("{run}: journal entry {seq} is damaged (its checksum does not match); the run is not driven")]
    Corrupt {
        /// The run.
        run: RunId,
        /// The entry.
        seq: u64,
    },
    /// A stored row other than a journal entry is damaged: a run's row, a spec, a dead
    /// letter or an inbox message (`table` and `key` name it).
    #[error("the {table} row {key} is damaged (its checksum does not match)")]
    CorruptRow {
        /// The kind of row: `runs`, `specs`, `dead_letters`, `inbox`.
        table: String,
        /// Which one: a run id, a fingerprint, a message id.
        key: String,
    },
    /// The disk is full: nothing of the write was kept. Writes succeed again once space is
    /// freed.
    #[error("{path}: the disk is full; the write was not made")]
    DiskFull {
        /// The file.
        path: String,
    },
    /// The store cannot be written: a read-only file system, directory or file.
    #[error("{path} cannot be written: {reason}")]
    ReadOnly {
        /// The file.
        path: String,
        /// Why, as the system said it.
        reason: String,
    },
    /// The store's file or directory may not be read or written by this process.
    #[error("{path}: permission denied: {reason}")]
    PermissionDenied {
        /// The file.
        path: String,
        /// Why, as the system said it.
        reason: String,
    },
    /// The store file stayed locked by another process past the wait limit.
    #[error("{path} is locked by another process (waited {waited_ms} ms)")]
    Locked {
        /// The file.
        path: String,
        /// How long we waited.
        waited_ms: u64,
    },
    /// A journal row does not deserialize into the current types.
    #[error("{run}: journal entry {seq} does not deserialize: {reason}")]
    BadRow {
        /// The run.
        run: RunId,
        /// The entry.
        seq: u64,
        /// The decode error.
        reason: String,
    },
    /// The store was written by a newer version of this library.
    #[error("{path} has schema version {found}, newer than this library's {supported}")]
    NewerSchema {
        /// The file or database.
        path: String,
        /// The version found.
        found: u32,
        /// The newest version this library knows.
        supported: u32,
    },
    /// The store's stored functions were written by a newer version of this library: this
    /// worker would call functions whose meaning it does not know, so it refuses the store
    /// and leaves it as it is.
    #[error(
        "{path} has stored functions of revision {found}, newer than this library's {supported}: \
         upgrade this worker to the version that wrote them"
    )]
    NewerFunctions {
        /// The database and schema.
        path: String,
        /// The revision found.
        found: u32,
        /// The newest revision this library knows.
        supported: u32,
    },
    /// The database server cannot be reached.
    #[error("cannot reach the database at {target}: {reason}")]
    Unreachable {
        /// Where: host and port (never a password).
        target: String,
        /// Why.
        reason: String,
    },
    /// The store refused a write for good: trying it again would get the same answer (a
    /// constraint or check violation, a value too long for its column, a statement the
    /// database cannot run). An engine parks the run with this reason instead of retrying.
    #[error("the store refused the write for good: {reason}")]
    Rejected {
        /// What the store said.
        reason: String,
    },
    /// Any other I/O or database failure: it may clear when tried again.
    #[error("store failure: {0}")]
    Io(String),
}

impl StoreError {
    /// Whether trying the same call again may succeed without anyone touching the run or
    /// the store's data: a full disk that frees, a file system or a server that comes back,
    /// a lock that is released, a transient database error. Final errors (a rejected
    /// write, damage, a fenced or conflicting write, an unknown run) are not.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            StoreError::DiskFull { .. }
                | StoreError::ReadOnly { .. }
                | StoreError::PermissionDenied { .. }
                | StoreError::Locked { .. }
                | StoreError::Unreachable { .. }
                | StoreError::Io(_)
        )
    }
}

//! Where runs and their journals live: the [`Store`] trait, an in-memory store for tests
//! ([`MemoryStore`]) and the embedded default, one SQLite file (`SqliteStore`).
//!
//! The trait is shaped for a store shared by many workers: appends name the sequence
//! number they expect (a conflicting writer gets [`StoreError::Conflict`] instead of
//! interleaving), and unfinished runs are *claimed* by an owner before they are resumed.

mod memory;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use memory::MemoryStore;
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};

use serde::{Deserialize, Serialize};

use crate::error::{ErrorKind, RunId};
use crate::journal::{Event, Timestamp};
use crate::workflow::BoxFuture;

/// What can go wrong in a store. Every variant names what it is about.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The run does not exist.
    #[error("unknown run {0}")]
    UnknownRun(RunId),
    /// Another writer appended to the run first (expected sequence number taken).
    #[error("{run}: journal entry {seq} was written by someone else")]
    Conflict {
        /// The run.
        run: RunId,
        /// The sequence number expected.
        seq: u64,
    },
    /// The store file is not a valid store (it is left untouched).
    #[error("{path} is not a workflow store or is corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What was found.
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
    /// The file was written by a newer version of this library.
    #[error("{path} has schema version {found}, newer than this library's {supported}")]
    NewerSchema {
        /// The file.
        path: String,
        /// The version found.
        found: u32,
        /// The newest version this library knows.
        supported: u32,
    },
    /// Any other I/O or database failure.
    #[error("store failure: {0}")]
    Io(String),
}

/// The durable status of a run, as listed by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Not finished: being driven, waiting on a person or a timer, or interrupted.
    Running,
    /// Every step settled.
    Completed,
    /// Aborted after compensations; a dead letter was recorded.
    Failed,
    /// Cancelled by an operator.
    Cancelled,
    /// Not driven: its spec changed since it started (see the run's note).
    Parked,
}

impl RunStatus {
    /// The name used in the store and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Parked => "parked",
        }
    }

    /// Parses [`RunStatus::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        [
            RunStatus::Running,
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
            RunStatus::Parked,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }

    /// Whether the run is over.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

/// A run to create, with its first journal entry.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// The workflow's name.
    pub workflow: &'a str,
    /// The spec fingerprint.
    pub fingerprint: &'a str,
    /// The start's idempotency key: a second create with it returns the first run.
    pub idempotency_key: Option<&'a str>,
    /// The `RunStarted` event, journaled as entry 0 in the same transaction.
    pub started: &'a Event,
    /// When.
    pub at: Timestamp,
}

/// The answer to [`Store::create_run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// A new run.
    New(RunId),
    /// The idempotency key was used before: this is that run.
    Existing(RunId),
}

impl Created {
    /// The run either way.
    pub fn id(self) -> RunId {
        match self {
            Created::New(id) | Created::Existing(id) => id,
        }
    }
}

/// A run's row, without its journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run.
    pub id: RunId,
    /// Its workflow.
    pub workflow: String,
    /// The spec fingerprint it started under.
    pub fingerprint: String,
    /// Its status.
    pub status: RunStatus,
    /// The start's idempotency key.
    pub idempotency_key: Option<String>,
    /// A note: why it is parked or failed.
    pub note: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it last changed.
    pub updated_at: Timestamp,
}

/// A run with its journal.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The run's row.
    pub record: RunRecord,
    /// Its journal, in order.
    pub events: Vec<Event>,
}

/// A run that failed for good, with what an operator needs to act on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The run.
    pub run: RunId,
    /// Its workflow.
    pub workflow: String,
    /// The failed step (empty for a deadline or a cancellation).
    pub step: String,
    /// Attempts made.
    pub attempts: u32,
    /// The error's kind.
    pub kind: ErrorKind,
    /// The error's message.
    pub message: String,
    /// The run's trace id.
    pub trace_id: String,
    /// When.
    pub at: Timestamp,
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// At most this many, newest first (all when `None`).
    pub limit: Option<usize>,
}

/// Durable storage of runs, journals and dead letters.
///
/// Every method is atomic. Implementations must make an `append` durable before its future
/// resolves: the engine acts on an event only after that.
pub trait Store: Send + Sync + 'static {
    /// Creates a run with its first event, or returns the run an idempotency key names.
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>>;

    /// Appends `event` as entry `seq` of the run's journal. Fails with
    /// [`StoreError::Conflict`] when that entry exists.
    fn append<'a>(
        &'a self,
        run: RunId,
        seq: u64,
        event: &'a Event,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Sets a run's status and note; with a dead letter, records it in the same step.
    fn set_status<'a>(
        &'a self,
        run: RunId,
        status: RunStatus,
        note: Option<&'a str>,
        dead_letter: Option<&'a DeadLetter>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// A run with its journal.
    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>>;

    /// Runs matching a filter, newest first.
    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>>;

    /// Claims the unfinished (`running`) runs of the given workflows for `owner` and
    /// returns them. A single-process store hands every one to its caller; a shared store
    /// hands each run to one owner at a time.
    fn claim_unfinished<'a>(
        &'a self,
        owner: &'a str,
        workflows: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>>;

    /// Every dead letter, newest first.
    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>>;

    /// Removes the dead letter of a run (after a retry or a cancellation).
    fn remove_dead_letter(&self, run: RunId) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Records the spec a fingerprint stands for (as JSON), so tools without the
    /// workflow's code (the CLI) can draw and explain its runs. Written once per
    /// fingerprint; later writes of the same fingerprint change nothing.
    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        spec_json: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Whether other processes may append to journals in this store (a file or a server),
    /// so runs waiting on a person should look for decisions written elsewhere.
    fn shared(&self) -> bool {
        false
    }

    /// The unfinished runs whose journals changed at or after `since` (by their
    /// `updated_at`): how hibernating runs learn of decisions other processes wrote.
    /// Stores that only this process writes need not implement it.
    fn changed_since(&self, _since: Timestamp) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// The spec JSON recorded for a fingerprint.
    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>>;
}

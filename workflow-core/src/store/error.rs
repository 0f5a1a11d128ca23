//! What can go wrong in a store ([`StoreError`]), and what retrying would do about it.

use crate::error::RunId;

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

//! How a store opens its file: [`SqliteOptions`] and [`Synchronous`].

use std::time::Duration;

#[cfg(doc)]
use crate::SqliteStore;
#[cfg(doc)]
use workflow_core::store::StoreError;

/// When the writer commits. `Full` is the default: a commit survives a power loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Synchronous {
    /// Sync the WAL on every commit (`PRAGMA synchronous = FULL`): durable across power
    /// loss.
    #[default]
    Full,
    /// Sync at checkpoints only (`NORMAL`): survives a process crash, but the last commits
    /// may roll back after a power loss.
    Normal,
    /// Never sync (`OFF`): for tests and throwaway data.
    Off,
}

impl Synchronous {
    pub(crate) fn pragma_value(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
            Synchronous::Off => "OFF",
        }
    }
}

/// How [`SqliteStore::open_with`] opens the file.
///
/// ```
/// use std::time::Duration;
/// use workflow_sqlite::{SqliteOptions, Synchronous};
///
/// let options = SqliteOptions {
///     synchronous: Synchronous::Normal,
///     busy_timeout: Duration::from_millis(500),
///     ..SqliteOptions::default()
/// };
/// assert!(options.quick_check);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// When commits reach the disk ([`Synchronous::Full`] by default).
    pub synchronous: Synchronous,
    /// How long to wait for a file locked by another connection before failing with
    /// [`StoreError::Locked`] (5 seconds by default).
    pub busy_timeout: Duration,
    /// Whether `open` runs `PRAGMA quick_check` on an existing file before using it (on
    /// by default). It reads the whole file: turn it off for very large stores.
    pub quick_check: bool,
    /// The most write requests committed in one transaction (512 by default; at least 1).
    pub max_batch: usize,
    /// The largest the file may grow, in bytes (no limit by default). Past it a write
    /// fails with [`StoreError::DiskFull`], as on a full disk; engines wait and retry
    /// until it is raised ([`SqliteStore::set_max_size`]) or space is freed.
    pub max_size: Option<u64>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            quick_check: true,
            max_batch: 512,
            max_size: None,
        }
    }
}

//! The `Store` conformance suite's subject for this store (feature `test-util`).

use std::path::PathBuf;
use std::sync::Arc;

use workflow_conformance::{DamageEntry, Subject};
use workflow_core::store::StoreError;

use crate::{SqliteOptions, SqliteStore};

/// A SQLite store opened at `path`, damaged by a raw `UPDATE` through a second
/// connection to the file (a trailing space after the entry's JSON: it still decodes to
/// the same event, so only its checksum tells).
pub fn subject(path: impl Into<PathBuf>, options: SqliteOptions) -> Result<Subject, StoreError> {
    let path = path.into();
    let store = Arc::new(SqliteStore::open_with(&path, options)?);
    let damage: DamageEntry = Arc::new(move |run, seq| {
        let conn = rusqlite::Connection::open(&path).expect("open the store file");
        let changed = conn
            .execute(
                "UPDATE journal SET event = event || ' ' WHERE run_id = ?1 AND seq = ?2",
                rusqlite::params![run.0, seq],
            )
            .expect("damage an entry");
        assert_eq!(changed, 1, "{run} has no entry {seq}");
        Box::pin(std::future::ready(()))
    });
    Ok(Subject::new(store, damage))
}

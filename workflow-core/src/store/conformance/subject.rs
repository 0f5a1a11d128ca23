//! What the suite checks: a store, and a way to damage what it stored.

use std::fmt;
use std::sync::Arc;

use crate::error::RunId;
use crate::store::{MemoryStore, Store};
use crate::workflow::BoxFuture;

/// Damages journal entry `seq` of `run` the way a bad disk would: the stored payload
/// changes and its checksum stays as it was. It panics when it cannot.
pub type DamageEntry = Arc<dyn Fn(RunId, u64) -> BoxFuture<'static, ()> + Send + Sync>;

/// A store under test and its harness's way to damage it.
#[derive(Clone)]
pub struct Subject {
    /// The store.
    pub store: Arc<dyn Store>,
    /// Damages one of its journal entries.
    pub damage: DamageEntry,
}

impl fmt::Debug for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subject").finish_non_exhaustive()
    }
}

impl Subject {
    /// A store and its damage hook.
    pub fn new(store: Arc<dyn Store>, damage: DamageEntry) -> Subject {
        Subject { store, damage }
    }

    /// A fresh [`MemoryStore`], damaged through its test hook
    /// ([`MemoryStore::damage_entry`]).
    pub fn memory() -> Subject {
        let store = Arc::new(MemoryStore::new());
        let hook = Arc::clone(&store);
        Subject::new(
            store,
            Arc::new(move |run, seq| {
                hook.damage_entry(run, seq);
                Box::pin(std::future::ready(()))
            }),
        )
    }

    /// A SQLite store opened at `path`, damaged by a raw `UPDATE` through a second
    /// connection to the file (a trailing space after the entry's JSON: it still decodes
    /// to the same event, so only its checksum tells).
    #[cfg(feature = "sqlite")]
    pub fn sqlite(
        path: impl Into<std::path::PathBuf>,
        options: crate::store::SqliteOptions,
    ) -> Result<Subject, crate::store::StoreError> {
        let path = path.into();
        let store = Arc::new(crate::store::SqliteStore::open_with(&path, options)?);
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

    /// A PostgreSQL store in `schema`, damaged by a raw `UPDATE` on a connection of its
    /// own (a trailing space after the entry's JSON, as for SQLite).
    #[cfg(feature = "postgres")]
    pub async fn postgres(schema: &crate::store::pg_testing::Schema) -> Subject {
        let store = Arc::new(schema.store().await);
        let schema = schema.clone();
        let damage: DamageEntry = Arc::new(move |run, seq| {
            let schema = schema.clone();
            Box::pin(async move { schema.damage_entry(run, seq).await })
        });
        Subject::new(store, damage)
    }
}

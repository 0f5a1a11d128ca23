//! What the suite checks: a store, and a way to damage what it stored.

use std::fmt;
use std::sync::Arc;

use workflow_core::store::{MemoryStore, Store};
use workflow_core::BoxFuture;
use workflow_core::RunId;

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
}

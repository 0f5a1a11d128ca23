//! The process the retention test kills: it purges a SQLite store's finished runs that
//! finished before `BEFORE`, `BATCH` runs per batch (each one transaction), and prints a
//! line after every batch so the test knows when to kill it.
//!
//! Usage: `purge_worker STORE BEFORE BATCH`.

use std::error::Error;
use std::io::Write as _;

use workflow_core::search::purge_all;
use workflow_core::store::PurgeFilter;
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, before, batch] = args.as_slice() else {
        return Err("usage: purge_worker STORE BEFORE BATCH".into());
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = SqliteStore::open_with(
        path,
        SqliteOptions {
            synchronous: Synchronous::Normal,
            quick_check: false,
            ..SqliteOptions::default()
        },
    )?;
    let filter = PurgeFilter {
        before: before.parse()?,
        limit: batch.parse()?,
        ..PurgeFilter::default()
    };
    runtime.block_on(async {
        let mut out = std::io::stdout().lock();
        purge_all(&store, filter, None, |batch| {
            let _ = writeln!(out, "purged {}", batch.len());
            let _ = out.flush();
        })
        .await
    })?;
    Ok(())
}

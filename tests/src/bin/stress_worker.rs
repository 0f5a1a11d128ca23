//! One worker process of the flow-control stress tests (`tests/flow_stress_pg.rs`,
//! `tests/flow_stress_sqlite.rs`): an engine that registers the `Stressed` workflow
//! (`src/stress/mod.rs`), admits the runs the test queued and drives them, its actions
//! writing to the observer's table, until the test kills it or goes away.
//!
//! Usage: `stress_worker pg URL SCHEMA NAME LEASE_MS` or
//! `stress_worker sqlite STORE_FILE NAME` (the observer's file beside the store's).

use std::error::Error;
use std::path::Path;
use std::time::Duration;

use tests::stress::{observer, Observer, Stressed};
use tests::workers;
use workflow_core::prelude::*;
use workflow_sqlite::{SqliteOptions, SqliteStore};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let parent = workers::parent_pid();
    let args: Vec<String> = std::env::args().collect();
    let (engine, observer) = match args.as_slice() {
        [_, store, url, schema, name, lease_ms] if store == "pg" => {
            let store = tests::workers::pg_store(url, schema).await?;
            let engine = Engine::builder()
                .store(store)
                .owner(name.clone())
                .lease(Duration::from_millis(lease_ms.parse()?))
                .build();
            (engine, Observer::postgres(url, schema).await?)
        }
        [_, store, path, name] if store == "sqlite" => {
            let path = Path::new(path);
            let store = SqliteStore::open_with(path, SqliteOptions::default())?;
            let engine = Engine::builder().store(store).owner(name.clone()).build();
            (engine, Observer::sqlite(&observer::sqlite_path(path))?)
        }
        _ => {
            return Err(
                "usage: stress_worker pg URL SCHEMA NAME LEASE_MS | sqlite FILE NAME".into(),
            )
        }
    };
    engine.register::<Stressed>(observer)?;
    engine.resume_all().await?;
    println!("ready {}", engine.owner());
    // Admit and drive runs until killed; a worker whose test went away stops by itself.
    workers::serve_until_orphaned(parent, Duration::from_secs(600)).await;
    Ok(())
}

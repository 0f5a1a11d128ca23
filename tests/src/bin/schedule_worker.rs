//! One worker process of the PostgreSQL schedule chaos test (`tests/schedules_pg.rs`): an
//! engine on `PgStore` with the `Ticked` workflow registered, so its scheduler fires the
//! schedules of `Ticked` that the test created in the store, and drives their runs, until
//! the test kills it.
//!
//! Usage: `schedule_worker URL SCHEMA NAME LEASE_MS`.

use std::error::Error;
use std::time::Duration;

use workflow_core::prelude::*;
use workflow_core::Tick;

async fn record(tick: Tick) -> Result<u64, StepError> {
    Ok(tick.scheduled)
}

workflow! {
    /// One run per tick of a schedule; its output is the tick's scheduled time.
    pub workflow Ticked(tick: Tick) {
        step record -> u64 { action: record(tick) }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let parent = tests::workers::parent_pid();
    let args: Vec<String> = std::env::args().collect();
    let [_, url, schema, name, lease_ms] = args.as_slice() else {
        return Err("usage: schedule_worker URL SCHEMA NAME LEASE_MS".into());
    };
    let store = tests::workers::pg_store(url, schema).await?;
    let engine = Engine::builder()
        .store(store)
        .owner(name.clone())
        .lease(Duration::from_millis(lease_ms.parse()?))
        .build();
    engine.register::<Ticked>(())?;
    engine.resume_all().await?;
    // Starts the scheduler: from now on this process fires due ticks.
    let _ = engine.schedules();
    println!("ready {name}");
    // Fire and drive until the test stops this process (at most five minutes), or its test
    // went away.
    tests::workers::serve_until_orphaned(parent, Duration::from_secs(300)).await;
    Ok(())
}

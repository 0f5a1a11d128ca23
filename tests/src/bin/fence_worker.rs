//! One worker process of the PostgreSQL fencing test: an engine on `PgStore` with the
//! `Notify` workflow (`src/fence.rs`). With `start` it starts the test's one run; with
//! `take` it only takes over runs. Either way it then keeps driving runs until its test
//! goes away.
//!
//! Usage: `fence_worker URL SCHEMA start|take LEASE_MS`.

use std::error::Error;
use std::time::Duration;

use tests::fence::{Notifier, Notify, NotifyInput};
use workflow_core::prelude::*;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, schema, role, lease_ms] = args.as_slice() else {
        return Err("usage: fence_worker URL SCHEMA start|take LEASE_MS".into());
    };
    let store = tests::workers::pg_store(url, schema).await?;
    let notifier = Notifier::open(url, schema).await?;
    let engine = Engine::builder()
        .store(store)
        .owner(format!("worker-{role}"))
        .lease(Duration::from_millis(lease_ms.parse()?))
        .build();
    engine.register::<Notify>(notifier)?;
    engine.resume_all().await?;
    if role == "start" {
        let run = engine
            .start_with::<Notify>(
                NotifyInput { user: "u".into() },
                StartOptions::key("notify-1"),
            )
            .await?;
        println!("started {}", run.id());
    }
    println!("ready {}", engine.owner());
    // Drive runs until the test stops this process (at most two minutes).
    tokio::time::sleep(Duration::from_secs(120)).await;
    Ok(())
}

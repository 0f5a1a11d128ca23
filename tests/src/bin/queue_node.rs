//! One process of the PostgreSQL queued-starts test: with `intake N` an intake-only engine
//! that queues jobs 0..N (and job 0 a second time, which must name the same run), prints
//! `queued N` and stays up without driving anything; with `worker NAME` a worker that
//! admits at most three live runs at a time and drives them until its test goes away.
//!
//! Usage: `queue_node URL SCHEMA intake N | worker NAME LEASE_MS`.

use std::error::Error;
use std::time::Duration;

use tests::queue::{Job, JobInput, Node};
use workflow_core::prelude::*;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, schema, role, arg, rest @ ..] = args.as_slice() else {
        return Err("usage: queue_node URL SCHEMA intake N | worker NAME LEASE_MS".into());
    };
    let store = tests::workers::pg_store(url, schema).await?;
    // The engine is kept to the end: a dropped engine stops admitting and taking over
    // runs as soon as the runs it drives have finished.
    let _engine = match role.as_str() {
        "intake" => {
            let engine = Engine::builder()
                .store(store)
                .owner("intake")
                .intake_only()
                .build();
            let count: u32 = arg.parse()?;
            let mut first = None;
            for n in 0..count {
                let run = engine
                    .enqueue::<Job>(JobInput { n }, StartOptions::key(format!("job-{n}")))
                    .await?;
                first.get_or_insert(run.id());
            }
            let again = engine
                .enqueue::<Job>(JobInput { n: 0 }, StartOptions::key("job-0"))
                .await?;
            if Some(again.id()) != first || again.was_created() {
                return Err("a repeated key made a second run".into());
            }
            println!("queued {count}");
            engine
        }
        "worker" => {
            let lease_ms: u64 = rest.first().ok_or("no lease")?.parse()?;
            let engine = Engine::builder()
                .store(store)
                .owner(arg.clone())
                .lease(Duration::from_millis(lease_ms))
                .max_live_runs(3)
                .build();
            engine.register::<Job>(Node { name: arg.clone() })?;
            engine.resume_all().await?;
            println!("ready {}", engine.owner());
            engine
        }
        other => return Err(format!("unknown role `{other}`").into()),
    };
    // Stay up until the test stops this process (at most two minutes).
    tokio::time::sleep(Duration::from_secs(120)).await;
    Ok(())
}

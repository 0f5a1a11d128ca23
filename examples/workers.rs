//! Three workers on one PostgreSQL database, and a run moving to another worker when its
//! owner is killed.
//!
//! This process starts three worker processes (itself, with `--worker`), each an engine on
//! the same database that starts a few invoices. It watches the store, kills (SIGKILL) the
//! worker that drives the most unfinished runs, and prints each of that worker's runs as
//! another worker takes it over, within one lease of the kill. Then it waits for every run
//! to complete and stops the workers with SIGTERM, on which each drains
//! (`Engine::drain`): it takes no more work, lets its attempts finish, hands its runs
//! over and exits.
//!
//! ```text
//! cargo run --example workers --features postgres -- --database-url postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! Options: `--database-url URL` (default `WORKFLOW_DATABASE_URL`, then
//! `postgres://postgres@127.0.0.1:5432/test`), `--schema NAME` (`workers_example`),
//! `--runs N` (6), `--lease-ms MS` (2000). Look at the runs afterwards with the CLI:
//! `cargo run -p workflow-cli -- runs list --store 'postgres://…/test?schema=workers_example'`.

use std::collections::HashMap;
use std::error::Error;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use examples::workers::{worker, WorkerConfig};
use workflow::store::{RunFilter, RunStatus, Store};
use workflow::RunId;
use workflow::{PgOptions, PgStore};

const WORKERS: usize = 3;

struct Args {
    url: String,
    schema: String,
    runs: u64,
    lease_ms: u64,
    worker: Option<String>,
}

fn parse() -> Result<Args, Box<dyn Error>> {
    let mut args = Args {
        url: std::env::var("WORKFLOW_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned()),
        schema: "workers_example".to_owned(),
        runs: 6,
        lease_ms: 2_000,
        worker: None,
    };
    let mut list = std::env::args().skip(1);
    while let Some(flag) = list.next() {
        let mut value = || list.next().ok_or(format!("`{flag}` needs a value"));
        match flag.as_str() {
            "--database-url" => args.url = value()?,
            "--schema" => args.schema = value()?,
            "--runs" => args.runs = value()?.parse()?,
            "--lease-ms" => args.lease_ms = value()?.parse()?,
            "--worker" => args.worker = Some(value()?),
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    Ok(args)
}

/// Sends SIGTERM to a worker (by `kill`, as a supervisor would).
fn terminate(child: &mut Child) {
    if matches!(child.try_wait(), Ok(None)) {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
}

/// The runs worker `index` starts: every invoice of this demo whose number falls to it.
fn starts(index: usize, runs: u64, batch: u32) -> Vec<(String, u64)> {
    (0..runs)
        .filter(|n| *n as usize % WORKERS == index)
        .map(|n| (format!("invoice-{batch}-{n}"), n))
        .collect()
}

fn spawn(args: &Args, index: usize, batch: u32) -> Result<Child, Box<dyn Error>> {
    let exe = std::env::current_exe()?;
    Ok(Command::new(exe)
        .args([
            "--database-url",
            &args.url,
            "--schema",
            &args.schema,
            "--runs",
            &args.runs.to_string(),
            "--lease-ms",
            &args.lease_ms.to_string(),
            "--worker",
            &format!("worker-{}:{batch}", index + 1),
        ])
        .spawn()?)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = parse()?;
    if let Some(name) = &args.worker {
        let (name, batch) = name.split_once(':').ok_or("--worker NAME:BATCH")?;
        let index: usize = name.trim_start_matches("worker-").parse::<usize>()? - 1;
        return worker(WorkerConfig {
            url: args.url.clone(),
            schema: args.schema.clone(),
            name: name.to_owned(),
            lease: Duration::from_millis(args.lease_ms),
            starts: starts(index, args.runs, batch.parse()?),
            step_time: Duration::from_millis(1_500),
        })
        .await;
    }

    let options = PgOptions {
        schema: args.schema.clone(),
        max_connections: 2,
        ..PgOptions::default()
    };
    let store = PgStore::connect_with(&args.url, options).await?;
    println!(
        "store: {} (schema {}), {WORKERS} workers, lease {} ms\n",
        store.target(),
        store.schema(),
        args.lease_ms
    );
    // Runs of earlier demos stay in the schema; this one's keys are its own.
    let batch = std::process::id();
    let mut children = Vec::new();
    for index in 0..WORKERS {
        children.push(spawn(&args, index, batch)?);
    }
    let keys: Vec<String> = (0..args.runs)
        .map(|n| format!("invoice-{batch}-{n}"))
        .collect();
    let result = watch(&store, &keys, &mut children).await;
    // The workers left are stopped as a supervisor stops them: SIGTERM, on which each
    // drains (hands its runs over and exits); SIGKILL only if one outlasts 20 s.
    for child in &mut children {
        terminate(child);
    }
    for child in &mut children {
        let deadline = Instant::now() + Duration::from_secs(20);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

/// This demo's runs, by id: their key, owner and status.
async fn ours(
    store: &PgStore,
    keys: &[String],
) -> Result<HashMap<RunId, (String, Option<String>, RunStatus)>, Box<dyn Error>> {
    let records = store.runs(RunFilter::default()).await?;
    Ok(records
        .into_iter()
        .filter(|r| r.idempotency_key.as_ref().is_some_and(|k| keys.contains(k)))
        .map(|r| {
            (
                r.id,
                (r.idempotency_key.unwrap_or_default(), r.owner, r.status),
            )
        })
        .collect())
}

async fn watch(
    store: &PgStore,
    keys: &[String],
    children: &mut [Child],
) -> Result<(), Box<dyn Error>> {
    let started = Instant::now();
    // Wait until every run exists and some are under way.
    let runs = loop {
        let runs = ours(store, keys).await?;
        if runs.len() == keys.len() && started.elapsed() > Duration::from_secs(2) {
            break runs;
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err("the workers did not start the runs within a minute".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut held: HashMap<String, Vec<RunId>> = HashMap::new();
    for (run, (_, owner, status)) in &runs {
        if let (Some(owner), RunStatus::Running) = (owner, status) {
            held.entry(owner.clone()).or_default().push(*run);
        }
    }
    let Some((victim, victim_runs)) = held.into_iter().max_by_key(|(_, runs)| runs.len()) else {
        return Err("no run is being driven".into());
    };
    let index: usize = victim.trim_start_matches("worker-").parse::<usize>()? - 1;
    children[index].kill()?;
    children[index].wait()?;
    let killed = Instant::now();
    let mut names: Vec<String> = victim_runs.iter().map(|r| r.to_string()).collect();
    names.sort();
    println!(
        "\n*** killed {victim} (SIGKILL), which drove {}\n",
        names.join(", ")
    );

    let mut moved: HashMap<RunId, String> = HashMap::new();
    loop {
        let runs = ours(store, keys).await?;
        for run in &victim_runs {
            if let Some((key, Some(owner), _)) = runs.get(run) {
                if *owner != victim && !moved.contains_key(run) {
                    println!(
                        "\n*** {run} ({key}) moved from {victim} to {owner}, {:.1} s after the kill\n",
                        killed.elapsed().as_secs_f64()
                    );
                    moved.insert(*run, owner.clone());
                }
            }
        }
        if runs
            .values()
            .all(|(_, _, status)| *status == RunStatus::Completed)
        {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Err("the runs did not complete within two minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "all {} runs completed; {} of {victim}'s {} run(s) were taken over by other workers",
        keys.len(),
        moved.len(),
        victim_runs.len()
    );
    Ok(())
}

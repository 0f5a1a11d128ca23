//! B17: what a workflow-level concurrency key costs. B5's ten-step chain of no-op steps,
//! with a key (`concurrency: { key: k, limit: 1 }`, run `i` on key `i % 1000`) against the
//! same chain without one, measured in the same run on the same store, in alternating
//! rounds (the order rotated), the ratio taken per round and its median reported. A
//! harness = false bench target, so `cargo test` never builds it:
//!
//! ```text
//! cargo bench -p benches --bench flow                  # sqlite, postgres, admissions
//! cargo bench -p benches --bench flow -- sqlite        # or postgres, admissions, depth
//! ```
//!
//! - `sqlite`, `postgres`: one engine on a fresh store (a SQLite file with the store's
//!   defaults, `synchronous = FULL`, under `CARGO_TARGET_TMPDIR`; a fresh schema of
//!   `WORKFLOW_TEST_DATABASE_URL` with 16 connections), `start` then `outputs()`:
//!   sequentially (one run at a time) and with 32 in flight. Target: the keyed chain costs
//!   at most 1.3× the plain one.
//! - `admissions`: PostgreSQL, two worker engines (each with its own pool of 8 connections,
//!   at most 16 live runs each: 32 in flight) admitting runs an intake engine queued
//!   beforehand, until all are done: admissions per second of keyed runs (2 per key, so
//!   half of them wait for their key), against queued runs without a key, same run.
//!
//! - `depth`: B17 at depth. A one-step workflow with a key (`concurrency: { key: k,
//!   limit: 4 }`, run `i` on key `i % keys`) against the same step without one: a queue of
//!   `depth` runs is written first by an intake engine (32 writers at once), then workers
//!   admit and drive them, and the rate of the first `B17_MEASURED` runs (500, or the
//!   whole queue if shallower) is taken from the workers' start to their last step. On
//!   SQLite (the store's defaults) one worker with 32 live runs, which queues the runs
//!   itself before it registers the workflow; on PostgreSQL two workers with 16 live runs
//!   each (8 connections each). For every store, depth and
//!   number of keys, rounds alternate the two (order rotated) on fresh stores, and the
//!   ratio keyed ÷ plain of each round's admitted runs per second is reported with its
//!   median. Target: ≥ 0.75 at every depth. The limit (4 per key) is above what the
//!   workers take at once over 10 keys (40 slots for 32 live runs), so the ratio is what
//!   admitting by key costs, not fewer runs in flight.
//!
//! ```text
//! cargo bench -p benches --bench flow -- depth                            # 200, 2 000
//! B17_DEPTHS=100000 B17_ROUNDS=1 cargo bench -p benches --bench flow -- depth   # long
//! ```
//!
//! Environment: `B17_RUNS` (runs per phase at 32 in flight, default 1000),
//! `B17_SEQUENTIAL` (runs per sequential phase, 200), `B17_ROUNDS` (3),
//! `B17_ADMISSIONS` (queued runs per admissions phase, 2000), `B17_DEPTHS` (queue depths
//! of `depth`, comma-separated, `200,2000`), `B17_KEYS` (key counts of `depth`,
//! `10,1000`), `B17_MEASURED` (runs timed per `depth` phase, 500), `B17_STORES`
//! (`sqlite,postgres`).

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use workflow_core::store::{RunFilter, RunStatus, Store};

use workflow_sqlite::SqliteStore;

use workflow_core::{workflow, Engine, RunError, StartOptions, StepError, Workflow};
use workflow_postgres::{PgOptions, PgStore};

#[path = "common/pg.rs"]
mod pg;

/// How many keys the keyed runs are spread over.
const KEYS: u32 = 1000;

async fn first(k: u32) -> Result<u32, StepError> {
    Ok(black_box(k) & 1)
}

async fn next(x: u32) -> Result<u32, StepError> {
    Ok(x.wrapping_add(1))
}

workflow! {
    /// B5's chain: ten no-op steps, each reading the previous one's output.
    workflow Plain(k: u32) {
        step s0 -> u32 { action: first(k), }
        step s1 -> u32 { action: next(s0), }
        step s2 -> u32 { action: next(s1), }
        step s3 -> u32 { action: next(s2), }
        step s4 -> u32 { action: next(s3), }
        step s5 -> u32 { action: next(s4), }
        step s6 -> u32 { action: next(s5), }
        step s7 -> u32 { action: next(s6), }
        step s8 -> u32 { action: next(s7), }
        step s9 -> u32 { action: next(s8), }
    }
}

workflow! {
    /// The same chain, one run in flight per key.
    workflow Keyed(k: u32) {
        concurrency: { key: k, limit: 1 },
        step s0 -> u32 { action: first(k), }
        step s1 -> u32 { action: next(s0), }
        step s2 -> u32 { action: next(s1), }
        step s3 -> u32 { action: next(s2), }
        step s4 -> u32 { action: next(s3), }
        step s5 -> u32 { action: next(s4), }
        step s6 -> u32 { action: next(s5), }
        step s7 -> u32 { action: next(s6), }
        step s8 -> u32 { action: next(s7), }
        step s9 -> u32 { action: next(s8), }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// One run of `W` on key `k`: start, then its outputs.
async fn one_run<W: Workflow>(engine: &Engine, input: W::Input) {
    let run = engine.start::<W>(input).await.expect("start");
    loop {
        match run.outputs().await {
            Ok(outputs) => break drop(black_box(outputs)),
            // A gated run admitted between `outputs()`'s read of its row (queued) and of
            // its gate (admitted) is answered `NotRegistered`; asking again waits for it.
            Err(RunError::NotRegistered(_)) => {}
            Err(error) => panic!("outputs: {error}"),
        }
    }
}

/// `runs` runs of `W`, `in_flight` at a time, run `i` on key `(offset + i) % KEYS`;
/// the seconds they took.
async fn drive<W: Workflow>(
    engine: &Engine,
    runs: u32,
    in_flight: usize,
    offset: u32,
    input: fn(u32) -> W::Input,
) -> f64 {
    let next = Arc::new(AtomicU32::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..in_flight.max(1) {
        let (engine, next) = (engine.clone(), Arc::clone(&next));
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= runs {
                    break;
                }
                one_run::<W>(&engine, input((offset + i) % KEYS)).await;
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a driver task");
    }
    started.elapsed().as_secs_f64()
}

fn plain(k: u32) -> PlainInput {
    PlainInput { k }
}

fn keyed(k: u32) -> KeyedInput {
    KeyedInput { k }
}

/// Rounds of both chains on `engine`, sequentially and at 32 in flight; prints a table
/// row per phase.
async fn with_and_without(label: &str, engine: &Engine) {
    let rounds = benches::setting("B17_ROUNDS", 3);
    let runs = benches::setting("B17_RUNS", 1000) as u32;
    let sequential = benches::setting("B17_SEQUENTIAL", 200) as u32;
    // Warm up both.
    drive::<Plain>(engine, 20, 4, 0, plain).await;
    drive::<Keyed>(engine, 20, 4, 0, keyed).await;
    let mut offset = 100;
    for (phase, runs, in_flight) in [("sequential", sequential, 1), ("32 in flight", runs, 32)] {
        let (mut plain_rates, mut keyed_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let mut times = [0.0; 2];
            for turn in 0..2 {
                let which = (turn + round) % 2;
                times[which] = if which == 0 {
                    drive::<Plain>(engine, runs, in_flight, offset, plain).await
                } else {
                    drive::<Keyed>(engine, runs, in_flight, offset, keyed).await
                };
                offset = (offset + runs) % KEYS;
            }
            plain_rates.push(f64::from(runs) / times[0]);
            keyed_rates.push(f64::from(runs) / times[1]);
            ratios.push(times[1] / times[0]);
        }
        let ratio = median(ratios.clone());
        println!(
            "| {label} | {phase} | {runs} | {:.0} | {:.0} | **{ratio:.2}×** ({}) | {} |",
            median(plain_rates),
            median(keyed_rates),
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", "),
            if ratio <= 1.3 { "met" } else { "NOT met" },
        );
    }
}

fn header() {
    println!("| store | phase | runs per phase | plain workflows/s | keyed workflows/s | keyed / plain cost (median; per round) | target ≤ 1.3× |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | --- |");
}

async fn sqlite() {
    let dir = std::env::var_os("B17_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("b17"));
    std::fs::create_dir_all(&dir).expect("a directory for the store");
    let path = dir.join(format!("b17-{}.db", std::process::id()));
    let store = SqliteStore::open(&path).expect("open the store");
    let engine = Engine::builder().store(store).build();
    engine.register::<Plain>(()).expect("register");
    engine.register::<Keyed>(()).expect("register");
    engine.resume_all().await.expect("resume");
    with_and_without("SQLite", &engine).await;
    drop(engine);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

async fn postgres(url: &str) {
    let schema = pg::Schema::new(url, "b17");
    let store = schema
        .store_with(PgOptions {
            max_connections: 16,
            ..PgOptions::default()
        })
        .await;
    let engine = Engine::builder().store(store).owner("b17").build();
    engine.register::<Plain>(()).expect("register");
    engine.register::<Keyed>(()).expect("register");
    engine.resume_all().await.expect("resume");
    with_and_without("PostgreSQL", &engine).await;
    drop(engine);
    schema.drop().await;
}

/// Queues `runs` runs of `W` (run `i` on key `i % (runs / 2)`, so two runs per key), then
/// lets two workers admit and drive them; admissions per second.
async fn admit<W: Workflow<Env = ()>>(url: &str, runs: u32, input: fn(u32) -> W::Input) -> f64 {
    let schema = pg::Schema::new(url, "b17adm");
    let options = || PgOptions {
        max_connections: 8,
        ..PgOptions::default()
    };
    let store: Arc<dyn Store> = Arc::new(schema.store_with(options()).await);
    let intake = Engine::builder()
        .shared_store(Arc::clone(&store))
        .owner("intake")
        .intake_only()
        .build();
    let keys = (runs / 2).max(1);
    for i in 0..runs {
        intake
            .enqueue::<W>(input(i % keys), StartOptions::key(format!("run-{i}")))
            .await
            .expect("queue");
    }
    let mut workers = Vec::new();
    for w in 0..2 {
        let engine = Engine::builder()
            .store(schema.store_with(options()).await)
            .owner(format!("worker-{w}"))
            .max_live_runs(16)
            .build();
        engine.register::<W>(()).expect("register");
        workers.push(engine);
    }
    let started = Instant::now();
    for engine in &workers {
        engine.resume_all().await.expect("resume");
    }
    loop {
        let running = store
            .runs(RunFilter {
                status: Some(RunStatus::Running),
                limit: Some(1),
                ..RunFilter::default()
            })
            .await
            .expect("runs");
        if running.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rate = f64::from(runs) / started.elapsed().as_secs_f64();
    drop(workers);
    drop(intake);
    schema.drop().await;
    rate
}

async fn admissions(url: &str) {
    let runs = benches::setting("B17_ADMISSIONS", 2000) as u32;
    let rounds = benches::setting("B17_ROUNDS", 3);
    let (mut plain_rates, mut keyed_rates) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for turn in 0..2 {
            if (turn + round) % 2 == 0 {
                plain_rates.push(admit::<Plain>(url, runs, plain).await);
            } else {
                keyed_rates.push(admit::<Keyed>(url, runs, keyed).await);
            }
        }
    }
    let (p, k) = (median(plain_rates), median(keyed_rates));
    println!("| PostgreSQL, 2 workers × 16 live runs | queued runs | admissions/s (median of {rounds}) |");
    println!("| --- | ---: | ---: |");
    println!("| without a key | {runs} | {p:.0} |");
    println!(
        "| keyed, limit 1, 2 runs per key | {runs} | {k:.0} ({:.2}× the rate without) |",
        k / p
    );
}

/// Steps run by the `depth` workflows, in this process.
static STEPS: AtomicU64 = AtomicU64::new(0);

async fn count(k: u32) -> Result<u32, StepError> {
    STEPS.fetch_add(1, Ordering::Relaxed);
    Ok(black_box(k))
}

workflow! {
    /// B17 at depth: one step, no key.
    workflow Single(k: u32) {
        step s0 -> u32 { action: count(k), }
    }
}

workflow! {
    /// The same step under a concurrency key.
    workflow SingleKeyed(k: u32) {
        concurrency: { key: k, limit: 4 },
        step s0 -> u32 { action: count(k), }
    }
}

fn list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

/// A fresh store for one `depth` phase, with a way to get rid of it afterwards.
enum Fresh {
    /// The file, and its store.
    Sqlite(PathBuf, Arc<SqliteStore>),
    /// The schema, and its stores (the intake's first, then the workers').
    Postgres(pg::Schema, Vec<Arc<PgStore>>),
}

/// What one `depth` phase measured.
struct Phase {
    /// Runs admitted and finished per second.
    rate: f64,
    /// The workers' round trips to the server per run on PostgreSQL, the store's write
    /// transactions per run on SQLite.
    trips: f64,
    /// This process's CPU per run, in ms (clock ticks of 10 ms).
    cpu_ms: f64,
}

impl Fresh {
    async fn open(url: Option<&str>) -> (Fresh, Vec<Arc<dyn Store>>) {
        match url {
            None => {
                let dir = std::env::var_os("B17_DIR")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("b17"));
                std::fs::create_dir_all(&dir).expect("a directory for the store");
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let path = dir.join(format!(
                    "b17-depth-{}-{}.db",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                let store = Arc::new(SqliteStore::open(&path).expect("open the store"));
                let shared = Arc::clone(&store) as Arc<dyn Store>;
                (Fresh::Sqlite(path, store), vec![shared])
            }
            Some(url) => {
                let schema = pg::Schema::new(url, "b17depth");
                let mut stores = Vec::new();
                for _ in 0..3 {
                    let options = PgOptions {
                        max_connections: 8,
                        ..PgOptions::default()
                    };
                    stores.push(Arc::new(schema.store_with(options).await));
                }
                let dyns = stores
                    .iter()
                    .map(|store| Arc::clone(store) as Arc<dyn Store>)
                    .collect();
                (Fresh::Postgres(schema, stores), dyns)
            }
        }
    }

    async fn remove(self) {
        match self {
            Fresh::Sqlite(path, _) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Fresh::Postgres(schema, _) => {
                // The dropped workers' last statements may still hold locks for a moment.
                for _ in 0..20 {
                    let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", schema.name());
                    if schema.execute(&drop).await.is_ok() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                schema.drop().await;
            }
        }
    }
}

impl Fresh {
    /// The workers' round trips to the server so far (PostgreSQL), or the store's write
    /// transactions (SQLite).
    fn worker_trips(&self) -> u64 {
        match self {
            Fresh::Sqlite(_, store) => store.commits(),
            Fresh::Postgres(_, stores) => stores[1..].iter().map(|s| s.round_trips()).sum(),
        }
    }
}

/// One `depth` phase: `depth` runs of `W` queued over `keys` keys, then admitted by the
/// workers; runs per second over the first `measured`, with what each cost.
async fn depth_phase<W: Workflow<Env = ()>>(
    url: Option<&str>,
    depth: u32,
    keys: u32,
    measured: u64,
    input: fn(u32) -> W::Input,
) -> Phase {
    let (fresh, stores) = Fresh::open(url).await;
    // On PostgreSQL an intake-only engine queues the runs. A SQLite store has one worker,
    // whose `resume_all` would take every queued run at once: that worker queues them
    // itself before it registers the workflow (so nothing is admitted meanwhile), and one
    // more start after the registration wakes its admission.
    let intake = match url {
        Some(_) => Engine::builder()
            .shared_store(Arc::clone(&stores[0]))
            .owner("intake")
            .intake_only()
            .build(),
        None => Engine::builder()
            .shared_store(Arc::clone(&stores[0]))
            .owner("worker-0")
            .max_live_runs(32)
            .build(),
    };
    let next = Arc::new(AtomicU32::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (intake, next) = (intake.clone(), Arc::clone(&next));
        writers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= depth {
                    break;
                }
                intake
                    .enqueue::<W>(input(i % keys.max(1)), StartOptions::default())
                    .await
                    .expect("queue");
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.expect("a writer");
    }
    // SQLite: one worker with 32 live runs; PostgreSQL: two with 16 each.
    let workers: Vec<Engine> = match url {
        None => vec![intake.clone()],
        Some(_) => stores[1..]
            .iter()
            .enumerate()
            .map(|(w, store)| {
                Engine::builder()
                    .shared_store(Arc::clone(store))
                    .owner(format!("worker-{w}"))
                    .max_live_runs(16)
                    .build()
            })
            .collect(),
    };
    for engine in &workers {
        engine.register::<W>(()).expect("register");
    }
    let measured = measured.min(u64::from(depth));
    let base = STEPS.load(Ordering::Relaxed);
    let (trips, cpu) = (fresh.worker_trips(), benches::cpu_time());
    let started = Instant::now();
    match url {
        Some(_) => {
            for engine in &workers {
                engine.resume_all().await.expect("resume");
            }
        }
        None => {
            intake
                .enqueue::<W>(input(depth % keys.max(1)), StartOptions::default())
                .await
                .expect("queue");
        }
    }
    while STEPS.load(Ordering::Relaxed) - base < measured {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let rate = measured as f64 / started.elapsed().as_secs_f64();
    let per_run = |total: u64| total as f64 / measured as f64;
    let phase = Phase {
        rate,
        trips: per_run(fresh.worker_trips() - trips),
        cpu_ms: per_run(benches::cpu_time().saturating_sub(cpu).as_millis() as u64),
    };
    // The rest of the queue is not run: a phase must not leave work for the next one.
    for engine in workers.iter().chain([&intake]) {
        engine.shutdown();
    }
    drop(workers);
    drop(intake);
    drop(stores);
    // Let the dropped engines' tasks stop before the store goes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    fresh.remove().await;
    phase
}

fn single(k: u32) -> SingleInput {
    SingleInput { k }
}

fn single_keyed(k: u32) -> SingleKeyedInput {
    SingleKeyedInput { k }
}

async fn depth(url: Option<String>) {
    let rounds = benches::setting("B17_ROUNDS", 3);
    let measured = benches::setting("B17_MEASURED", 500) as u64;
    let depths = list("B17_DEPTHS", &[200, 2000]);
    let key_counts = list("B17_KEYS", &[10, 1000]);
    let stores: Vec<String> = std::env::var("B17_STORES")
        .unwrap_or_else(|_| "sqlite,postgres".to_owned())
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    println!("| store | queued runs | keys | plain runs/s | keyed runs/s | keyed ÷ plain (median; per round) | target ≥ 0.75 | round trips (PostgreSQL) or write transactions (SQLite) / run, plain → keyed | client CPU ms / run, plain → keyed |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |");
    for store in &stores {
        let url = match store.as_str() {
            "sqlite" => None,
            "postgres" => match &url {
                Some(url) => Some(url.as_str()),
                None => continue,
            },
            _ => continue,
        };
        let label = if url.is_some() {
            "PostgreSQL"
        } else {
            "SQLite"
        };
        for &queued in &depths {
            for &keys in &key_counts {
                let (mut plain, mut keyed, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
                let (mut trips, mut cpu) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
                for round in 0..rounds {
                    let mut rates = [0.0; 2];
                    for turn in 0..2 {
                        let which = (turn + round) % 2;
                        let phase = if which == 0 {
                            depth_phase::<Single>(url, queued as u32, keys as u32, measured, single)
                                .await
                        } else {
                            depth_phase::<SingleKeyed>(
                                url,
                                queued as u32,
                                keys as u32,
                                measured,
                                single_keyed,
                            )
                            .await
                        };
                        rates[which] = phase.rate;
                        trips[which].push(phase.trips);
                        cpu[which].push(phase.cpu_ms);
                    }
                    plain.push(rates[0]);
                    keyed.push(rates[1]);
                    ratios.push(rates[1] / rates[0]);
                }
                let ratio = median(ratios.clone());
                let pair = |[a, b]: [Vec<f64>; 2], digits: usize| {
                    format!("{:.digits$} → {:.digits$}", median(a), median(b))
                };
                println!(
                    "| {label} | {queued} | {keys} | {:.0} | {:.0} | **{ratio:.2}** ({}) | {} | {} | {} |",
                    median(plain),
                    median(keyed),
                    ratios
                        .iter()
                        .map(|r| format!("{r:.2}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if ratio >= 0.75 { "met" } else { "NOT met" },
                    pair(trips, 1),
                    pair(cpu, 2),
                );
            }
        }
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let modes: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| ["sqlite", "postgres", "admissions", "depth"].contains(&a.as_str()))
        .collect();
    // `depth` is its own mode: it runs only when named.
    let wants =
        |mode: &str| modes.iter().any(|m| m == mode) || (modes.is_empty() && mode != "depth");
    runtime.block_on(async {
        println!("B17: B5's ten-step chain with a workflow-level concurrency key (limit 1 over {KEYS} keys) against without");
        if wants("sqlite") || wants("postgres") {
            header();
        }
        if wants("sqlite") {
            sqlite().await;
        }
        if wants("depth") {
            println!("B17 at depth: admitted runs per second of a one-step workflow with a key (limit 4) against without, queued first");
            depth(pg::server().await).await;
            return;
        }
        let url = if wants("postgres") || wants("admissions") {
            pg::server().await
        } else {
            None
        };
        if let Some(url) = url {
            if wants("postgres") {
                postgres(&url).await;
            }
            if wants("admissions") {
                admissions(&url).await;
            }
        }
    });
}

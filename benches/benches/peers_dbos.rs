//! The engine's side of the end-to-end durable comparison with DBOS Transact
//! (`benches/peers/dbos_compare.sh`; BENCHMARKS.md, "Peers").
//!
//! A 10-step no-op chain (`s0 -> ... -> s9`, step `i` returns step `i - 1`'s `u32` plus
//! one: the same shape as `Chain10` and as the Python workflow in `dbos_bench.py`) runs on
//! a fresh [`SqliteStore`] file with `synchronous = FULL` (the store's default; WAL mode):
//!
//! - sequentially: `--runs` runs, one after another (`start`, then `outputs`);
//! - concurrently: `--runs` runs with `--concurrency` in flight: that many tasks, each
//!   taking the next run and awaiting its outputs before the next.
//!
//! For each phase it prints runs/s and the p50/p99 latency of one run (from `start` to its
//! outputs), then the journal entries (`SqliteStore::journal_writes`) and commits
//! (`SqliteStore::commits`) per run. The last line is `RESULT {json}` for the script.
//!
//! A `harness = false` bench target, so `cargo test` never builds it:
//!
//! ```text
//! cargo bench -p benches --bench peers_dbos -- --db PATH [--runs 200] [--concurrency 32]
//!     [--warmup 10] [--synchronous full|normal|off] [--workers 2]
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use workflow_core::{workflow, Engine, StepError};
use workflow_sqlite::SqliteStore;
use workflow_sqlite::{SqliteOptions, Synchronous};

/// Step `s0`.
async fn join0() -> Result<u32, StepError> {
    Ok(1)
}

/// Steps `s1` to `s9`: the input plus one.
async fn join1(x: u32) -> Result<u32, StepError> {
    Ok(x.wrapping_add(1))
}

workflow! {
    /// Ten no-op steps in a chain, each reading the previous one's output.
    workflow DurableChain10() {
        step s0 -> u32 { action: join0(), }
        step s1 -> u32 { action: join1(s0), }
        step s2 -> u32 { action: join1(s1), }
        step s3 -> u32 { action: join1(s2), }
        step s4 -> u32 { action: join1(s3), }
        step s5 -> u32 { action: join1(s4), }
        step s6 -> u32 { action: join1(s5), }
        step s7 -> u32 { action: join1(s6), }
        step s8 -> u32 { action: join1(s7), }
        step s9 -> u32 { action: join1(s8), }
    }
}

const STEPS: u32 = 10;

struct Args {
    db: PathBuf,
    runs: usize,
    concurrency: usize,
    warmup: usize,
    synchronous: Synchronous,
    workers: usize,
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "{problem}\nusage: cargo bench -p benches --bench peers_dbos -- --db PATH [--runs N] \
         [--concurrency C] [--warmup W] [--synchronous full|normal|off] [--workers T]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        db: PathBuf::new(),
        runs: 200,
        concurrency: 32,
        warmup: 10,
        synchronous: Synchronous::Full,
        workers: 2,
    };
    let mut list = std::env::args().skip(1);
    while let Some(flag) = list.next() {
        // `cargo bench` passes `--bench` to every bench target.
        if flag == "--bench" {
            continue;
        }
        let Some(value) = list.next() else {
            usage(&format!("`{flag}` needs a value"));
        };
        let number = |value: &str| match value.parse::<usize>() {
            Ok(n) => n,
            Err(_) => usage(&format!("`{flag}` takes a number, not `{value}`")),
        };
        match flag.as_str() {
            "--db" => args.db = PathBuf::from(value),
            "--runs" => args.runs = number(&value).max(1),
            "--concurrency" => args.concurrency = number(&value).max(1),
            "--warmup" => args.warmup = number(&value),
            "--workers" => args.workers = number(&value).max(1),
            "--synchronous" => {
                args.synchronous = match value.to_ascii_lowercase().as_str() {
                    "full" => Synchronous::Full,
                    "normal" => Synchronous::Normal,
                    "off" => Synchronous::Off,
                    _ => usage(&format!("unknown synchronous setting `{value}`")),
                }
            }
            _ => usage(&format!("unknown argument `{flag}`")),
        }
    }
    if args.db.as_os_str().is_empty() {
        usage("--db is required");
    }
    args
}

/// One run: `start`, then its outputs; the time between the two.
async fn one_run(engine: &Engine) -> Duration {
    let started = Instant::now();
    let outputs = match engine.start::<DurableChain10>(DurableChain10Input {}).await {
        Ok(run) => run.outputs().await,
        Err(error) => Err(error),
    };
    let elapsed = started.elapsed();
    match outputs {
        Ok(outputs) if outputs.s9 == STEPS => elapsed,
        Ok(outputs) => panic!("the chain returned {}, expected {STEPS}", outputs.s9),
        Err(error) => panic!("a run failed: {error}"),
    }
}

/// The nearest-rank percentile of an ascending list.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64 + 0.5).round() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

struct Phase {
    name: &'static str,
    runs: usize,
    in_flight: usize,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    mean_ms: f64,
    journal_writes: u64,
    commits: u64,
}

impl Phase {
    fn new(
        name: &'static str,
        in_flight: usize,
        wall: Duration,
        mut latencies: Vec<Duration>,
        journal_writes: u64,
        commits: u64,
    ) -> Phase {
        latencies.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let total: Duration = latencies.iter().sum();
        let phase = Phase {
            name,
            runs: latencies.len(),
            in_flight,
            seconds: wall.as_secs_f64(),
            p50_ms: ms(percentile(&latencies, 0.50)),
            p99_ms: ms(percentile(&latencies, 0.99)),
            mean_ms: ms(total) / latencies.len().max(1) as f64,
            journal_writes,
            commits,
        };
        println!(
            "ours {:<10} runs={:<5} in_flight={:<3} {:9.1} workflows/s  p50 {:8.3} ms  p99 {:8.3} ms  \
             journal writes/run {:.2}  commits/run {:.2}",
            phase.name,
            phase.runs,
            phase.in_flight,
            phase.per_second(),
            phase.p50_ms,
            phase.p99_ms,
            phase.per_run(phase.journal_writes),
            phase.per_run(phase.commits),
        );
        phase
    }

    fn per_second(&self) -> f64 {
        self.runs as f64 / self.seconds
    }

    fn per_run(&self, count: u64) -> f64 {
        count as f64 / self.runs.max(1) as f64
    }

    fn json(&self) -> String {
        format!(
            "{{\"phase\": \"{}\", \"runs\": {}, \"in_flight\": {}, \"seconds\": {}, \
             \"workflows_per_s\": {}, \"p50_ms\": {}, \"p99_ms\": {}, \"mean_ms\": {}, \
             \"journal_writes_per_run\": {}, \"commits_per_run\": {}}}",
            self.name,
            self.runs,
            self.in_flight,
            self.seconds,
            self.per_second(),
            self.p50_ms,
            self.p99_ms,
            self.mean_ms,
            self.per_run(self.journal_writes),
            self.per_run(self.commits),
        )
    }
}

fn remove_store_files(db: &std::path::Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        match std::fs::remove_file(&name) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => panic!("cannot remove {}: {error}", PathBuf::from(name).display()),
        }
    }
}

fn main() {
    let args = parse_args();
    remove_store_files(&args.db);
    let options = SqliteOptions {
        synchronous: args.synchronous,
        ..SqliteOptions::default()
    };
    let store = match SqliteStore::open_with(&args.db, options) {
        Ok(store) => Arc::new(store),
        Err(error) => panic!("cannot open {}: {error}", args.db.display()),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => panic!("cannot build a tokio runtime: {error}"),
    };
    println!(
        "ours: SqliteStore {} (journal_mode=WAL, synchronous={:?}), tokio multi-thread runtime, \
         {} workers",
        args.db.display(),
        args.synchronous,
        args.workers
    );

    let (sequential, concurrent) = runtime.block_on({
        let store = Arc::clone(&store);
        let args_runs = args.runs;
        let concurrency = args.concurrency;
        let warmup = args.warmup;
        async move {
            let engine = Engine::builder()
                .shared_store(Arc::clone(&store) as Arc<dyn workflow_core::store::Store>)
                .build();
            if let Err(error) = engine.register::<DurableChain10>(()) {
                panic!("cannot register the workflow: {error}");
            }
            // Runs as a task, on a worker thread, as a server's request handler would.
            let handle = tokio::spawn(async move {
                for _ in 0..warmup {
                    one_run(&engine).await;
                }

                let (writes, commits) = (store.journal_writes(), store.commits());
                let started = Instant::now();
                let mut latencies = Vec::with_capacity(args_runs);
                for _ in 0..args_runs {
                    latencies.push(one_run(&engine).await);
                }
                let sequential = Phase::new(
                    "sequential",
                    1,
                    started.elapsed(),
                    latencies,
                    store.journal_writes() - writes,
                    store.commits() - commits,
                );

                let (writes, commits) = (store.journal_writes(), store.commits());
                let next = Arc::new(AtomicUsize::new(0));
                let latencies = Arc::new(Mutex::new(Vec::with_capacity(args_runs)));
                let started = Instant::now();
                let mut tasks = tokio::task::JoinSet::new();
                for _ in 0..concurrency {
                    let engine = engine.clone();
                    let next = Arc::clone(&next);
                    let latencies = Arc::clone(&latencies);
                    tasks.spawn(async move {
                        while next.fetch_add(1, Ordering::Relaxed) < args_runs {
                            let took = one_run(&engine).await;
                            latencies
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(took);
                        }
                    });
                }
                while let Some(joined) = tasks.join_next().await {
                    if let Err(error) = joined {
                        panic!("a benchmark task failed: {error}");
                    }
                }
                let wall = started.elapsed();
                let latencies =
                    std::mem::take(&mut *latencies.lock().unwrap_or_else(PoisonError::into_inner));
                let concurrent = Phase::new(
                    "concurrent",
                    concurrency,
                    wall,
                    latencies,
                    store.journal_writes() - writes,
                    store.commits() - commits,
                );
                (sequential, concurrent)
            });
            match handle.await {
                Ok(phases) => phases,
                Err(error) => panic!("the benchmark task failed: {error}"),
            }
        }
    });
    drop(runtime);
    drop(store);
    println!(
        "RESULT {{\"synchronous\": \"{:?}\", \"journal_mode\": \"wal\", \"sequential\": {}, \
         \"concurrent\": {}}}",
        args.synchronous,
        sequential.json(),
        concurrent.json()
    );
}

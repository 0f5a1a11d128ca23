//! B19, DBOS's side: DBOS Transact for Rust (default configuration) running the ten-step
//! no-op chain of `cargo bench -p benches --bench postgres -- b19` on the same server: step
//! i returns step i-1's integer plus one, each a `dbos::step` checkpointed in DBOS's
//! system database. Run by `benches/peers/dbos_rust_compare.sh`.
//!
//! ```text
//! dbos-rust-peer --database-url postgres://postgres@127.0.0.1:5432/dbos_b19 \
//!                --stats-url postgres://postgres@127.0.0.1:5432/test \
//!                [--runs 1000] [--concurrency 32] [--warmup 20]
//! ```
//!
//! Each phase (sequential, then `--concurrency` in flight) runs on a fresh instance after
//! an untimed warm-up on another: the time of the runs; the commits per workflow (the
//! database's `xact_commit` in `pg_stat_database`, read over `--stats-url` once every
//! connection to DBOS's database has closed, so every backend has reported); the
//! statements per workflow (each one round trip: sqlx's `sqlx::query` events, counted).
//! The last line is `RESULT {json}` for the script.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dbos::{Config, DBOS};

const STEPS: [&str; 10] = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9"];

/// Counts the statements sqlx reports (target `sqlx::query`), and records nothing else.
struct Statements {
    count: Arc<AtomicU64>,
}

impl tracing::Subscriber for Statements {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target() == "sqlx::query"
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() == "sqlx::query" {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn flag(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn number(name: &str, default: usize) -> usize {
    flag(name, &default.to_string())
        .parse()
        .unwrap_or_else(|_| panic!("{name} takes a number"))
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64 + 0.5).round() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

/// The database's committed transactions, once no connection to it is left.
async fn commits_when_quiet(stats_url: &str, database: &str) -> u64 {
    let out = |sql: String| {
        let output = std::process::Command::new("psql")
            .args([stats_url, "-XAtc", &sql])
            .output()
            .expect("psql");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    for _ in 0..200 {
        let left = out(format!(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}'"
        ));
        if left == "0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    out(format!(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'"
    ))
    .parse()
    .expect("xact_commit")
}

async fn launched(url: &str) -> (DBOS, dbos::WorkflowRef<(), u32>) {
    let dbos = DBOS::new(Config {
        // The one setting without a default: launch refuses to start without a version.
        app_version: Some("b19".to_owned()),
        ..Config::new("b19-peer", url)
    });
    let chain = dbos
        .register_workflow("chain10", |_: ()| async {
            let mut x = 0u32;
            for name in STEPS {
                x = dbos::step(name, move || async move { dbos::Result::<u32>::Ok(x + 1) }).await?;
            }
            dbos::Result::<u32>::Ok(x)
        })
        .expect("register");
    dbos.launch().await.expect("launch");
    (dbos, chain)
}

async fn drive(chain: dbos::WorkflowRef<(), u32>, runs: usize, in_flight: usize) -> Vec<Duration> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..in_flight.max(1) {
        let (chain, next) = (chain.clone(), Arc::clone(&next));
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < runs {
                let started = Instant::now();
                let out = chain.run(()).await.expect("a workflow");
                assert_eq!(out, 10);
                latencies.push(started.elapsed());
            }
            latencies
        });
    }
    let mut all = Vec::with_capacity(runs);
    while let Some(done) = tasks.join_next().await {
        all.extend(done.expect("a driver task"));
    }
    all
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let url = flag(
        "--database-url",
        "postgres://postgres@127.0.0.1:5432/dbos_b19",
    );
    let stats_url = flag("--stats-url", "postgres://postgres@127.0.0.1:5432/test");
    let database = url
        .rsplit('/')
        .next()
        .and_then(|d| d.split('?').next())
        .unwrap_or_default()
        .to_owned();
    let runs = number("--runs", 1000);
    let concurrency = number("--concurrency", 32);
    let warmup = number("--warmup", 20);
    let statements = Arc::new(AtomicU64::new(0));
    tracing::subscriber::set_global_default(Statements {
        count: Arc::clone(&statements),
    })
    .expect("a subscriber");
    println!("dbos {} (Rust) on {database}", "0.5");
    let mut phases = Vec::new();
    for (name, in_flight) in [("sequential", 1), ("concurrent", concurrency)] {
        {
            let (dbos, chain) = launched(&url).await;
            drive(chain, warmup, in_flight).await;
            dbos.shutdown().await;
        }
        let before = commits_when_quiet(&stats_url, &database).await;
        let (dbos, chain) = launched(&url).await;
        let sent = statements.load(Ordering::Relaxed);
        let started = Instant::now();
        let mut latencies = drive(chain, runs, in_flight).await;
        let seconds = started.elapsed().as_secs_f64();
        let sent = statements.load(Ordering::Relaxed) - sent;
        dbos.shutdown().await;
        drop(dbos);
        let commits = commits_when_quiet(&stats_url, &database).await - before;
        latencies.sort_unstable();
        let per_run = |n: u64| n as f64 / runs as f64;
        println!(
            "dbos {name:<10} runs={runs:<5} in_flight={in_flight:<3} {:9.1} workflows/s  p50 {:8.3} ms  p99 {:8.3} ms  commits/run {:.2}  statements/run {:.2}",
            runs as f64 / seconds,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            per_run(commits),
            per_run(sent),
        );
        phases.push(format!(
            "{{\"phase\": \"{name}\", \"runs\": {runs}, \"in_flight\": {in_flight}, \"seconds\": {seconds}, \
             \"workflows_per_s\": {}, \"p50_ms\": {}, \"p99_ms\": {}, \"commits_per_run\": {}, \
             \"round_trips_per_run\": {}}}",
            runs as f64 / seconds,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            per_run(commits),
            per_run(sent),
        ));
    }
    println!(
        "RESULT {{\"sequential\": {}, \"concurrent\": {}}}",
        phases[0], phases[1]
    );
}

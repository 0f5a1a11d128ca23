//! B16: N schedules (10 000, or `B16_SCHEDULES`) firing every minute for M minutes (2, or
//! `B16_MINUTES`) of real time: on one engine over one SQLite file, or with
//! `B16_STORE=postgres` on two engines (two workers, each with its own connection pool)
//! sharing one PostgreSQL schema (`WORKFLOW_TEST_DATABASE_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`).
//!
//! Prints: the time to create the schedules; the memory per idle schedule: the schedules
//! are created with a cron that does not fire then (`0 0 1 1 *`), the schedulers make idle
//! passes over them, and the growth of the process's Rust heap (a counting allocator) and
//! of its resident set (`VmRSS`) from before the creation to after those passes is divided
//! by N; then every schedule is switched to every minute (`* * * * *`); the tick lag (fire
//! time − scheduled time, as each run's `Tick` records it) p50, p99 and max; CPU time
//! (user + system, `/proc/self/stat`) per 1 000 ticks; and whether every tick started
//! exactly one run. Not a criterion benchmark: one measurement, printed. Linux only.
//!
//! Run with `cargo bench -p benches --bench schedules` (SQLite) or
//! `B16_STORE=postgres cargo bench -p benches --bench schedules`.

use std::alloc::System;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use benches::cpu_time;
use sqlx::{Connection, Executor};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use workflow_core::schedule::{Overlap, Schedule};
use workflow_core::store::{RunFilter, Store};
use workflow_core::{workflow, Engine, StepError, Tick};
use workflow_postgres::{PgOptions, PgStore};
use workflow_sqlite::SqliteStore;

/// The system allocator, counting what is allocated and freed.
#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The bytes of Rust heap allocated and not yet freed.
fn heap_bytes() -> i64 {
    let stats = ALLOCATOR.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

/// The lag of every tick that ran, in ms.
#[derive(Default)]
pub struct Lags(Mutex<Vec<u64>>);

async fn record(env: &Arc<Lags>, tick: Tick) -> Result<(), StepError> {
    env.0.lock().unwrap().push(tick.lag_ms());
    Ok(())
}

workflow! {
    /// One step that records the tick's lag.
    workflow Minutely(tick: Tick) env Arc<Lags> {
        step record -> () { action: record(env, tick) }
    }
}

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// The stores of the engines (one SQLite store, or two pools on one PostgreSQL schema),
/// what the bench is called, and how to clean up.
async fn stores(dir: &std::path::Path) -> (Vec<Arc<dyn Store>>, String, Option<(String, String)>) {
    if std::env::var("B16_STORE").as_deref() != Ok("postgres") {
        // The default options: durable commits (`synchronous = FULL`).
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.join("b16.db")).unwrap());
        return (vec![store], "SQLite, 1 worker".to_owned(), None);
    }
    let url = std::env::var("WORKFLOW_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("wfb_b16_{}", std::process::id());
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..2 {
        let options = PgOptions {
            schema: schema.clone(),
            max_connections: 8,
            ..PgOptions::default()
        };
        let store = PgStore::connect_with(&url, options)
            .await
            .unwrap_or_else(|e| panic!("no PostgreSQL store at {url}: {e}"));
        stores.push(Arc::new(store));
    }
    (
        stores,
        "PostgreSQL, 2 workers".to_owned(),
        Some((url, schema)),
    )
}

fn main() {
    let schedules = env_or("B16_SCHEDULES", 10_000);
    let minutes = env_or("B16_MINUTES", 2) as u64;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let dir = std::env::temp_dir().join(format!("workflow-b16-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (stores, label, cleanup) = stores(&dir).await;
        let store = Arc::clone(&stores[0]);
        let lags = Arc::new(Lags::default());
        let engines: Vec<Engine> = stores
            .iter()
            .enumerate()
            .map(|(i, store)| {
                let engine = Engine::builder()
                    .shared_store(Arc::clone(store))
                    .owner(format!("b16-worker-{i}"))
                    .build();
                engine.register::<Minutely>(Arc::clone(&lags)).unwrap();
                engine
            })
            .collect();
        let engine = engines[0].clone();

        // Every worker's scheduler runs, idle.
        for engine in &engines {
            let _ = engine.schedules();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (heap_before, rss_before) = (heap_bytes(), rss_bytes());
        let created = Instant::now();
        // Once a year: nothing fires while the idle memory is measured.
        let yearly = Schedule::new("0 0 1 1 *");
        for i in 0..schedules {
            engine
                .schedules()
                .create(&format!("s{i:05}"), "Minutely", yearly.clone())
                .await
                .unwrap();
        }
        let creating = created.elapsed();
        // Idle passes: each worker's scheduler looks at the schedules (woken by the
        // creations, then on its timer).
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (heap_idle, rss_idle) = (heap_bytes(), rss_bytes());
        println!(
            "B16 {label}: {schedules} schedules created in {:.2} s; idle: heap {:+.0} B, resident memory {:+.0} B per schedule",
            creating.as_secs_f64(),
            (heap_idle - heap_before) as f64 / schedules as f64,
            (rss_idle as i64 - rss_before as i64) as f64 / schedules as f64
        );
        // Every minute from now on (32 definitions replaced at once).
        let switched = Instant::now();
        let mut every_minute = Schedule::new("* * * * *");
        every_minute.overlap = Overlap::Allow;
        let limit = Arc::new(tokio::sync::Semaphore::new(32));
        let mut switching = tokio::task::JoinSet::new();
        for i in 0..schedules {
            let permit = Arc::clone(&limit).acquire_owned().await.unwrap();
            let (engine, every_minute) = (engine.clone(), every_minute.clone());
            switching.spawn(async move {
                let _permit = permit;
                engine
                    .schedules()
                    .create(&format!("s{i:05}"), "Minutely", every_minute)
                    .await
                    .unwrap();
            });
        }
        while let Some(done) = switching.join_next().await {
            done.unwrap();
        }
        println!(
            "switched to every minute in {:.2} s",
            switched.elapsed().as_secs_f64()
        );

        // Measure whole minutes: from the next minute boundary plus a second.
        let now_ms = engine.now();
        let next_minute = (now_ms / 60_000 + 1) * 60_000;
        tokio::time::sleep(Duration::from_millis(next_minute - now_ms + 1_000)).await;
        lags.0.lock().unwrap().clear();
        let cpu_start = cpu_time();
        tokio::time::sleep(Duration::from_secs(60 * minutes)).await;
        // Let the last minute's runs finish.
        let settle = Instant::now();
        while lags.0.lock().unwrap().len() < schedules * minutes as usize
            && settle.elapsed() < Duration::from_secs(120)
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let cpu = cpu_time().saturating_sub(cpu_start);
        let mut sorted = lags.0.lock().unwrap().clone();
        sorted.sort_unstable();
        let ticks = sorted.len();
        println!(
            "{minutes} min: {ticks} ticks ran (expected {}); lag p50 {} ms, p99 {} ms, max {} ms; CPU {:.0} ms per 1 000 ticks",
            schedules * minutes as usize,
            percentile(&sorted, 0.5),
            percentile(&sorted, 0.99),
            sorted.last().copied().unwrap_or(0),
            cpu.as_secs_f64() * 1000.0 * 1000.0 / ticks.max(1) as f64
        );
        let runs = store
            .runs(RunFilter {
                workflow: Some("Minutely".into()),
                ..RunFilter::default()
            })
            .await
            .unwrap();
        let keys: std::collections::HashSet<_> =
            runs.iter().filter_map(|r| r.idempotency_key.clone()).collect();
        println!(
            "runs {} with {} distinct tick keys (one run per tick: {})",
            runs.len(),
            keys.len(),
            runs.len() == keys.len()
        );
        for engine in &engines {
            engine.shutdown();
        }
        if let Some((url, schema)) = cleanup {
            if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
                let _ = conn
                    .execute(format!("DROP SCHEMA IF EXISTS {schema} CASCADE").as_str())
                    .await;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}

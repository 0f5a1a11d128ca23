//! A big store (issue 35, item 5): does the engine slow down once its store holds a long
//! history? Of each kind (SQLite, PostgreSQL) two stores are opened: one stays empty, the
//! other is given `BIG_FINISHED` finished runs of ten journal entries each (1 000 000 runs
//! and 10 000 000 journal rows by default). The same measures then take turns on the two
//! for `BIG_ROUNDS` rounds (default 3), and each ratio reported is the median of the
//! rounds' ratios:
//!
//! - **starts/s**: `Engine::enqueue` from an intake-only engine, 32 in flight (the front
//!   door's path: a run's row and its first entry);
//! - **B3**: ten-step chains of no-op steps run one after the other, durable steps/s;
//! - **B9**: the same chains, 32 runs in flight, steps/s.
//!
//! Then, on the big store: **the retention purge** of every finished run with a live load
//! beside it (chains one after the other): half the history in batches of
//! `DEFAULT_BATCH` (as the background purge does), the rest in batches of ten; each half's
//! rate, and the p99 of the live load's step-to-step gap (a step's commit and the next
//! step's start) against the same load without the purge; and
//! **`workflow check`** (`Store::verify`) of the whole store, its time and how far the
//! process's resident memory grew while it ran (sampled every 10 ms).
//!
//! The history is written through the `Store` API (each run created with its journal and
//! finished in a second write, 256 writes in flight), not by running the workflows. It is
//! not a criterion benchmark: it prints a table per store. Each measure lasts `BIG_SECS`
//! seconds (default 5). Run with `cargo bench -p benches --bench bigstore`; environment:
//! `BIG_FINISHED` (default 1000000), `BIG_SECS`, `BIG_ROUNDS`, `BIG_STORES` (`sqlite,postgres`),
//! `WORKFLOW_TEST_DATABASE_URL`. SQLite's files live under `CARGO_TARGET_TMPDIR`.
//! Targets: every ratio ≥ 0.8; p99 with the purge ≤ 2× without; check streaming.

#[path = "common/pg.rs"]
mod pg;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinSet;
use workflow_core::journal::Event;
use workflow_core::search::{purge_all, DEFAULT_BATCH};
use workflow_core::store::{Commit, NewRun, PurgeFilter, RunStatus, Store};
use workflow_core::{Engine, StartOptions, Workflow};
use workflow_postgres::PgOptions;
use workflow_sqlite::SqliteStore;

mod flows {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use workflow_core::{workflow, StepError};

    /// When the last step of the live load started, and the gaps between a run's steps.
    pub static GAPS: Mutex<(Option<Instant>, Vec<Duration>)> = Mutex::new((None, Vec::new()));

    fn mark(first: bool) {
        let mut gaps = GAPS.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if let (false, Some(last)) = (first, gaps.0) {
            gaps.1.push(now - last);
        }
        gaps.0 = Some(now);
    }

    pub async fn first() -> Result<u32, StepError> {
        mark(true);
        Ok(1)
    }

    pub async fn next(x: u32) -> Result<u32, StepError> {
        mark(false);
        Ok(x.wrapping_add(1))
    }

    workflow! {
        /// What the intake-only engine enqueues: a workflow no worker here registers, so
        /// its runs stay queued and never compete with the chains measured.
        pub workflow Intake() {
            step s0 -> u32 { action: next(0), }
        }
    }

    workflow! {
        /// Ten no-op steps, each reading the previous one.
        pub workflow Chain10() {
            step s0 -> u32 { action: first(), }
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
}

use flows::{Chain10, Chain10Input, Intake, IntakeInput};

/// Steps in a chain.
const STEPS: usize = 10;
/// Runs in flight for starts/s and B9.
const IN_FLIGHT: usize = 32;

fn ok<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// A finished run's history: its start and four steps, the fifth begun (ten entries).
fn history(at: u64) -> Vec<Event> {
    let mut events = vec![Event::RunStarted {
        workflow: Chain10::NAME.to_owned(),
        fingerprint: Chain10::FINGERPRINT.to_owned(),
        input: json!({}),
        seed: 7,
        trace_id: "0".repeat(32),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at,
    }];
    for step in 0..4 {
        events.push(Event::AttemptStarted {
            step,
            attempt: 1,
            at,
        });
        events.push(Event::StepSucceeded {
            step,
            output: json!(step + 1),
            at,
        });
    }
    events.push(Event::AttemptStarted {
        step: 4,
        attempt: 1,
        at,
    });
    events
}

/// Writes `runs` finished runs of ten entries each, 256 writes in flight; their status
/// changed at `at`. Returns the journal rows written.
async fn fill(store: &Arc<dyn Store>, runs: usize, at: u64) -> u64 {
    let started = Instant::now();
    let mut set = JoinSet::new();
    let rows = Arc::new(AtomicU64::new(0));
    for n in 0..runs {
        if set.len() >= 256 {
            ok(set.join_next().await.expect("a write"), "join a write");
        }
        let store = Arc::clone(store);
        let rows = Arc::clone(&rows);
        set.spawn(async move {
            let events = history(at);
            let created = ok(
                store
                    .create_run(NewRun {
                        workflow: Chain10::NAME,
                        fingerprint: Chain10::FINGERPRINT,
                        idempotency_key: None,
                        events: &events,
                        search: &[],
                        parent: None,
                        owner: None,
                        supersedes: None,
                        at,
                    })
                    .await,
                "create a run",
            );
            ok(
                store
                    .commit(Commit {
                        status: Some((RunStatus::Completed, None)),
                        ..Commit::events(created.id(), events.len() as u64, &[], at)
                    })
                    .await,
                "finish a run",
            );
            rows.fetch_add(events.len() as u64, Ordering::Relaxed);
        });
        if (n + 1) % 100_000 == 0 {
            eprintln!(
                "  {} runs written ({:.0} s)",
                n + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    while let Some(joined) = set.join_next().await {
        ok(joined, "join a write");
    }
    rows.load(Ordering::Relaxed)
}

/// An engine on `store` that drives `Chain10`.
fn worker(store: Arc<dyn Store>) -> Engine {
    let engine = Engine::builder().shared_store(store).build();
    ok(engine.register::<Chain10>(()), "register Chain10");
    engine
}

async fn chain(engine: &Engine) {
    let run = ok(engine.start::<Chain10>(Chain10Input {}).await, "start");
    ok(run.outputs().await, "finish a run");
}

/// Units per second of `round` (which returns the units it did), over `secs` seconds.
async fn rate<F, Fut>(secs: u64, mut round: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let started = Instant::now();
    let mut units = 0;
    while started.elapsed() < Duration::from_secs(secs) {
        units += round().await;
    }
    units as f64 / started.elapsed().as_secs_f64()
}

/// Starts/s, B3 steps/s and B9 steps/s on `store`.
async fn measures(store: &Arc<dyn Store>, secs: u64) -> [f64; 3] {
    let intake = Engine::builder()
        .shared_store(Arc::clone(store))
        .intake_only()
        .build();
    let starts = rate(secs, || async {
        let mut set = JoinSet::new();
        for _ in 0..IN_FLIGHT {
            let intake = intake.clone();
            set.spawn(async move {
                ok(
                    intake
                        .enqueue::<Intake>(IntakeInput {}, StartOptions::default())
                        .await,
                    "enqueue",
                )
            });
        }
        while let Some(joined) = set.join_next().await {
            ok(joined, "join a start");
        }
        IN_FLIGHT
    })
    .await;
    drop(intake);
    // The runs queued above stay queued (no engine here registers `Intake`), so the
    // chains measure only their own commits.
    let engine = worker(Arc::clone(store));
    chain(&engine).await;
    let b3 = rate(secs, || async {
        chain(&engine).await;
        STEPS
    })
    .await;
    let b9 = rate(secs, || async {
        let mut set = JoinSet::new();
        for _ in 0..IN_FLIGHT {
            let engine = engine.clone();
            set.spawn(async move { chain(&engine).await });
        }
        while let Some(joined) = set.join_next().await {
            ok(joined, "join a run");
        }
        IN_FLIGHT * STEPS
    })
    .await;
    [starts, b3, b9]
}

/// The live load's step-to-step gaps while `beside` runs (or for `secs` without it):
/// chains one after the other until `beside` ends. Returns (p50, p99) in ms.
async fn gaps<F: std::future::Future<Output = ()>>(
    engine: &Engine,
    secs: u64,
    beside: Option<F>,
) -> (f64, f64) {
    *flows::GAPS.lock().unwrap_or_else(|p| p.into_inner()) = (None, Vec::new());
    let done = AtomicBool::new(false);
    let endless = beside.is_some();
    let load = async {
        let started = Instant::now();
        while !done.load(Ordering::Acquire) && (endless || started.elapsed().as_secs() < secs) {
            chain(engine).await;
        }
    };
    match beside {
        Some(beside) => {
            let beside = async {
                beside.await;
                done.store(true, Ordering::Release);
            };
            tokio::join!(load, beside);
        }
        None => load.await,
    }
    let mut gaps = std::mem::take(&mut flows::GAPS.lock().unwrap_or_else(|p| p.into_inner()).1);
    gaps.sort_unstable();
    let at = |q: f64| {
        gaps.get(((gaps.len() as f64 * q) as usize).min(gaps.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    (at(0.5), at(0.99))
}

/// The process's resident set in bytes.
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Purges up to `runs` of the history in batches of `batch` beside the live load; returns
/// (runs purged, seconds, the load's p50 and p99 gap in ms).
async fn purge_beside(
    engine: &Engine,
    store: &Arc<dyn Store>,
    at: u64,
    runs: usize,
    batch: usize,
) -> (u64, f64, f64, f64) {
    let purged = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let purge = {
        let (store, purged) = (Arc::clone(store), Arc::clone(&purged));
        async move {
            let filter = PurgeFilter {
                before: at + 1,
                workflow: Some(Chain10::NAME.to_owned()),
                except: Vec::new(),
                after: None,
                limit: batch,
                dry_run: false,
            };
            let batches = runs.div_ceil(batch);
            ok(
                purge_all(&*store, filter, Some(batches), |done| {
                    purged.fetch_add(done.len() as u64, Ordering::Relaxed);
                })
                .await,
                "purge",
            );
        }
    };
    let (p50, p99) = gaps(engine, 0, Some(purge)).await;
    (
        purged.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        p50,
        p99,
    )
}

/// The measures on `empty` and on `big` (filled here), taking turns for `rounds` rounds;
/// then `verify` and the purge of `big`.
async fn bench(
    label: &str,
    (empty, big): (Arc<dyn Store>, Arc<dyn Store>),
    analyze: Option<&pg::Schema>,
    finished: usize,
    (secs, rounds): (u64, usize),
) {
    let at = benches::now_ms();
    eprintln!("{label}: writing {finished} finished runs");
    let filled = Instant::now();
    let rows = fill(&big, finished, at).await;
    let fill_secs = filled.elapsed().as_secs_f64();
    if let Some(schema) = analyze {
        // A million rows written in minutes are past what autovacuum has analyzed yet:
        // without statistics the planner reads every finished run for each purge batch.
        let name = schema.name();
        ok(
            schema
                .execute(&format!("ANALYZE {name}.runs; ANALYZE {name}.journal"))
                .await,
            "analyze",
        );
    }
    let mut results: Vec<([f64; 3], [f64; 3])> = Vec::new();
    for round in 0..rounds {
        eprintln!("{label}: round {} of {rounds}", round + 1);
        // Turns alternate which store goes first.
        let (e, b) = if round % 2 == 0 {
            let e = measures(&empty, secs).await;
            (e, measures(&big, secs).await)
        } else {
            let b = measures(&big, secs).await;
            (measures(&empty, secs).await, b)
        };
        results.push((e, b));
    }
    println!(
        "\n### {label}: {finished} finished runs, {rows} journal rows (written in {fill_secs:.0} s)\n"
    );
    println!("Medians of {rounds} rounds of {secs} s, the empty and the big store taking turns.\n");
    println!("| measure | empty store | big store | ratio (median of the rounds') | target |");
    println!("|---|---:|---:|---:|---|");
    let names = [
        "starts/s (enqueue, 32 in flight)",
        "B3 steps/s (one run at a time)",
        "B9 steps/s (32 runs in flight)",
    ];
    for (i, name) in names.iter().enumerate() {
        let e = median(results.iter().map(|r| r.0[i]).collect());
        let b = median(results.iter().map(|r| r.1[i]).collect());
        let ratio = median(results.iter().map(|r| r.1[i] / r.0[i]).collect());
        println!("| {name} | {e:.0} | {b:.0} | {ratio:.2} | ≥ 0.80 |");
    }

    eprintln!("{label}: checking the store");
    let before = resident();
    let peak = Arc::new(AtomicU64::new(before));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (Arc::clone(&peak), Arc::clone(&sampling));
        std::thread::spawn(move || {
            while sampling.load(Ordering::Acquire) {
                peak.fetch_max(resident(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let checked = Instant::now();
    let verification = ok(big.verify().await, "verify");
    let check_secs = checked.elapsed().as_secs_f64();
    sampling.store(false, Ordering::Release);
    let _ = sampler.join();
    let grew = peak.load(Ordering::Relaxed).saturating_sub(before);
    assert!(verification.is_clean(), "{verification:?}");
    println!(
        "\n`Store::verify` (`workflow check`) of the big store: {check_secs:.1} s, {} rows, resident memory grew {:.1} MiB while it ran.",
        verification.rows,
        grew as f64 / (1 << 20) as f64
    );

    eprintln!("{label}: the live load without, then with, the purge");
    let engine = worker(Arc::clone(&big));
    chain(&engine).await;
    let (alone50, alone99) = gaps(&engine, secs, None::<std::future::Ready<()>>).await;
    println!("\n| the live load (chains one at a time), step-to-step gap | runs purged | purge rate | p50 | p99 | p99 ÷ alone (target ≤ 2) |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!("| alone | | | {alone50:.2} ms | {alone99:.2} ms | |");
    // Half the history in the default batches, the rest in batches of ten.
    for (batch, runs) in [(DEFAULT_BATCH, finished / 2), (10, finished)] {
        let (purged, secs, p50, p99) = purge_beside(&engine, &big, at, runs, batch).await;
        println!(
            "| beside a purge in batches of {batch} | {purged} | {:.0} runs/s | {p50:.2} ms | {p99:.2} ms | {:.2} |",
            purged as f64 / secs,
            p99 / alone99.max(f64::EPSILON)
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let finished = benches::setting("BIG_FINISHED", 1_000_000);
    let secs = benches::setting("BIG_SECS", 5) as u64;
    let rounds = benches::setting("BIG_ROUNDS", 3);
    let stores = std::env::var("BIG_STORES").unwrap_or_else(|_| "sqlite,postgres".to_owned());
    let runtime = ok(
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build(),
        "a runtime",
    );
    runtime.block_on(async {
        if stores.contains("sqlite") {
            let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
            let path = |name: &str| dir.join(format!("bigstore-{}-{name}.db", std::process::id()));
            let open = |name: &str| -> Arc<dyn Store> {
                Arc::new(ok(SqliteStore::open(path(name)), "open"))
            };
            let stores = (open("empty"), open("big"));
            bench("SQLite", stores, None, finished, (secs, rounds)).await;
            for name in ["empty", "big"] {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path(name).display()));
                }
            }
        }
        if stores.contains("postgres") {
            let Some(url) = pg::server().await else {
                return;
            };
            let (empty, big) = (pg::Schema::new(&url, "empty"), pg::Schema::new(&url, "big"));
            eprintln!("PostgreSQL: schemas {} and {}", empty.name(), big.name());
            let stores: (Arc<dyn Store>, Arc<dyn Store>) = (
                Arc::new(empty.store_with(PgOptions::default()).await),
                Arc::new(big.store_with(PgOptions::default()).await),
            );
            bench("PostgreSQL", stores, Some(&big), finished, (secs, rounds)).await;
            empty.drop().await;
            big.drop().await;
        }
    });
}

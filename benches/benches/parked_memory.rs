//! B7: resident memory per run parked on a human checkpoint.
//!
//! Starts K runs (10 000, or `B7_RUNS`) of a workflow whose first step is a human
//! checkpoint on the in-memory store (so each run's journal is in memory too), in batches
//! of 500 that park before the next starts, and prints the growth of the resident set
//! (`/proc/self/statm`) divided by K. Not a criterion
//! benchmark: one measurement, printed. Linux only.
//!
//! Run with `cargo bench -p benches --bench parked_memory` (or with `B7_RUNS=100000`).

use std::time::{Duration, Instant};

use workflow_core::{workflow, Approval, Engine, StepError};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

const DEFAULT_RUNS: usize = 10_000;
const BATCH: usize = 500;
const TARGET_BYTES: f64 = 1024.0;

async fn publish() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    /// A review that nobody decides during the benchmark.
    workflow Parked() {
        human review -> Approval {
            assignee: "moderators",
            timeout: 48h,
            on_timeout: escalate("leads"),
            prompt: "Publish this item?",
        }
        step publish -> u32 { action: publish(), depends_on: [review], }
    }
}

/// The resident set in pages, from `/proc/self/statm`.
fn rss_pages() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|pages| pages.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the resident set from /proc/self/statm: {statm:?}"))
}

/// The page size, from `VmRSS` in `/proc/self/status` (kB) against `statm` (pages).
fn page_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let pages = rss_pages();
    let kb: Option<u64> = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse().ok());
    match kb {
        Some(kb) if pages > 0 => {
            let ratio = kb * 1024 / pages;
            [4096u64, 16384, 65536]
                .into_iter()
                .min_by_key(|size| size.abs_diff(ratio))
                .unwrap_or(4096)
        }
        _ => 4096,
    }
}

/// Waits until `want` tasks are open. Returns the resident pages read just before the
/// poll that saw them all (the poll itself clones every task, which is not the runs').
async fn wait_open(engine: &Engine, want: usize) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let pages = rss_pages();
        let open = match engine.open_tasks().await {
            Ok(tasks) => tasks.len(),
            Err(error) => panic!("cannot list open tasks: {error}"),
        };
        if open >= want {
            return pages;
        }
        if Instant::now() > deadline {
            panic!("only {open} of {want} tasks opened within 10 minutes");
        }
    }
}

async fn start(engine: &Engine) {
    if let Err(error) = engine.start::<Parked>(ParkedInput {}).await {
        panic!("cannot start a run: {error}");
    }
}

fn main() {
    // `cargo bench` passes `--bench` (and criterion-style options); nothing to parse.
    let runs = std::env::var("B7_RUNS")
        .ok()
        .and_then(|runs| runs.parse::<usize>().ok())
        .filter(|runs| *runs > 0)
        .unwrap_or(DEFAULT_RUNS);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => panic!("cannot build a tokio runtime: {error}"),
    };
    let page = page_size();
    // `B7_STORE=sqlite` keeps the journal in a SQLite file (synchronous=OFF: this measures
    // memory, not the disk), so the figure is what the engine itself retains per run.
    let sqlite = std::env::var("B7_STORE").is_ok_and(|store| store == "sqlite");
    let file = std::env::temp_dir().join(format!("b7-{}.db", std::process::id()));
    rt.block_on(async {
        let engine = if sqlite {
            let options = SqliteOptions {
                synchronous: Synchronous::Off,
                ..SqliteOptions::default()
            };
            match SqliteStore::open_with(&file, options) {
                Ok(store) => Engine::builder().store(store).build(),
                Err(error) => panic!("cannot open {}: {error}", file.display()),
            }
        } else {
            Engine::builder().build()
        };
        if let Err(error) = engine.register::<Parked>(()) {
            panic!("cannot register the workflow: {error}");
        }
        // One run first, so one-time allocations are not counted.
        start(&engine).await;
        wait_open(&engine, 1).await;
        let before = rss_pages();

        // Start in batches and let each batch park before the next: the allocator keeps
        // freed pages, so the resident set measures what parked runs retain only if the
        // transient cost of starting them stays small next to it.
        let started = Instant::now();
        let mut launched = 0;
        while launched < runs {
            let batch = BATCH.min(runs - launched);
            for _ in 0..batch {
                start(&engine).await;
            }
            launched += batch;
            wait_open(&engine, launched + 1).await;
        }
        let start_time = started.elapsed();
        let after = wait_open(&engine, runs + 1).await;
        let parked_time = started.elapsed();

        let grown = after.saturating_sub(before) * page;
        let per_run = grown as f64 / runs as f64;
        println!(
            "B7 parked runs ({} store, current-thread runtime)",
            if sqlite { "SQLite" } else { "in-memory" }
        );
        println!("runs:                 {runs}");
        println!("page size:            {page} B");
        println!(
            "RSS before:           {:.1} MiB",
            (before * page) as f64 / 1048576.0
        );
        println!(
            "RSS after:            {:.1} MiB",
            (after * page) as f64 / 1048576.0
        );
        println!(
            "start calls:          {:.2} s ({:.1} us/run)",
            start_time.as_secs_f64(),
            start_time.as_secs_f64() * 1e6 / runs as f64
        );
        println!("all tasks open after: {:.2} s", parked_time.as_secs_f64());
        println!("bytes/run:            {per_run:.0}");
        println!(
            "target <= {TARGET_BYTES:.0} B/run: {}",
            if per_run <= TARGET_BYTES {
                "met"
            } else {
                "NOT met"
            }
        );
    });
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

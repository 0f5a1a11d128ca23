//! Flow control under fire on the SQLite store: the same workflow, observer and verdict as
//! `flow_stress_pg.rs` (at most 2 runs in flight per key over 50 keys, priorities, a
//! middle step under a bucket of 20 per second with a burst of 5), with the runs queued by
//! this test's own engine on the file and driven by a worker process
//! (`src/bin/stress_worker.rs`) that is killed with SIGKILL again and again, another being
//! started in its place, which resumes the file.
//!
//! One worker process at a time, because that is how a SQLite file is driven: the store
//! keeps no leases (`Store::multi_worker` is false), so an engine that claims a run takes
//! it at once from any other owner. Several processes may share the file to queue runs,
//! send decisions or read (this test's engine queues and reads), but a second worker
//! process that resumed the file would take the runs the first is driving, and the first
//! would go on running their attempts until its commits were refused. So on SQLite the
//! kills test that the limits survive a crash and a restart: the dead process's run
//! slots and step slots are given back, its admitted runs are resumed under a new fencing
//! token, nothing is admitted twice, no key starves. There is no SIGSTOP here: with no
//! lease to lapse, nobody takes over from a frozen worker, and when it goes on, an attempt
//! that took its rate token before the freeze begins only after it, which the
//! observer's one-second windows cannot tell from a token taken late. The three-worker
//! takeover case, with pauses past the lease, is PostgreSQL's (`flow_stress_pg.rs`).
//!
//! The observer is a second SQLite file beside the store's, written by the actions (never
//! the store's file). The assertions are `flow_stress_pg.rs`'s (`tests::stress::check`).
//!
//! `cargo test -p tests --test flow_stress_sqlite` runs 200 runs with 4 kills;
//! `FLOW_STRESS_RUNS=1000 FLOW_STRESS_KILLS=12 cargo test -p tests --test flow_stress_sqlite
//! -- --nocapture` runs the size.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tests::stress::drive::{self, unfinished, Strikes};
use tests::stress::{self, check, observer, Observer};
use tests::workers::{now_ms, now_us, setting, Rng, Workers};
use workflow_core::prelude::*;
use workflow_core::store::Store;
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

/// A fresh directory for the store's and the observer's files, removed on drop.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn limits_rates_and_priorities_hold_on_a_sqlite_file_through_kills_and_pauses() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let runs = setting("FLOW_STRESS_RUNS", stress::DEFAULT_RUNS);
    let mut rng = Rng::from_clock();
    println!(
        "flow stress seed {}: one worker process at a time on a SQLite file, {runs} runs",
        rng.seed()
    );
    let dir = Dir(std::env::temp_dir().join(format!(
        "workflow-flow-stress-{}-{}",
        std::process::id(),
        now_us()
    )));
    std::fs::create_dir_all(&dir.0).expect("a directory for the files");
    let path = dir.0.join("runs.db");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open_with(
            &path,
            SqliteOptions {
                synchronous: Synchronous::Normal,
                ..SqliteOptions::default()
            },
        )
        .expect("the store's file"),
    );
    let observer = Observer::sqlite(&observer::sqlite_path(&path)).expect("the observer's file");

    // Queue every run before the worker can admit one.
    let intake = Engine::builder()
        .shared_store(Arc::clone(&store))
        .owner("intake")
        .intake_only()
        .build();
    runtime.block_on(drive::enqueue(&intake, runs));
    let admissions_from = now_ms();

    let file = path.display().to_string();
    let mut workers = Workers::start(env!("CARGO_BIN_EXE_stress_worker"), 1, false, move |n| {
        vec!["sqlite".into(), file.clone(), format!("worker-{n}")]
    });
    let strikes = Strikes {
        kills: setting("FLOW_STRESS_KILLS", 4),
        freeze: None,
        finish_within: Duration::from_secs(60 + runs / 10),
    };
    drive::strike_until_done(&mut workers, &mut rng, strikes, || {
        runtime.block_on(unfinished(&*store))
    });
    workers.stop_all();
    let summary = runtime.block_on(check::verify(
        &*store,
        &observer,
        runs,
        admissions_from,
        stress::AGING_MS,
        &[],
    ));
    println!("{summary}");
}

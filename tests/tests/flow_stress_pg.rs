//! Flow control under fire on PostgreSQL: three worker processes
//! (`src/bin/stress_worker.rs`) admit and drive runs of `Stressed` (`src/stress/mod.rs`):
//! at most 2 runs in flight per key over 50 keys (every fifth run on one hot key),
//! priorities 0 to 2, and a middle step under a token bucket of 20 per second with a burst
//! of 5, shared by every run. This test queues the runs first (an intake-only engine), then
//! starts the workers and, while they work, kills random workers with SIGKILL (starting
//! another in each one's place) and freezes another with SIGSTOP for longer than its
//! lease before letting it go on (SIGCONT).
//!
//! The observer is outside the engine: a table in the test's schema that the actions
//! write themselves (job, key, step, attempt, fencing token, process id, the wall-clock
//! microsecond the work began and, once done, ended). Asserted at the end
//! (`tests::stress::check`), besides every run completed once in the store with the
//! right outputs:
//!
//! - at no instant more than 2 runs of a key in flight, a run being in flight from its
//!   first attempt's beginning to the last moment one of its attempts is known to have
//!   worked (an interval sweep per key);
//! - the token bucket: in no second more than 20 + 5 tokens of the rated step for certain
//!   (each token bounded by its attempt's journaled start and the beginning of its work),
//!   and in no window of 800 ms more than 20 + 5 beginnings of its work as the observer
//!   saw them (a second less 200 ms for the time from a token to its action, which on a
//!   busy machine puts 26 or 27 beginnings in some second);
//! - no zombie: no attempt began or finished its work after an attempt of its run under
//!   a higher fencing token had begun. This is what makes the two counts sound under
//!   kills and pauses: an attempt that never wrote its end (killed, or frozen and then
//!   fenced off) is counted in flight up to its run's next attempt, which a takeover
//!   starts under a higher token; a frozen worker that woke and went on working after the
//!   takeover would show as a zombie (and in the counts), never be hidden;
//! - priority order within each key, up to aging (`tests::stress::verdict::inversions`:
//!   where the order of two admissions is certain from outside, the later one did not
//!   rank higher by more than its aging allows);
//! - no key starved: every key's runs all ran.
//!
//! `cargo test -p tests --test flow_stress_pg` runs 200 runs with 4 kills and 2 pauses
//! (CI mode). The size: `FLOW_STRESS_RUNS=1000 FLOW_STRESS_KILLS=12 cargo test -p
//! tests --test flow_stress_pg -- --nocapture`. The server comes from
//! `WORKFLOW_TEST_DATABASE_URL`; without one the test is skipped with a line saying so
//! (under `CI=true` it fails).

use std::sync::Arc;
use std::time::Duration;

use tests::stress::drive::{self, unfinished, Strikes};
use tests::stress::{self, check, Observer};
use tests::workers::{now_ms, setting, Rng, Strike, Workers};
use workflow_core::prelude::*;
use workflow_core::store::Store;
use workflow_postgres::testing::{self as pg_testing, Schema};

const WORKERS: usize = 3;
const LEASE_MS: u64 = 1_500;

#[test]
fn limits_rates_and_priorities_hold_across_three_workers_through_kills_and_pauses() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let Some(url) = runtime.block_on(pg_testing::server("flow_stress_pg")) else {
        return;
    };
    let runs = setting("FLOW_STRESS_RUNS", stress::DEFAULT_RUNS);
    let mut rng = Rng::from_clock();
    println!(
        "flow stress seed {}: {WORKERS} workers, {runs} runs, lease {LEASE_MS} ms",
        rng.seed()
    );
    let schema = Schema::new(&url, "flowstress");
    let store: Arc<dyn Store> = Arc::new(runtime.block_on(schema.store()));
    let observer = runtime
        .block_on(Observer::postgres(&url, schema.name()))
        .expect("the observer's table");

    // Queue every run before any worker can admit one.
    let intake = Engine::builder()
        .shared_store(Arc::clone(&store))
        .owner("intake")
        .intake_only()
        .build();
    runtime.block_on(drive::enqueue(&intake, runs));
    let admissions_from = now_ms();

    let (url_arg, schema_arg) = (url.clone(), schema.name().to_owned());
    let mut workers = Workers::start(
        env!("CARGO_BIN_EXE_stress_worker"),
        WORKERS,
        false,
        move |n| {
            vec![
                "pg".into(),
                url_arg.clone(),
                schema_arg.clone(),
                format!("worker-{n}"),
                LEASE_MS.to_string(),
            ]
        },
    );
    let strikes = Strikes {
        kills: setting("FLOW_STRESS_KILLS", 4),
        freeze: Some(Duration::from_millis(LEASE_MS + 1_000)),
        finish_within: Duration::from_secs(60 + runs / 10),
    };
    drive::strike_until_done(&mut workers, &mut rng, strikes, || {
        runtime.block_on(unfinished(&*store))
    });
    workers.stop_all();
    // Paused workers' attempts may begin long after their token (see `check::verify`).
    let frozen: Vec<u32> = workers
        .incidents()
        .iter()
        .filter(|incident| matches!(incident.what, Strike::Frozen))
        .map(|incident| incident.pid)
        .collect();
    let summary = runtime.block_on(check::verify(
        &*store,
        &observer,
        runs,
        admissions_from,
        stress::AGING_MS,
        &frozen,
    ));
    println!("{summary}");
    runtime.block_on(schema.drop());
}

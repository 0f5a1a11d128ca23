//! A per-second schedule on one PostgreSQL database fired by three worker processes
//! (`src/bin/schedule_worker.rs`) while this test kills random workers with SIGKILL (and
//! starts a new one in its place) and every third kill freezes another with SIGSTOP for
//! longer than its lease before letting it go on (SIGCONT), whatever it was doing: deciding
//! a tick, starting its run, or driving one. A frozen worker that wakes holds a schedule row
//! it read before it froze; its compare-and-set fails, and a tick it had decided but not
//! started is started under the tick's key, so it gets the run another worker made.
//!
//! Asserted at the end, over every tick of the window (from the schedule's creation to the
//! last tick decided): each tick started exactly one run (runs and ticks match one to one,
//! by the tick's key and by the `Tick` each run was given); no tick was missed or skipped;
//! every run completed.
//!
//! `cargo test -p tests --test schedules_pg` fires for 20 seconds (CI mode, under 40 s of
//! wall time once built). The long mode fires for two minutes:
//! `SCHEDULE_CHAOS_SECS=120 cargo test -p tests --test schedules_pg -- --nocapture`.
//! The server comes from `WORKFLOW_TEST_DATABASE_URL`; without one the test is skipped with
//! a line saying so (under `CI=true` it fails).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use tests::workers::{now_ms, setting, Rng, Workers};

use workflow_core::admin::schedules as rows;
use workflow_core::journal::Event;
use workflow_core::schedule::{parse_tick_key, Overlap, Schedule};
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

const WORKERS: usize = 3;
const LEASE_MS: u64 = 1_500;
const SCHEDULE: &str = "per-second";

#[test]
fn every_tick_of_a_per_second_schedule_starts_one_run_through_kills_and_pauses() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let Some(url) = runtime.block_on(pg_testing::server("schedules_pg")) else {
        return;
    };
    let seconds = setting("SCHEDULE_CHAOS_SECS", 20);
    let mut rng = Rng::from_clock();
    println!(
        "schedule chaos seed {}: {WORKERS} workers, {seconds} s, lease {LEASE_MS} ms",
        rng.seed()
    );
    let schema = Schema::new(&url, "schedchaos");
    let store: PgStore = runtime.block_on(schema.store());

    let (url_arg, schema_arg) = (url.clone(), schema.name().to_owned());
    let mut workers = Workers::start(
        env!("CARGO_BIN_EXE_schedule_worker"),
        WORKERS,
        false,
        move |n| {
            vec![
                url_arg.clone(),
                schema_arg.clone(),
                format!("worker-{n}"),
                LEASE_MS.to_string(),
            ]
        },
    );
    // The schedule: every second, each tick's run alongside the others.
    let mut every_second = Schedule::new("* * * * * *");
    every_second.overlap = Overlap::Allow;
    let created = runtime
        .block_on(store.put_schedule(SCHEDULE, "Ticked", &every_second, now_ms()))
        .expect("create the schedule");

    let started = Instant::now();
    let (mut kills, mut pauses) = (0usize, 0usize);
    while started.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(400 + rng.below(1_200)));
        workers.check_alive();
        let victim = workers.kill_any(&mut rng);
        kills += 1;
        if kills % 3 == 1 {
            // Freeze another worker past its lease, then let it go on.
            let frozen = workers.other_than(victim, &mut rng);
            workers.freeze(frozen);
            std::thread::sleep(Duration::from_millis(LEASE_MS + 500 + rng.below(1_000)));
            workers.thaw(frozen);
            pauses += 1;
        }
    }
    let firing = started.elapsed();

    // The window: every tick decided so far. Wait until each has its run, finished.
    let row = runtime
        .block_on(rows::get(&store, SCHEDULE))
        .expect("the schedule");
    let window_end = row.state.after;
    let ticks: BTreeSet<u64> = (created.state.after / 1000 + 1..=window_end / 1000)
        .map(|s| s * 1000)
        .collect();
    assert!(
        ticks.len() as u64 + 5 >= seconds,
        "the window holds about one tick a second: {} ticks in {seconds} s",
        ticks.len()
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let runs = loop {
        let runs = runtime
            .block_on(store.runs(RunFilter {
                workflow: Some("Ticked".into()),
                limit: Some(100_000),
                ..RunFilter::default()
            }))
            .expect("runs");
        let in_window: Vec<_> = runs
            .into_iter()
            .filter(|r| {
                r.idempotency_key
                    .as_deref()
                    .and_then(parse_tick_key)
                    .is_some_and(|(_, at)| at <= window_end)
            })
            .collect();
        if in_window.len() >= ticks.len() && in_window.iter().all(|r| r.status.is_finished()) {
            break in_window;
        }
        workers.check_alive();
        assert!(
            Instant::now() < deadline,
            "{} of {} ticks have a finished run",
            in_window.iter().filter(|r| r.status.is_finished()).count(),
            ticks.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    workers.stop_all();
    println!(
        "{kills} kills and {pauses} pauses in {firing:?}; {} worker processes; {} ticks, {} runs",
        workers.started(),
        ticks.len(),
        runs.len()
    );

    // Each tick of the window: exactly one run, keyed by it and given it.
    let mut by_tick: BTreeMap<u64, usize> = BTreeMap::new();
    for record in &runs {
        let (schedule, at) = record
            .idempotency_key
            .as_deref()
            .and_then(parse_tick_key)
            .expect("a tick key");
        assert_eq!(schedule, SCHEDULE);
        *by_tick.entry(at).or_default() += 1;
        assert_eq!(record.status, RunStatus::Completed, "{}", record.id);
        let stored = runtime
            .block_on(store.load(record.id))
            .expect("load")
            .expect("the run");
        let Some(Event::RunStarted { input, .. }) = stored.events.first() else {
            panic!("{} has no start", record.id);
        };
        assert_eq!(input["tick"]["scheduled"], at, "{}", record.id);
        assert_eq!(input["tick"]["schedule"], SCHEDULE, "{}", record.id);
    }
    let doubled: Vec<_> = by_tick.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        doubled.is_empty(),
        "ticks with more than one run: {doubled:?}"
    );
    let ran: BTreeSet<u64> = by_tick.keys().copied().collect();
    let missing: Vec<_> = ticks.difference(&ran).collect();
    assert!(missing.is_empty(), "ticks without a run: {missing:?}");
    let extra: Vec<_> = ran.difference(&ticks).collect();
    assert!(
        extra.is_empty(),
        "runs of ticks outside the schedule: {extra:?}"
    );
    let row = runtime
        .block_on(rows::get(&store, SCHEDULE))
        .expect("the schedule");
    assert_eq!(row.state.missed, 0, "no tick was missed");
    assert_eq!(row.state.skipped, 0, "no tick was skipped");
    assert!(runtime
        .block_on(store.missed_ticks(SCHEDULE, 10))
        .expect("missed")
        .is_empty());
    runtime.block_on(schema.drop());
}

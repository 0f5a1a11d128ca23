//! Schedules at run time, under paused tokio time, on the memory and SQLite stores: one run
//! per tick, with two engines too; each overlap policy against a slow run; three days of
//! downtime under each catch-up policy; an hourly and a daily schedule through both
//! daylight-saving changes in two zones; jitter; the missed-tick counter and the lag
//! histogram; pause, resume, trigger, delete and backfill.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use workflow_core::clock::TokioClock;
use workflow_core::journal::{Event, Timestamp};
use workflow_core::prelude::*;
use workflow_core::schedule::{Catchup, Overlap, Schedule};
use workflow_core::store::{MemoryStore, RunFilter, RunStatus, ScheduleRow, Store};
use workflow_core::Tick;
use workflow_sqlite::SqliteStore;

/// 2026-01-05T00:00:00Z, a Monday.
const T0: Timestamp = 1_767_571_200_000;
const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// What the scheduled runs did, shared by every engine of a test.
#[derive(Default)]
pub struct Env {
    ticks: Mutex<Vec<Tick>>,
    /// How long each run takes.
    work: Duration,
}

async fn job(env: &Env, tick: Tick) -> Result<u64, StepError> {
    env.ticks.lock().unwrap().push(tick.clone());
    tokio::time::sleep(env.work).await;
    Ok(tick.scheduled)
}

async fn beat(env: &Env) -> Result<(), StepError> {
    env.ticks.lock().unwrap().push(Tick {
        schedule: "Heartbeat".into(),
        scheduled: 0,
        fired: 0,
    });
    Ok(())
}

workflow! {
    /// Started by schedules created at run time.
    workflow Job(tick: Tick) env Arc<Env> {
        step run -> u64 { action: job(env, tick) }
    }
}

workflow! {
    /// Declares its own schedule: every hour, on the hour.
    workflow Heartbeat() env Arc<Env> {
        schedule: { cron: "0 * * * *", catchup: none },
        step beat -> () { action: beat(env) }
    }
}

fn temp_file(name: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir =
        std::env::temp_dir().join(format!("workflow-schedules-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Sqlite,
}

fn store(kind: Kind) -> Arc<dyn Store> {
    match kind {
        Kind::Memory => Arc::new(MemoryStore::new()),
        Kind::Sqlite => Arc::new(SqliteStore::open(temp_file("store.db")).unwrap()),
    }
}

fn engine(store: &Arc<dyn Store>, clock: TokioClock, env: &Arc<Env>) -> Engine {
    let engine = Engine::builder()
        .shared_store(Arc::clone(store))
        .clock(clock)
        .build();
    engine.register::<Job>(Arc::clone(env)).unwrap();
    engine
}

fn every_minute(overlap: Overlap) -> Schedule {
    let mut schedule = Schedule::new("* * * * *");
    schedule.overlap = overlap;
    schedule
}

async fn runs(store: &Arc<dyn Store>) -> Vec<workflow_core::store::RunRecord> {
    store
        .runs(RunFilter {
            workflow: Some("Job".into()),
            ..RunFilter::default()
        })
        .await
        .unwrap()
}

async fn row(store: &Arc<dyn Store>, id: &str) -> ScheduleRow {
    store
        .schedules()
        .await
        .unwrap()
        .into_iter()
        .find(|row| row.id == id)
        .unwrap()
}

fn scheduled_times(env: &Env) -> Vec<Timestamp> {
    env.ticks
        .lock()
        .unwrap()
        .iter()
        .map(|t| t.scheduled)
        .collect()
}

fn minutes(from: u64, count: u64) -> Vec<Timestamp> {
    (from..from + count).map(|m| T0 + m * 60_000).collect()
}

// ------------------------------------------------------------------- one run per tick

async fn one_run_per_tick(kind: Kind) {
    let store = store(kind);
    let clock = TokioClock::starting_at(T0);
    let env = Arc::new(Env::default());
    let engine = engine(&store, clock, &env);
    engine
        .schedules()
        .create("minutely", "Job", every_minute(Overlap::Allow))
        .await
        .unwrap();
    tokio::time::sleep(10 * MINUTE + Duration::from_secs(5)).await;
    assert_eq!(scheduled_times(&env), minutes(1, 10), "{kind:?}");
    let runs = runs(&store).await;
    assert_eq!(runs.len(), 10, "{kind:?}");
    let keys: BTreeSet<String> = runs
        .iter()
        .filter_map(|r| r.idempotency_key.clone())
        .collect();
    let expected: BTreeSet<String> = minutes(1, 10)
        .into_iter()
        .map(|t| format!("schedule:minutely@{t}"))
        .collect();
    assert_eq!(
        keys, expected,
        "each run keyed by (schedule, scheduled time)"
    );
    let ticks = env.ticks.lock().unwrap().clone();
    assert!(ticks
        .iter()
        .all(|t| t.schedule == "minutely" && t.lag_ms() < 1_000));
    let state = row(&store, "minutely").await.state;
    assert_eq!(state.missed, 0);
    assert_eq!(state.last_tick, Some(T0 + 10 * 60_000));
    engine.shutdown();
}

#[tokio::test(start_paused = true)]
async fn each_tick_starts_one_run_on_memory() {
    one_run_per_tick(Kind::Memory).await;
}

#[tokio::test(start_paused = true)]
async fn each_tick_starts_one_run_on_sqlite() {
    one_run_per_tick(Kind::Sqlite).await;
}

#[tokio::test(start_paused = true)]
async fn the_runs_of_ticks_due_together_are_created_in_one_transaction() {
    let memory = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = memory.clone();
    let env = Arc::new(Env {
        work: 10 * MINUTE,
        ..Env::default()
    });
    let engine = engine(&store, TokioClock::starting_at(T0), &env);
    for i in 0..20 {
        engine
            .schedules()
            .create(&format!("s{i:02}"), "Job", every_minute(Overlap::Allow))
            .await
            .unwrap();
    }
    let before = memory.commits();
    // The ticks of 00:01 fire; every run's one step is still working when the clock stops.
    tokio::time::sleep(MINUTE + Duration::from_secs(5)).await;
    assert_eq!(scheduled_times(&env), vec![T0 + 60_000; 20]);
    let runs = runs(&store).await;
    assert_eq!(runs.len(), 20);
    assert!(runs.iter().all(|r| r.owner.is_some()), "created claimed");
    assert_eq!(
        memory.commits() - before,
        1,
        "the 20 runs and their first entries were written in one transaction"
    );
    for i in 0..20 {
        let state = row(&store, &format!("s{i:02}")).await.state;
        assert_eq!(state.last_tick, Some(T0 + 60_000));
        assert!(state.pending.is_empty());
    }
    engine.shutdown();
}

#[tokio::test(start_paused = true)]
async fn two_engines_on_one_sqlite_file_start_each_tick_once() {
    let path = temp_file("shared.db");
    let clock = TokioClock::starting_at(T0);
    let env = Arc::new(Env::default());
    let first: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let second: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let a = engine(&first, clock, &env);
    let b = engine(&second, clock, &env);
    a.schedules()
        .create("minutely", "Job", every_minute(Overlap::Allow))
        .await
        .unwrap();
    let _ = b.schedules();
    tokio::time::sleep(10 * MINUTE + Duration::from_secs(5)).await;
    let mut fired = scheduled_times(&env);
    fired.sort_unstable();
    assert_eq!(
        fired,
        minutes(1, 10),
        "every tick ran once, on one engine or the other"
    );
    assert_eq!(runs(&first).await.len(), 10);
    a.shutdown();
    b.shutdown();
}

#[tokio::test(start_paused = true)]
async fn a_declared_schedule_gets_its_row_at_registration() {
    let store = store(Kind::Memory);
    let env = Arc::new(Env::default());
    let engine = Engine::builder()
        .shared_store(Arc::clone(&store))
        .clock(TokioClock::starting_at(T0 + 30 * 60_000))
        .build();
    engine.register::<Heartbeat>(Arc::clone(&env)).unwrap();
    tokio::time::sleep(2 * HOUR).await;
    let row = row(&store, "Heartbeat").await;
    assert_eq!(row.workflow, "Heartbeat");
    assert_eq!(row.schedule.cron, "0 * * * *");
    assert_eq!(env.ticks.lock().unwrap().len(), 2, "01:00 and 02:00");
    let info = engine.schedules().get("Heartbeat", 2).await.unwrap();
    assert_eq!(info.next, [T0 + 3 * 3_600_000, T0 + 4 * 3_600_000]);
    assert_eq!(info.next_local[0], "2026-01-05T03:00:00+00:00[UTC]");
    engine.shutdown();
}

// ---------------------------------------------------------------- daylight saving time

/// `y-m-d hh:00Z` in ms since the epoch (days from civil, as in Hinnant's algorithm).
fn utc(y: i64, m: i64, d: i64, hour: i64) -> Timestamp {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    ((days * 24 + hour) * 3_600_000) as Timestamp
}

/// Runs `cron` in `tz` on an engine whose clock starts at `start` for `hours` hours of
/// paused time; the scheduled times of the runs it started.
async fn through(cron: &str, tz: &str, start: Timestamp, hours: u32) -> Vec<Timestamp> {
    let store = store(Kind::Memory);
    let env = Arc::new(Env::default());
    let engine = engine(&store, TokioClock::starting_at(start), &env);
    engine
        .schedules()
        .create("dst", "Job", Schedule::new(cron).in_zone(tz))
        .await
        .unwrap();
    tokio::time::sleep(hours * HOUR - MINUTE).await;
    engine.shutdown();
    let mut fired = scheduled_times(&env);
    fired.sort_unstable();
    fired
}

#[tokio::test(start_paused = true)]
async fn an_hourly_schedule_runs_once_each_real_hour_through_both_changes_in_two_zones() {
    // 72 hours from half past an hour, across each change: the wall clock repeats an hour
    // (autumn) or skips one (spring), and `30 * * * *` runs 72 times, an hour apart.
    assert_eq!(utc(2026, 1, 5, 0), T0);
    for (tz, from) in [
        ("Europe/Berlin", utc(2026, 3, 28, 0)),
        ("Europe/Berlin", utc(2026, 10, 24, 0)),
        ("America/New_York", utc(2026, 3, 7, 5)),
        ("America/New_York", utc(2026, 10, 31, 4)),
    ] {
        let fired = through("30 * * * *", tz, from, 72).await;
        assert_eq!(fired.len(), 72, "{tz} from {from}");
        assert!(
            fired.windows(2).all(|w| w[1] - w[0] == 3_600_000),
            "{tz} from {from}: {fired:?}"
        );
    }
    // A fixed time runs once a day: 02:30 in Berlin through the autumn fold (it happens
    // twice on 2026-10-25) runs three times in three days.
    let daily = through("30 2 * * *", "Europe/Berlin", utc(2026, 10, 24, 0), 72).await;
    assert_eq!(daily.len(), 3, "{daily:?}");
}

// ------------------------------------------------------------------------------ overlap

/// Every minute for ten minutes, each run taking 130 s (no run ends near a tick). Returns the ticks that ran (by
/// minute), the store and the schedule's row.
async fn slow_runs(kind: Kind, overlap: Overlap) -> (Vec<u64>, Arc<dyn Store>, ScheduleRow) {
    let store = store(kind);
    let env = Arc::new(Env {
        work: Duration::from_secs(130),
        ..Env::default()
    });
    let engine = engine(&store, TokioClock::starting_at(T0), &env);
    engine
        .schedules()
        .create("slow", "Job", every_minute(overlap))
        .await
        .unwrap();
    tokio::time::sleep(10 * MINUTE + Duration::from_secs(5)).await;
    let ran = scheduled_times(&env)
        .into_iter()
        .map(|t| (t - T0) / 60_000)
        .collect();
    let row = row(&store, "slow").await;
    // Stop the schedule and let the runs in flight settle.
    engine.schedules().pause("slow").await.unwrap();
    tokio::time::sleep(5 * MINUTE).await;
    engine.shutdown();
    (ran, store, row)
}

#[tokio::test(start_paused = true)]
async fn overlap_skip_runs_one_at_a_time_and_counts_the_skipped() {
    for kind in [Kind::Memory, Kind::Sqlite] {
        let (ran, _, row) = slow_runs(kind, Overlap::Skip).await;
        // 1 runs until 3:10, so 2 and 3 skip; 4 until 6:10; 7 until 9:10; 10.
        assert_eq!(ran, [1, 4, 7, 10], "{kind:?}");
        assert_eq!(row.state.skipped, 6, "{kind:?}");
        assert_eq!(row.state.missed, 0, "{kind:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn overlap_buffer_one_keeps_one_tick_waiting() {
    for kind in [Kind::Memory, Kind::Sqlite] {
        let (ran, _, row) = slow_runs(kind, Overlap::BufferOne).await;
        // 1 runs until 3:10 while 2 waits (3 is skipped); 2 starts as 1 finishes and runs
        // until ~5:21 while 4 waits (5 is skipped); 4 until ~7:32 while 6 waits (7 is
        // skipped); 6 until ~9:43 while 8 waits (9 is skipped); 8 starts then, 10 waits.
        assert_eq!(ran, [1, 2, 4, 6, 8], "{kind:?}");
        assert_eq!(row.state.skipped, 4, "{kind:?}");
        assert_eq!(row.state.buffered, Some(T0 + 10 * 60_000), "{kind:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn overlap_allow_runs_every_tick_alongside() {
    let (ran, store, row) = slow_runs(Kind::Memory, Overlap::Allow).await;
    // Each run takes 130 s and one starts every 60 s: they overlap, and none is skipped.
    assert_eq!(ran, (1..=10).collect::<Vec<_>>());
    assert_eq!(row.state.skipped, 0);
    assert!(
        row.state.active.is_empty(),
        "under `allow` no run in flight is tracked (none is read per tick): {:?}",
        row.state.active
    );
    let runs = runs(&store).await;
    assert_eq!(runs.len(), 10);
    assert!(runs.iter().all(|r| r.status == RunStatus::Completed));
}

#[tokio::test(start_paused = true)]
async fn overlap_cancel_previous_cancels_the_run_in_flight() {
    for kind in [Kind::Memory, Kind::Sqlite] {
        let (ran, store, _) = slow_runs(kind, Overlap::CancelPrevious).await;
        assert_eq!(ran, (1..=10).collect::<Vec<_>>(), "{kind:?}");
        let statuses: HashMap<RunStatus, usize> =
            runs(&store).await.iter().fold(HashMap::new(), |mut m, r| {
                *m.entry(r.status).or_default() += 1;
                m
            });
        // Each tick cancelled the run before it; the last one ran to its end.
        assert_eq!(
            statuses.get(&RunStatus::Cancelled),
            Some(&9),
            "{kind:?}: {statuses:?}"
        );
        assert_eq!(
            statuses.get(&RunStatus::Completed),
            Some(&1),
            "{kind:?}: {statuses:?}"
        );
        // Each cancelled run's step was stopped (its attempt dropped, settled `cancelled`)
        // at the tick that started the next run, before that run's first step began.
        let mut journals = Vec::new();
        for record in runs(&store).await {
            let stored = store.load(record.id).await.unwrap().unwrap();
            journals.push((record, stored.events));
        }
        journals.sort_by_key(|(record, _)| record.id);
        for pair in journals.windows(2) {
            let ((old, old_events), (_, new_events)) = (&pair[0], &pair[1]);
            assert_eq!(old.status, RunStatus::Cancelled, "{kind:?}");
            let stopped = old_events
                .iter()
                .find_map(|event| match event {
                    Event::AttemptFailed {
                        kind: ErrorKind::Cancelled,
                        at,
                        ..
                    } => Some(*at),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{kind:?}: {old_events:?}"));
            let started = new_events
                .iter()
                .find_map(|event| match event {
                    Event::AttemptStarted { at, .. } => Some(*at),
                    _ => None,
                })
                .unwrap();
            assert!(stopped <= started, "{kind:?}: {stopped} > {started}");
        }
    }
}

// ----------------------------------------------------------------------------- downtime

/// An hourly schedule with a 6-hour window under `catchup`: an engine runs it for an
/// hour, stops, the store sits for three days, and a new engine takes over. Returns the
/// ticks run after the downtime (hours from T0), the row, and its missed-tick records as
/// (first hour, last hour, count).
async fn three_days_down(
    kind: Kind,
    catchup: Catchup,
) -> (Vec<u64>, ScheduleRow, Vec<(u64, u64, u64)>) {
    let store = store(kind);
    let clock = TokioClock::starting_at(T0);
    let env = Arc::new(Env::default());
    let mut schedule = Schedule::new("0 * * * *");
    schedule.catchup = catchup;
    schedule.window = 6 * HOUR;
    let before = engine(&store, clock, &env);
    before
        .schedules()
        .create("hourly", "Job", schedule)
        .await
        .unwrap();
    tokio::time::sleep(HOUR + MINUTE).await;
    assert_eq!(scheduled_times(&env), [T0 + 3_600_000]);
    before.shutdown();
    drop(before);
    // Three days (and a half hour) with no engine.
    tokio::time::sleep(72 * HOUR + 30 * MINUTE).await;
    env.ticks.lock().unwrap().clear();
    let after = engine(&store, clock, &env);
    let _ = after.schedules();
    tokio::time::sleep(Duration::from_secs(5)).await;
    // The caught-up runs start together and run side by side: their ticks, in order.
    let mut ran: Vec<u64> = scheduled_times(&env)
        .into_iter()
        .map(|t| (t - T0) / 3_600_000)
        .collect();
    ran.sort_unstable();
    let row = row(&store, "hourly").await;
    let hour = |at: Timestamp| (at - T0) / 3_600_000;
    let missed = after
        .schedules()
        .missed("hourly", 10)
        .await
        .unwrap()
        .iter()
        .map(|m| (hour(m.first), hour(m.last), m.count))
        .collect();
    after.shutdown();
    (ran, row, missed)
}

#[tokio::test(start_paused = true)]
async fn after_three_days_latest_runs_one_tick_and_counts_the_rest_missed() {
    for kind in [Kind::Memory, Kind::Sqlite] {
        let (ran, row, missed) = three_days_down(kind, Catchup::Latest).await;
        // Back at 73:31; due: hours 2..=73 (72 ticks); the newest, 73, runs.
        assert_eq!(ran, [73], "{kind:?}");
        assert_eq!(row.state.missed, 71, "{kind:?}");
        // The missed ticks are a durable record, not only a count.
        assert_eq!(missed, [(2, 72, 71)], "{kind:?}");
        assert_eq!(row.state.last_missed, Some(T0 + 72 * 3_600_000));
        assert_eq!(row.state.after, T0 + 73 * 3_600_000);
    }
}

#[tokio::test(start_paused = true)]
async fn after_three_days_all_runs_at_most_n_within_the_window() {
    for kind in [Kind::Memory, Kind::Sqlite] {
        let (ran, row, missed) = three_days_down(kind, Catchup::All { max: 4 }).await;
        assert_eq!(ran, [70, 71, 72, 73], "{kind:?}");
        assert_eq!(row.state.missed, 68, "{kind:?}");
        assert_eq!(missed, [(2, 69, 68)], "{kind:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn after_three_days_none_runs_nothing() {
    for kind in [Kind::Memory, Kind::Sqlite] {
        let (ran, row, missed) = three_days_down(kind, Catchup::None).await;
        assert!(ran.is_empty(), "{kind:?}: {ran:?}");
        assert_eq!(row.state.missed, 72, "{kind:?}");
        assert_eq!(missed, [(2, 73, 72)], "{kind:?}");
    }
}

// --------------------------------------------------------------------- jitter, metrics

#[test]
fn missed_ticks_and_lag_are_measured() {
    let recorder = DebuggingRecorder::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let (ran, row) = metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let store = store(Kind::Memory);
            let clock = TokioClock::starting_at(T0);
            let env = Arc::new(Env::default());
            let mut schedule = Schedule::new("*/10 * * * *");
            schedule.jitter = Some(Duration::from_secs(30));
            schedule.catchup = Catchup::Latest;
            let first = engine(&store, clock, &env);
            first
                .schedules()
                .create("jittered", "Job", schedule)
                .await
                .unwrap();
            tokio::time::sleep(HOUR + MINUTE).await;
            first.shutdown();
            drop(first);
            // Down for two hours and five minutes: 12 ticks due, the newest (3:00) runs
            // six minutes late, 11 are missed.
            tokio::time::sleep(2 * HOUR + 5 * MINUTE).await;
            let second = engine(&store, clock, &env);
            let _ = second.schedules();
            tokio::time::sleep(MINUTE).await;
            second.shutdown();
            let ticks = env.ticks.lock().unwrap().clone();
            (ticks, row(&store, "jittered").await)
        })
    });
    // Six on-time ticks, then the newest after the outage.
    assert_eq!(ran.len(), 7, "{ran:?}");
    for tick in &ran[..6] {
        assert!(
            tick.lag_ms() <= 30_000 + 1_000,
            "jitter is bounded: {tick:?}"
        );
    }
    let lags: BTreeSet<u64> = ran[..6].iter().map(|t| t.lag_ms() / 1000).collect();
    assert!(lags.len() > 1, "jitter spreads the starts: {lags:?}");
    assert_eq!(row.state.missed, 11);

    let snapshot = recorder.snapshotter().snapshot().into_vec();
    let missed: u64 = snapshot
        .iter()
        .filter(|(key, ..)| key.key().name() == "workflow_schedule_missed_total")
        .map(|(key, _, _, value)| {
            assert!(key
                .key()
                .labels()
                .any(|l| l.key() == "schedule" && l.value() == "jittered"));
            match value {
                DebugValue::Counter(n) => *n,
                other => panic!("a counter, got {other:?}"),
            }
        })
        .sum();
    assert_eq!(missed, 11);
    let lags: Vec<f64> = snapshot
        .iter()
        .filter(|(key, ..)| key.key().name() == "workflow_schedule_lag_seconds")
        .flat_map(|(_, _, _, value)| match value {
            DebugValue::Histogram(values) => {
                values.iter().map(|v| v.into_inner()).collect::<Vec<f64>>()
            }
            other => panic!("a histogram, got {other:?}"),
        })
        .collect();
    assert_eq!(lags.len(), 7, "one lag per started tick: {lags:?}");
    assert!(lags[..6].iter().all(|&lag| lag <= 31.0), "{lags:?}");
    assert!(
        (360.0..=362.0).contains(&lags[6]),
        "the caught-up tick ran six minutes late: {lags:?}"
    );
}

// ----------------------------------------------------- pause, resume, trigger, backfill

#[tokio::test(start_paused = true)]
async fn a_scheduled_run_names_its_tick() {
    let store = store(Kind::Memory);
    let env = Arc::new(Env::default());
    let mut schedule = every_minute(Overlap::Allow);
    schedule.jitter = Some(Duration::from_secs(20));
    let engine = engine(&store, TokioClock::starting_at(T0), &env);
    engine
        .schedules()
        .create("minutely", "Job", schedule)
        .await
        .unwrap();
    tokio::time::sleep(MINUTE + Duration::from_secs(30)).await;
    let started = runs(&store).await;
    assert_eq!(started.len(), 1);
    let events = store.load(started[0].id).await.unwrap().unwrap().events;
    let tick = Tick::of_run(&started[0], &events).expect("a scheduled run names its tick");
    let given = env.ticks.lock().unwrap()[0].clone();
    assert_eq!(tick, given, "the tick the run was given");
    assert_eq!(tick.schedule, "minutely");
    assert_eq!(tick.scheduled, T0 + 60_000);
    assert!(tick.fired >= tick.scheduled && tick.fired <= tick.scheduled + 21_000);
    // A run started by hand names no tick, even with a Tick as its input.
    let manual = engine
        .start::<Job>(JobInput { tick: given })
        .await
        .unwrap()
        .id();
    let stored = store.load(manual).await.unwrap().unwrap();
    assert_eq!(Tick::of_run(&stored.record, &stored.events), None);
    engine.shutdown();
}

#[tokio::test(start_paused = true)]
async fn pause_resume_trigger_delete() {
    let store = store(Kind::Sqlite);
    let env = Arc::new(Env::default());
    let engine = engine(&store, TokioClock::starting_at(T0), &env);
    let schedules = engine.schedules();
    schedules
        .create("minutely", "Job", every_minute(Overlap::Allow))
        .await
        .unwrap();
    tokio::time::sleep(2 * MINUTE + Duration::from_secs(5)).await;
    assert_eq!(scheduled_times(&env), minutes(1, 2));

    schedules.pause("minutely").await.unwrap();
    assert!(schedules.get("minutely", 3).await.unwrap().next.is_empty());
    tokio::time::sleep(5 * MINUTE).await;
    assert_eq!(
        scheduled_times(&env).len(),
        2,
        "a paused schedule fires nothing"
    );

    schedules.resume("minutely").await.unwrap();
    tokio::time::sleep(MINUTE).await;
    // Resumed at 7:05: 3..=7 passed while paused and are not run; 8 is the next.
    assert_eq!(
        scheduled_times(&env),
        [minutes(1, 2), minutes(8, 1)].concat()
    );
    assert_eq!(row(&store, "minutely").await.state.missed, 0);

    let run = schedules.trigger("minutely").await.unwrap();
    let view = engine.inspect(run).await.unwrap();
    assert_eq!(view.record.workflow, "Job");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(scheduled_times(&env).len(), 4);

    schedules.delete("minutely").await.unwrap();
    assert!(matches!(
        schedules.delete("minutely").await,
        Err(workflow_core::ScheduleApiError::Unknown(_))
    ));
    tokio::time::sleep(5 * MINUTE).await;
    assert_eq!(
        scheduled_times(&env).len(),
        4,
        "a deleted schedule fires nothing"
    );
    engine.shutdown();
}

#[tokio::test(start_paused = true)]
async fn backfill_lists_first_then_starts_each_tick_once() {
    let store = store(Kind::Memory);
    let env = Arc::new(Env::default());
    // The engine runs on day 3; the schedule is daily at 09:00.
    let engine = engine(&store, TokioClock::starting_at(T0 + 3 * 86_400_000), &env);
    let schedules = engine.schedules();
    schedules
        .create("daily", "Job", Schedule::new("0 9 * * *"))
        .await
        .unwrap();
    let (from, to) = (T0, T0 + 3 * 86_400_000);
    let listed = schedules.backfill("daily", from, to, true).await.unwrap();
    let days: Vec<Timestamp> = (0..3)
        .map(|d| T0 + d * 86_400_000 + 9 * 3_600_000)
        .collect();
    assert_eq!(listed.iter().map(|t| t.scheduled).collect::<Vec<_>>(), days);
    assert_eq!(listed[0].local, "2026-01-05T09:00:00+00:00[UTC]");
    assert!(listed.iter().all(|t| t.run.is_none()));
    assert!(runs(&store).await.is_empty(), "a dry run starts nothing");

    let started = schedules.backfill("daily", from, to, false).await.unwrap();
    assert!(started.iter().all(|t| t.run.is_some() && t.created));
    let again = schedules.backfill("daily", from, to, false).await.unwrap();
    assert!(
        again.iter().all(|t| !t.created),
        "a second backfill starts nothing"
    );
    assert_eq!(
        again.iter().map(|t| t.run).collect::<Vec<_>>(),
        started.iter().map(|t| t.run).collect::<Vec<_>>()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(scheduled_times(&env), days);
    assert!(matches!(
        schedules
            .backfill("daily", T0, T0 + 10_000 * 86_400_000 * 2, true)
            .await,
        Err(workflow_core::ScheduleApiError::TooManyTicks)
    ));
    engine.shutdown();
}

#[tokio::test(start_paused = true)]
async fn invalid_schedules_and_workflows_are_refused() {
    let store = store(Kind::Memory);
    let env = Arc::new(Env::default());
    let engine = engine(&store, TokioClock::starting_at(T0), &env);
    let schedules = engine.schedules();
    assert!(matches!(
        schedules
            .create("bad", "Job", Schedule::new("0 9 * * MON-FRY"))
            .await,
        Err(workflow_core::ScheduleApiError::Invalid(_))
    ));
    assert!(matches!(
        schedules
            .create(
                "bad",
                "Job",
                Schedule::new("0 9 * * *").in_zone("Mars/Base")
            )
            .await,
        Err(workflow_core::ScheduleApiError::Invalid(_))
    ));
    assert!(matches!(
        schedules
            .create("bad", "Missing", Schedule::new("0 9 * * *"))
            .await,
        Err(workflow_core::ScheduleApiError::NotRegistered(_))
    ));
    engine.register::<Plain>(Arc::clone(&env)).unwrap();
    let refused = schedules
        .create("bad", "Plain", Schedule::new("0 9 * * *"))
        .await;
    assert!(
        matches!(refused, Err(workflow_core::ScheduleApiError::NotSchedulable { ref inputs, .. }) if inputs == &["String"]),
        "{refused:?}"
    );
    assert!(store.schedules().await.unwrap().is_empty());
    engine.shutdown();
}

async fn plain(name: String) -> Result<String, StepError> {
    Ok(name)
}

workflow! {
    /// Takes an input nobody gives a scheduled run.
    workflow Plain(name: String) env Arc<Env> {
        step echo -> String { action: plain(name) }
    }
}

//! `workflow schedules` end to end on a SQLite store an engine wrote (with real time: the
//! SQLite writer thread does not mix with tokio's paused clock): list with next fire times
//! in the schedule's zone, pause, resume, backfill `--dry-run`, and a trigger left in the
//! store that an engine then starts once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use workflow_core::prelude::*;
use workflow_core::schedule::Schedule;
use workflow_core::store::RunFilter;
use workflow_core::Tick;
use workflow_sqlite::SqliteStore;

async fn report(tick: Tick) -> Result<u64, StepError> {
    Ok(tick.scheduled)
}

workflow! {
    /// A report for each tick.
    workflow Report(tick: Tick) {
        step report -> u64 { action: report(tick) }
    }
}

fn temp_db() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "workflow-cli-schedules-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("store.db")
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn workflow(db: &Path, args: &[&str]) -> Out {
    let output = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .arg("--store")
        .arg(db)
        .args(args)
        .env_remove("WORKFLOW_STORE")
        .output()
        .expect("run the workflow binary");
    Out {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn json(out: &Out) -> Value {
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("JSON on stdout")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn engine(db: &Path) -> Engine {
    let engine = Engine::new(SqliteStore::open(db).unwrap());
    engine.register::<Report>(()).unwrap();
    engine
}

#[test]
fn schedules_are_listed_paused_resumed_backfilled_and_triggered() {
    let db = temp_db();
    let rt = runtime();
    rt.block_on(async {
        let engine = engine(&db);
        engine
            .schedules()
            .create(
                "weekday-report",
                "Report",
                Schedule::new("0 9 * * MON-FRI").in_zone("Europe/Berlin"),
            )
            .await
            .unwrap();
        engine.shutdown();
    });

    let listed = json(&workflow(
        &db,
        &["--json", "schedules", "list", "--next", "2"],
    ));
    let row = &listed[0];
    assert_eq!(row["id"], "weekday-report");
    assert_eq!(row["workflow"], "Report");
    assert_eq!(row["cron"], "0 9 * * MON-FRI");
    assert_eq!(row["missed"], 0);
    let next: Vec<&str> = row["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(next.len(), 2);
    for at in &next {
        assert!(
            at.contains("T09:00:00+0") && at.ends_with("[Europe/Berlin]"),
            "09:00 Berlin time: {at}"
        );
    }
    let text = workflow(&db, &["schedules", "list"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("SCHEDULE"), "{}", text.stdout);
    assert!(
        text.stdout.contains("0 9 * * MON-FRI Europe/Berlin"),
        "{}",
        text.stdout
    );

    let paused = workflow(&db, &["schedules", "pause", "weekday-report"]);
    assert_eq!(paused.stdout, "schedule weekday-report paused\n");
    let listed = json(&workflow(&db, &["--json", "schedules", "list"]));
    assert_eq!(listed[0]["paused"], true);
    assert_eq!(listed[0]["next"], Value::Array(vec![]));
    assert!(workflow(&db, &["schedules", "list"])
        .stdout
        .contains("paused"));
    let resumed = workflow(&db, &["schedules", "resume", "weekday-report"]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(
        json(&workflow(&db, &["--json", "schedules", "list"]))[0]["paused"],
        false
    );

    // A week of weekdays, listed in Berlin time; the dry run leaves nothing pending.
    let dry = json(&workflow(
        &db,
        &[
            "--json",
            "schedules",
            "backfill",
            "weekday-report",
            "--from",
            "2026-03-23T00:00:00Z",
            "--to",
            "2026-03-30T00:00:00Z",
            "--dry-run",
        ],
    ));
    let ticks: Vec<&str> = dry["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["scheduled"].as_str().unwrap())
        .collect();
    assert_eq!(
        ticks,
        [
            "2026-03-23T09:00:00+01:00[Europe/Berlin]",
            "2026-03-24T09:00:00+01:00[Europe/Berlin]",
            "2026-03-25T09:00:00+01:00[Europe/Berlin]",
            "2026-03-26T09:00:00+01:00[Europe/Berlin]",
            "2026-03-27T09:00:00+01:00[Europe/Berlin]",
        ]
    );
    assert_eq!(
        json(&workflow(&db, &["--json", "schedules", "list"]))[0]["pending"],
        0
    );

    let bad = workflow(
        &db,
        &[
            "schedules",
            "backfill",
            "weekday-report",
            "--from",
            "monday",
            "--to",
            "2026-03-30T00:00:00Z",
        ],
    );
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr
            .contains("--from `monday` is not an RFC 3339 time"),
        "{}",
        bad.stderr
    );
    let unknown = workflow(&db, &["schedules", "pause", "nightly"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("no schedule `nightly`"),
        "{}",
        unknown.stderr
    );

    // A trigger waits in the store; an engine with the workflow starts it, once.
    let triggered = workflow(&db, &["schedules", "trigger", "weekday-report"]);
    assert_eq!(triggered.code, 0, "{}", triggered.stderr);
    assert_eq!(
        json(&workflow(&db, &["--json", "schedules", "list"]))[0]["pending"],
        1
    );
    rt.block_on(async {
        let engine = engine(&db);
        let _ = engine.schedules();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let runs = engine
                .store()
                .runs(RunFilter {
                    workflow: Some("Report".into()),
                    ..RunFilter::default()
                })
                .await
                .unwrap();
            let listed = engine.schedules().list(1).await.unwrap();
            if runs.len() == 1 && listed[0].row.state.pending.is_empty() {
                assert!(runs[0]
                    .idempotency_key
                    .as_deref()
                    .is_some_and(|k| k.starts_with("schedule:weekday-report@")));
                break;
            }
            assert!(runs.len() <= 1, "one run for one trigger");
            assert!(
                Instant::now() < deadline,
                "the engine starts the triggered tick"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        engine.shutdown();
    });
    let listed = json(&workflow(&db, &["--json", "schedules", "list"]));
    assert!(listed[0]["last_run"]
        .as_str()
        .is_some_and(|r| r.starts_with("run-")));

    // The run names the tick that started it.
    let run = listed[0]["last_run"].as_str().unwrap();
    let shown = workflow(&db, &["runs", "show", run]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown
            .stdout
            .contains("tick:     schedule weekday-report, scheduled "),
        "{}",
        shown.stdout
    );
    let shown = json(&workflow(&db, &["--json", "runs", "show", run]));
    assert_eq!(shown["tick"]["schedule"], "weekday-report");
    assert!(shown["tick"]["scheduled"].as_u64().is_some());
    let manual = rt.block_on(async {
        let engine = engine(&db);
        let tick = Tick {
            schedule: "weekday-report".into(),
            scheduled: 0,
            fired: 0,
        };
        let run = engine
            .start::<Report>(ReportInput { tick })
            .await
            .unwrap()
            .id();
        engine.shutdown();
        run
    });
    let shown = json(&workflow(
        &db,
        &["--json", "runs", "show", &manual.to_string()],
    ));
    assert!(shown["tick"].is_null(), "a run started by hand: {shown}");

    let deleted = workflow(&db, &["schedules", "delete", "weekday-report"]);
    assert_eq!(deleted.code, 0, "{}", deleted.stderr);
    assert_eq!(
        workflow(&db, &["schedules", "list"]).stdout,
        "no schedules\n"
    );
}

#[test]
fn missed_ticks_are_listed_from_the_store() {
    let db = temp_db();
    let rt = runtime();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    rt.block_on(async {
        let engine = engine(&db);
        // A schedule whose last decided tick was three days ago, as after an outage: the
        // engine runs none of the missed hourly ticks and records them.
        let mut hourly = Schedule::new("0 * * * *");
        hourly.catchup = workflow_core::schedule::Catchup::None;
        engine
            .store()
            .put_schedule("hourly", "Report", &hourly, now - 72 * 3_600_000)
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info = engine.schedules().get("hourly", 1).await.unwrap();
            if info.row.state.missed > 0 {
                assert!((71..=73).contains(&info.row.state.missed), "{info:?}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the engine records the missed ticks"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        engine.shutdown();
    });
    let listed = json(&workflow(&db, &["--json", "schedules", "missed", "hourly"]));
    let records = listed["missed"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{listed}");
    let count = records[0]["count"].as_u64().unwrap();
    assert!((71..=73).contains(&count), "{listed}");
    let first = records[0]["first_ms"].as_u64().unwrap();
    let last = records[0]["last_ms"].as_u64().unwrap();
    assert_eq!(
        (last - first) / 3_600_000 + 1,
        count,
        "consecutive hourly ticks"
    );
    let text = workflow(&db, &["schedules", "missed", "hourly"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.starts_with("FIRST"), "{}", text.stdout);
    assert!(text.stdout.contains(&count.to_string()), "{}", text.stdout);
    let unknown = workflow(&db, &["schedules", "missed", "nightly"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("no schedule `nightly`"),
        "{}",
        unknown.stderr
    );
}

//! Crash recovery with real kills: a driver process runs workflows on a SQLite store and is
//! killed with SIGKILL at random moments and at named points (just before a step's result
//! is journaled, just after, just before a map item's result is journaled, just after a
//! child run was started), then restarted, again and again.
//!
//! Asserted after every kill: `PRAGMA integrity_check` is ok. At the end: every run
//! completed with the right outputs, every step and every map item completed exactly once
//! in its journal (no completed step or item was lost or run again), every order has
//! exactly one child run, and no effect key was applied twice.
//!
//! `cargo test -p tests --test crash` makes at least 30 kills; the long mode makes 500:
//! `CRASH_KILLS=500 cargo test -p tests --release --test crash -- --nocapture`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_sqlite::SqliteStore;

const RUNS_PER_BATCH: u64 = 10;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn temp_dir() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("workflow-crash-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn integrity_ok(path: &Path) {
    let conn = Connection::open(path).unwrap();
    let result: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(result, "ok", "integrity_check of {}", path.display());
}

fn spawn(store: &Path, ledger: &Path, first: u64, crash_at: Option<String>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash_driver"));
    command.args([
        store.to_str().unwrap(),
        ledger.to_str().unwrap(),
        &first.to_string(),
        &RUNS_PER_BATCH.to_string(),
    ]);
    command.env("RUST_LOG", "off");
    if let Some(point) = crash_at {
        command.env("CRASH_AT", point);
    }
    command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    command.spawn().unwrap()
}

#[test]
fn killed_drivers_lose_and_repeat_nothing() {
    let kills_wanted: usize = std::env::var("CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64)
        | 1;
    println!("crash test seed {seed}, {kills_wanted} kills");
    let mut rng = Rng(seed);
    let dir = temp_dir();
    let store = dir.join("runs.db");
    let ledger = dir.join("ledger.db");
    let (mut kills, mut named_kills, mut batches) = (0usize, 0usize, 0u64);
    let mut completions = 0;
    while kills < kills_wanted {
        let first = batches * RUNS_PER_BATCH;
        loop {
            let named = rng.below(3) == 0;
            let crash_at = named.then(|| {
                let point = [
                    "before_result_append",
                    "after_result_append",
                    "before_item_append",
                    "after_child_start",
                ][rng.below(4) as usize];
                format!("{point}:{}", 1 + rng.below(30))
            });
            let mut child = spawn(&store, &ledger, first, crash_at);
            let status = if named {
                child.wait().unwrap()
            } else {
                std::thread::sleep(Duration::from_millis(2 + rng.below(50)));
                match child.try_wait().unwrap() {
                    Some(status) => status,
                    None => {
                        child.kill().unwrap();
                        child.wait().unwrap()
                    }
                }
            };
            integrity_ok(&store);
            integrity_ok(&ledger);
            if status.success() {
                completions += 1;
                break;
            }
            if status.code().is_some() {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    use std::io::Read;
                    let _ = pipe.read_to_string(&mut stderr);
                }
                panic!("the driver failed on its own ({status}): {stderr}");
            }
            kills += 1;
            named_kills += usize::from(named);
        }
        batches += 1;
    }
    println!("{kills} kills ({named_kills} at named points), {batches} batches, {completions} clean exits");
    assert!(named_kills > 0, "some kills hit the named points");
    verify(&store, &ledger, batches * RUNS_PER_BATCH);
    let _ = std::fs::remove_dir_all(&dir);
}

fn verify(store_path: &Path, ledger_path: &Path, runs: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(store_path).unwrap();
        let all = store.runs(RunFilter::default()).await.unwrap();
        let (records, children): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|r| r.workflow == "Crashy");
        assert_eq!(
            records.len() as u64,
            runs,
            "one run per order, never a second"
        );
        assert_eq!(
            children.len() as u64,
            runs,
            "one child run per order, never a second"
        );
        let mut parents: Vec<_> = children.iter().map(|c| c.parent).collect();
        parents.sort();
        parents.dedup();
        assert_eq!(parents.len() as u64, runs, "each order has its own child");
        for child in &children {
            assert_eq!(
                child.status,
                RunStatus::Completed,
                "{} did not complete",
                child.id
            );
            let events = store.load(child.id).await.unwrap().unwrap().events;
            let done = events
                .iter()
                .filter(|e| matches!(e, Event::StepSucceeded { .. }))
                .count();
            assert_eq!(done, 1, "{}: the child's step completed once", child.id);
        }
        for record in records {
            assert_eq!(
                record.status,
                RunStatus::Completed,
                "{} did not complete",
                record.id
            );
            let events = store.load(record.id).await.unwrap().unwrap().events;
            let Some(Event::RunStarted { input, .. }) = events.first() else {
                panic!("{} has no start", record.id)
            };
            let order = input["order"].as_u64().unwrap();
            let mut outputs: HashMap<usize, serde_json::Value> = HashMap::new();
            let mut items: HashMap<usize, u64> = HashMap::new();
            for event in &events {
                if let Event::StepSucceeded { step, output, .. } = event {
                    let previous = outputs.insert(*step, output.clone());
                    assert!(
                        previous.is_none(),
                        "{}: step #{step} completed twice",
                        record.id
                    );
                }
                if let Event::ItemSucceeded { item, output, .. } = event {
                    let previous = items.insert(*item, output.as_u64().unwrap());
                    assert!(
                        previous.is_none(),
                        "{}: item #{item} of the map completed twice",
                        record.id
                    );
                }
            }
            let (a, c) = (order * 10, order * 20);
            let (b, d) = (a + 1, a + 1 + c);
            let e = b + c + d;
            let expected = HashMap::from([
                (0, json!(a)),
                (1, json!(b)),
                (2, json!(c)),
                (3, json!(d)),
                (4, json!(e)),
                (5, json!([a + 5, b + 5, c + 5])),
                (6, json!({ "packed": e + 1 })),
            ]);
            assert_eq!(outputs, expected, "{}: outputs", record.id);
            assert_eq!(items.len(), 3, "{}: each item once", record.id);
        }
    });
    let ledger = Connection::open(ledger_path).unwrap();
    let twice: i64 = ledger
        .query_row(
            "SELECT count(*) FROM (SELECT key FROM applied GROUP BY key HAVING count(*) > 1)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(twice, 0, "an effect key was applied twice");
    let applied: i64 = ledger
        .query_row("SELECT count(*) FROM applied", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        applied as u64,
        runs * 6,
        "each run applies its six effects (two steps, three items, one child) exactly once"
    );
    let executions: i64 = ledger
        .query_row("SELECT count(*) FROM executions", [], |r| r.get(0))
        .unwrap();
    println!("{applied} effects applied, {executions} executions (re-runs deduplicated by key)");
}

/// Killed in the middle of an external effect that is neither idempotent nor reconciled:
/// the restarted driver does not pay again; the run goes to an operator as
/// `outcome_unknown`.
#[test]
fn a_kill_inside_an_unguarded_effect_is_not_repeated_on_restart() {
    let dir = temp_dir();
    let store = dir.join("blind.db");
    let ledger = dir.join("blind-ledger.db");
    let run = |kill: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_crash_driver"));
        command
            .args([store.to_str().unwrap(), ledger.to_str().unwrap(), "1", "1"])
            .env("CRASH_WORKFLOW", "blind")
            .env("RUST_LOG", "off")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if kill {
            command.env("KILL_IN_EFFECT", "1");
        }
        command.output().unwrap()
    };
    let killed = run(true);
    assert_eq!(killed.status.code(), None, "killed by a signal: {killed:?}");
    integrity_ok(&store);
    let resumed = run(false);
    assert_eq!(
        resumed.status.code(),
        Some(3),
        "the outcome is unknown: {}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let ledger = Connection::open(&ledger).unwrap();
    let executions: i64 = ledger
        .query_row("SELECT count(*) FROM executions", [], |row| row.get(0))
        .unwrap();
    assert_eq!(executions, 1, "the payment ran once");
    let store = SqliteStore::open(&store).unwrap();
    let letters = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(store.dead_letters())
        .unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!((letters[0].step.as_str(), letters[0].attempts), ("pay", 1));
    assert_eq!(letters[0].kind, workflow_core::ErrorKind::OutcomeUnknown);
    let _ = std::fs::remove_dir_all(&dir);
}

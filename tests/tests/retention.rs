//! Retention: finished runs purged in batches, crash-safe under real kills, never a
//! running run; the engine's background purge on paused time; search values end to end.
//!
//! The kill test grows a SQLite store, then starts `purge_worker` (batches of a few runs,
//! each one transaction) and kills it with SIGKILL after a varying number of batches,
//! again and again until the purge is done. After every kill the store is checked as
//! `workflow check` checks it (`Store::verify`: SQLite's integrity check, every row's
//! checksum, and no row of a run that is gone nor a run without its journal), every
//! running run is whole, and every finished run is either whole or gone.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::{
    Commit, DeadLetter, DeadLetterChange, MemoryStore, Message, NewRun, RunFilter, RunStatus, Store,
};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

const RUNS: u64 = 700;

/// Adds `RUNS` runs, each with two journal entries, search values and an inbox message;
/// six of seven finished at `1_000 + n` (failed ones with a dead letter), the seventh left
/// running. Returns each run's status.
async fn grow(store: &SqliteStore) -> BTreeMap<RunId, RunStatus> {
    let mut statuses = BTreeMap::new();
    for n in 0..RUNS {
        let at = 1_000 + n;
        let events = [
            Event::RunStarted {
                workflow: "order".into(),
                fingerprint: "fp".into(),
                input: json!({ "order": { "id": n } }),
                seed: n,
                trace_id: format!("{n:016x}"),
                parent_span: None,
                dry_run: false,
                deadline: None,
                at,
            },
            Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at,
            },
        ];
        let search = vec![
            ("customer_id".to_owned(), format!("c-{}", n % 10)),
            ("id".to_owned(), n.to_string()),
        ];
        let run = store
            .create_run(NewRun {
                workflow: "order",
                fingerprint: "fp",
                idempotency_key: None,
                events: &events,
                parent: None,
                owner: None,
                supersedes: None,
                at,
                search: &search,
            })
            .await
            .expect("create")
            .id();
        store
            .submit(run, &Message::Cancel { by: "ops".into() }, None, at)
            .await
            .expect("submit");
        if n % 7 == 0 {
            statuses.insert(run, RunStatus::Running);
            continue;
        }
        let status = [
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ][(n % 3) as usize];
        let letter = DeadLetter {
            run,
            workflow: "order".into(),
            step: "charge".into(),
            attempts: 1,
            kind: ErrorKind::Validation,
            message: "declined".into(),
            trace_id: format!("{n:016x}"),
            at,
        };
        store
            .commit(Commit {
                status: Some((status, None)),
                dead_letter: if status == RunStatus::Failed {
                    DeadLetterChange::Put(&letter)
                } else {
                    DeadLetterChange::Keep
                },
                ..Commit::events(run, 2, &[], at)
            })
            .await
            .expect("finish");
        statuses.insert(run, status);
    }
    statuses
}

/// The checks after a kill: the store verifies clean, running runs are whole, finished
/// ones whole or gone. Returns how many finished runs are left.
async fn check(path: &std::path::Path, statuses: &BTreeMap<RunId, RunStatus>) -> usize {
    let store = SqliteStore::open(path).expect("reopen");
    let verification = store.verify().await.expect("verify");
    assert!(verification.is_clean(), "{verification:?}");
    let letters = store.dead_letters().await.expect("dead letters");
    let mut left = 0;
    for (run, status) in statuses {
        match store.load(*run).await.expect("load") {
            Some(stored) => {
                assert_eq!(stored.events.len(), 2, "{run} is whole");
                assert_eq!(stored.record.status, *status);
                assert_eq!(store.inbox(*run, 0).await.expect("inbox").len(), 1);
                if *status == RunStatus::Failed {
                    assert!(letters.iter().any(|l| l.run == *run), "{run}'s dead letter");
                }
                if status.is_finished() {
                    left += 1;
                }
            }
            None => assert!(status.is_finished(), "running {run} was purged"),
        }
    }
    left
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_purges_leave_no_half_run_and_never_touch_a_running_one() {
    let dir = std::env::temp_dir().join(format!("workflow-retention-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("runs.db");
    let _ = std::fs::remove_file(&path);
    let statuses = {
        let store = SqliteStore::open_with(
            &path,
            SqliteOptions {
                synchronous: Synchronous::Off,
                ..SqliteOptions::default()
            },
        )
        .expect("open");
        grow(&store).await
    };
    let finished = statuses.values().filter(|s| s.is_finished()).count();
    let pages = |path: &std::path::Path| -> i64 {
        let conn = workflow_sqlite::rusqlite::Connection::open(path).expect("open");
        conn.query_row("PRAGMA page_count", [], |row| row.get(0))
            .expect("page count")
    };
    let grown = pages(&path);
    let mut kills = 0;
    let mut left = check(&path, &statuses).await;
    assert_eq!(left, finished);
    // Kill after 1, 2, 3, ... batches: each kill lands in the batch that follows.
    for round in 1.. {
        let mut worker = Command::new(env!("CARGO_BIN_EXE_purge_worker"))
            .args([path.to_str().expect("utf-8 path"), "100000", "7"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the purge worker");
        let stdout = worker.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = 0;
        let mut done = false;
        while seen < round {
            match lines.next() {
                Some(Ok(_)) => seen += 1,
                _ => {
                    done = true;
                    break;
                }
            }
        }
        if done {
            assert!(worker.wait().expect("wait").success(), "the worker failed");
        } else {
            worker.kill().expect("kill");
            worker.wait().expect("wait");
            kills += 1;
        }
        let now_left = check(&path, &statuses).await;
        assert!(now_left <= left, "runs came back");
        left = now_left;
        if done {
            break;
        }
    }
    assert_eq!(left, 0, "every finished run is purged in the end");
    assert!(kills >= 5, "only {kills} kills");
    // A new file reclaims the purged runs' pages (`auto_vacuum = INCREMENTAL`).
    let purged = pages(&path);
    assert!(
        purged < grown,
        "{purged} pages after the purge, {grown} before"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ------------------------------------------------------------------------ the engine

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub id: u64,
    pub customer_id: String,
    pub coupon: Option<String>,
}

async fn charge(order: Order) -> Result<u64, StepError> {
    Ok(order.id)
}

async fn wait_forever(_order: Order) -> Result<(), StepError> {
    std::future::pending().await
}

workflow! {
    pub workflow Charge(order: Order) {
        search: [order.customer_id, order.id, order.coupon],
        retention: 2h,
        step charge -> u64 { action: charge(order) }
    }
}

workflow! {
    pub workflow Nightly(order: Order) {
        step work -> u64 { action: charge(order) }
    }
}

workflow! {
    pub workflow Hang(order: Order) {
        step hang -> () { action: wait_forever(order) }
    }
}

fn order(id: u64, customer: &str) -> Order {
    Order {
        id,
        customer_id: customer.to_owned(),
        coupon: id.is_multiple_of(2).then(|| format!("SAVE{id}")),
    }
}

async fn ids(engine: &Engine, search: &[(&str, &str)]) -> Vec<RunId> {
    engine
        .runs(RunFilter {
            search: search
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            ..RunFilter::default()
        })
        .await
        .expect("runs")
        .into_iter()
        .map(|r| r.id)
        .collect()
}

#[tokio::test]
async fn runs_are_found_by_the_values_their_spec_names() {
    let engine = Engine::new(MemoryStore::new());
    engine.register::<Charge>(()).expect("register");
    let a = engine
        .start::<Charge>(ChargeInput {
            order: order(1, "c-42"),
        })
        .await
        .expect("start");
    let b = engine
        .start::<Charge>(ChargeInput {
            order: order(2, "c-7"),
        })
        .await
        .expect("start");
    let c = engine
        .start::<Charge>(ChargeInput {
            order: order(3, "c-42"),
        })
        .await
        .expect("start");
    for run in [&a, &b, &c] {
        run.outputs().await.expect("done");
    }
    assert_eq!(
        ids(&engine, &[("customer_id", "c-42")]).await,
        [c.id(), a.id()]
    );
    assert_eq!(
        ids(&engine, &[("customer_id", "c-42"), ("id", "3")]).await,
        [c.id()]
    );
    assert_eq!(ids(&engine, &[("coupon", "SAVE2")]).await, [b.id()]);
    // An absent value (`coupon: None`) is not stored.
    assert!(ids(&engine, &[("coupon", "")]).await.is_empty());
    assert!(ids(&engine, &[("customer_id", "c-1")]).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_engine_purges_finished_runs_past_their_retention_in_the_background() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = Engine::builder()
        .shared_store(Arc::clone(&store))
        .retention(Duration::from_secs(30 * 60))
        .build();
    engine.register::<Charge>(()).expect("register");
    engine.register::<Nightly>(()).expect("register");
    engine.register::<Hang>(()).expect("register");
    let charge = engine
        .start::<Charge>(ChargeInput {
            order: order(1, "c-1"),
        })
        .await
        .expect("start");
    let nightly = engine
        .start::<Nightly>(NightlyInput {
            order: order(2, "c-1"),
        })
        .await
        .expect("start");
    let hang = engine
        .start::<Hang>(HangInput {
            order: order(3, "c-1"),
        })
        .await
        .expect("start");
    charge.outputs().await.expect("done");
    nightly.outputs().await.expect("done");
    let exists = |run: RunId| {
        let store = Arc::clone(&store);
        async move { store.load(run).await.expect("load").is_some() }
    };
    // The engine-wide 30 minutes purge `Nightly`; `Charge` keeps its own 2 hours.
    // Half a period past a pass, so the test never looks at the instant a pass runs.
    tokio::time::sleep(Duration::from_secs(31 * 60 + 30)).await;
    assert!(
        !exists(nightly.id()).await,
        "Nightly is past the default retention"
    );
    assert!(exists(charge.id()).await, "Charge keeps its runs for 2h");
    tokio::time::sleep(Duration::from_secs(90 * 60)).await;
    assert!(!exists(charge.id()).await, "Charge is past its retention");
    assert!(ids(&engine, &[("customer_id", "c-1")]).await.is_empty());
    // A running run is never purged, however old.
    tokio::time::sleep(Duration::from_secs(10 * 3600)).await;
    assert!(exists(hang.id()).await);
    assert_eq!(
        store
            .load(hang.id())
            .await
            .expect("load")
            .expect("hang")
            .record
            .status,
        RunStatus::Running
    );
    assert_eq!(engine.purge_expired().await.expect("purge"), 0);
}

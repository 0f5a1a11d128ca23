//! Hostile disks: a store that stops accepting writes (full, read-only, permission
//! removed) gives typed errors naming the file and the cause; the engine keeps what was
//! committed, takes no new work, and carries on when the condition clears, losing and
//! repeating nothing.
//!
//! The full disk is real: the SQLite file is capped (`SqliteOptions::max_size`, SQLite's
//! `max_page_count`), so its writes fail with `SQLITE_FULL` as on a full file system. A
//! read-only directory and removed permissions cannot be produced for a process running as
//! root (these machines run tests as root), so those are injected with
//! `testing::FaultyStore`, which fails writes exactly as the SQLite store reports them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use workflow_core::clock::TokioClock;
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, Store, StoreError};
use workflow_core::testing::{FaultyStore, Write};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

#[derive(Default)]
pub struct Counter {
    calls: [AtomicUsize; 4],
}

async fn write_page(counter: &Counter, ctx: &StepContext, n: usize) -> Result<String, StepError> {
    counter.calls[n].fetch_add(1, Ordering::SeqCst);
    // A large output: each step needs a few new pages of the file.
    Ok(format!("{}:{}", ctx.step, "x".repeat(12_000)))
}

workflow! {
    /// Four steps with large outputs.
    workflow Pages() env Counter {
        step a -> String { action: write_page(env, ctx, 0) }
        step b -> String { action: write_page(env, ctx, 1), depends_on: [a] }
        step c -> String { action: write_page(env, ctx, 2), depends_on: [b] }
        step d -> String { action: write_page(env, ctx, 3), depends_on: [c] }
    }
}

fn steps_succeeded(events: &[Event]) -> Vec<usize> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::StepSucceeded { step, .. } => Some(*step),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_new_work_and_the_run_carries_on_when_space_is_freed() {
    let dir = std::env::temp_dir().join(format!("workflow-full-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("full.db");
    let _ = std::fs::remove_file(&path);
    let options = SqliteOptions {
        synchronous: Synchronous::Off,
        ..SqliteOptions::default()
    };
    let store = Arc::new(SqliteStore::open_with(&path, options).unwrap());
    // Room for the schema (whatever it takes) and a little more, not for four large
    // outputs (48 KB).
    let schema_bytes: u64 = {
        let reader = rusqlite::Connection::open(&path).unwrap();
        let pages: u64 = reader
            .pragma_query_value(None, "page_count", |row| row.get(0))
            .unwrap();
        let page_size: u64 = reader
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .unwrap();
        pages * page_size
    };
    store
        .set_max_size(Some(schema_bytes + 24 * 1024))
        .await
        .unwrap();
    let engine = Engine::builder().shared_store(store.clone()).build();
    engine.register::<Pages>(Counter::default()).unwrap();
    let run = engine.start::<Pages>(PagesInput {}).await.unwrap();

    // The run fills the file; its commits are refused and retried.
    let mut refused = None;
    for _ in 0..200 {
        match engine.start::<Pages>(PagesInput {}).await {
            Err(RunError::Store(error)) => {
                refused = Some(error);
                break;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(other) => panic!("unexpected: {other}"),
        }
    }
    let refused = refused.expect("new work is refused while the disk is full");
    assert_eq!(
        refused,
        StoreError::DiskFull {
            path: path.display().to_string()
        }
    );
    assert!(
        refused.to_string().contains("the disk is full"),
        "{refused}"
    );

    store.set_max_size(None).await.unwrap();
    let outputs = tokio::time::timeout(Duration::from_secs(60), run.outputs())
        .await
        .expect("the run carries on once space is freed")
        .expect("outputs");
    assert!(outputs.d.starts_with("d:"));
    let events = engine.events(run.id()).await.unwrap();
    assert_eq!(steps_succeeded(&events), [0, 1, 2, 3], "each step once");
    let started: Vec<&Event> = events
        .iter()
        .filter(|e| matches!(e, Event::AttemptStarted { .. }))
        .collect();
    assert_eq!(
        started.len(),
        4,
        "no attempt was started twice: {started:?}"
    );
    drop(engine);
    drop(store);
    let conn = workflow_sqlite::rusqlite::Connection::open(&path).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run through a store that refuses writes with `error` for a while.
async fn refused_for_a_while(error: StoreError) {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let store: Arc<dyn Store> = Arc::new(faulty.clone());
    let engine = Engine::builder()
        .shared_store(store.clone())
        .clock(TokioClock::starting_at(0))
        .build();
    let counter = Counter::default();
    engine.register::<Pages>(counter).unwrap();
    let run = engine.start::<Pages>(PagesInput {}).await.unwrap();
    faulty.fail_always(Write::Commit, error.clone());
    faulty.fail_always(Write::Create, error.clone());

    // Nothing new is taken: starts fail with the store's error.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let Err(refused) = engine.start::<Pages>(PagesInput {}).await else {
        panic!("a start was accepted by a store that refuses writes");
    };
    assert_eq!(refused, RunError::Store(error.clone()));
    // The run waits, retrying, far longer than a step takes.
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert!(faulty.failures() > 3, "the commit was retried");
    let before = engine.events(run.id()).await.unwrap();
    assert!(steps_succeeded(&before).len() < 4);

    faulty.heal();
    let outputs = tokio::time::timeout(Duration::from_secs(60), run.outputs())
        .await
        .expect("carries on")
        .expect("outputs");
    assert!(outputs.d.starts_with("d:"));
    let events = engine.events(run.id()).await.unwrap();
    assert_eq!(
        steps_succeeded(&events),
        [0, 1, 2, 3],
        "nothing lost or repeated"
    );
    assert_eq!(
        events[..before.len()],
        before[..],
        "what was committed stays as it was"
    );
}

#[tokio::test(start_paused = true)]
async fn a_read_only_store_stops_new_work_and_the_run_carries_on_when_writable() {
    refused_for_a_while(StoreError::ReadOnly {
        path: "/var/lib/app/runs.db".into(),
        reason: "attempt to write a readonly database".into(),
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn removed_permissions_stop_new_work_and_the_run_carries_on_when_restored() {
    refused_for_a_while(StoreError::PermissionDenied {
        path: "/var/lib/app/runs.db".into(),
        reason: "unable to open database file".into(),
    })
    .await;
}

#[test]
fn sqlite_failures_are_typed_with_the_path_and_the_cause() {
    let dir = std::env::temp_dir().join(format!("workflow-typed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A directory where the file should be.
    let error = SqliteStore::open(&dir).expect_err("a directory is no store");
    assert!(
        error.to_string().contains(&dir.display().to_string()),
        "{error}"
    );
    // A missing parent directory.
    let missing = dir.join("no-such-dir").join("runs.db");
    let error = SqliteStore::open(&missing).expect_err("no directory");
    assert!(
        error.to_string().contains(&missing.display().to_string()),
        "{error}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

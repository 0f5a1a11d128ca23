//! An admission pass that finds no gated run leaves nothing behind: a write is queued to
//! the writer as soon as it is made and stands even if nobody awaits it, so an admission
//! whose answer nobody reads would hold runs that no engine drives.

use std::path::PathBuf;

use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::store::limits::{Admit, Gate, OnLimit, RunLimit, AGING_STEP_MS};
use workflow_core::store::{Claimant, NewRun, Store};
use workflow_sqlite::SqliteStore;

fn file(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::env::temp_dir().join(format!(
        "workflow-sqlite-{name}-{}-{nanos}.db",
        std::process::id()
    ))
}

fn started(at: u64) -> Event {
    Event::RunStarted {
        workflow: "review".to_owned(),
        fingerprint: "fp1".to_owned(),
        input: json!({ "customer": "c-1" }),
        seed: 1,
        trace_id: "trace-1".to_owned(),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at,
    }
}

#[tokio::test]
async fn an_admission_that_finds_nothing_admits_nothing_later() {
    let path = file("admission-orphan");
    let store = SqliteStore::open(&path).expect("open");
    let now = 1_000_000;
    let limits = [RunLimit {
        workflow: "review",
        limit: 1,
        on_limit: OnLimit::Queue,
    }];
    let admit = || Admit {
        claimant: Claimant {
            owner: "engine-a",
            lease_ms: 60_000,
            now,
        },
        versions: &["fp1"],
        limits: &limits,
        room: 8,
        aging_ms: AGING_STEP_MS,
    };

    // Another process holds the file. A start's write is queued as soon as it is made
    // and waits, uncommitted, until the file is free.
    let holder = rusqlite::Connection::open(&path).expect("open the file with rusqlite");
    holder
        .execute_batch("BEGIN IMMEDIATE")
        .expect("lock the file");
    let events = [started(now)];
    let create = store.create_gated(
        NewRun {
            workflow: "review",
            fingerprint: "fp1",
            idempotency_key: None,
            events: &events,
            search: &[],
            parent: None,
            owner: None,
            supersedes: None,
            at: now,
        },
        Gate {
            concurrency: Some(("review", "c-1")),
            priority: 0,
            debounce: None,
        },
    );

    // An admission pass meanwhile sees no gated run and admits nothing.
    let admission = store.admit(admit()).await.expect("admit");
    assert!(admission.admitted.is_empty(), "{admission:?}");

    holder.execute_batch("COMMIT").expect("unlock");
    let run = create.await.expect("created").id();
    // Whatever was written after the start: the run still waits for an admission, and
    // the next pass admits it, to the engine that asks.
    let flow = store.flow_of(run).await.expect("flow");
    assert!(
        !flow.gate.as_ref().expect("gated").admitted,
        "admitted by a pass nobody heard: {flow:?}"
    );
    let admission = store.admit(admit()).await.expect("admit");
    assert_eq!(
        admission
            .admitted
            .iter()
            .map(|a| a.lease.run)
            .collect::<Vec<_>>(),
        [run]
    );
    drop(store);
    let _ = std::fs::remove_file(&path);
}

//! How the SQLite store commits: writes awaited together on one thread share a commit,
//! and what the write connection remembers of a run (its owner, token and journal
//! length) never outlives a write made by another connection to the same file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::store::{
    checksum, Claimant, Commit, DeadLetterChange, Fence, NewRun, PurgeFilter, RunStatus, Store,
    StoreError,
};
use workflow_core::RunId;
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "workflow-sqlite-commits-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &TempDir) -> SqliteStore {
    let options = SqliteOptions {
        synchronous: Synchronous::Off,
        ..SqliteOptions::default()
    };
    SqliteStore::open_with(dir.0.join("store.db"), options).expect("open the store")
}

fn attempt(step: usize, at: u64) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at,
    }
}

/// Creates a run owned by `owner` (token 1): one journal entry.
async fn create_owned(store: &SqliteStore, owner: &str) -> RunId {
    let events = [Event::RunStarted {
        workflow: "onboard".to_owned(),
        fingerprint: "fp1".to_owned(),
        input: json!({}),
        seed: 1,
        trace_id: "trace-1".to_owned(),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at: 1,
    }];
    store
        .create_run(NewRun {
            workflow: "onboard",
            fingerprint: "fp1",
            idempotency_key: None,
            events: &events,
            parent: None,
            owner: Some(Claimant {
                owner,
                lease_ms: 60_000,
                now: 1,
            }),
            supersedes: None,
            at: 1,
            search: &[],
        })
        .await
        .expect("create a run")
        .id()
}

async fn commit_as(
    store: &SqliteStore,
    run: RunId,
    owner: &str,
    token: u64,
    seq: u64,
) -> Result<(), StoreError> {
    let events = [attempt(seq as usize, 10 + seq)];
    store
        .commit(Commit {
            run,
            seq,
            events: &events,
            fence: Some(Fence { owner, token }),
            status: None,
            dead_letter: DeadLetterChange::Keep,
            inbox_cursor: None,
            at: 10 + seq,
        })
        .await
}

#[tokio::test]
async fn writes_awaited_together_on_one_thread_share_commits() {
    let dir = TempDir::new("together");
    let store = Arc::new(open(&dir));
    let mut runs = Vec::new();
    for _ in 0..20 {
        runs.push(create_owned(&store, "a").await);
    }
    let before = store.commits();
    // One thread (the test's current-thread runtime): every write is made on it.
    let tasks: Vec<_> = runs
        .iter()
        .map(|&run| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for seq in 1..=3 {
                    commit_as(&store, run, "a", 1, seq).await?;
                }
                Ok::<(), StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await
            .expect("the task ran")
            .expect("every commit lands");
    }
    let commits = store.commits() - before;
    assert!(commits <= 6, "{commits} commits for 60 writes of 20 runs");
    for &run in &runs {
        let stored = store.load(run).await.expect("load").expect("the run");
        assert_eq!(stored.events.len(), 4, "{run}");
    }
}

#[tokio::test]
async fn a_claim_by_another_connection_fences_the_next_commit() {
    let dir = TempDir::new("claimed");
    let store = open(&dir);
    let run = create_owned(&store, "a").await;
    commit_as(&store, run, "a", 1, 1)
        .await
        .expect("the owner commits");
    // Another process takes the run over.
    let other = rusqlite::Connection::open(dir.0.join("store.db")).expect("open with rusqlite");
    other
        .execute(
            "UPDATE runs SET owner = 'b', lease_token = 2 WHERE id = ?1",
            [run.0],
        )
        .expect("take the run over");
    let refused = commit_as(&store, run, "a", 1, 2).await;
    assert!(
        matches!(refused, Err(StoreError::Fenced { .. })),
        "{refused:?}"
    );
    commit_as(&store, run, "b", 2, 2)
        .await
        .expect("the new owner commits");
}

#[tokio::test]
async fn an_entry_appended_by_another_connection_moves_the_next_sequence_number() {
    let dir = TempDir::new("appended");
    let store = open(&dir);
    let run = create_owned(&store, "a").await;
    commit_as(&store, run, "a", 1, 1)
        .await
        .expect("the owner commits");
    let other = rusqlite::Connection::open(dir.0.join("store.db")).expect("open with rusqlite");
    let event = serde_json::to_string(&attempt(2, 12)).expect("json");
    other
        .execute(
            "INSERT INTO journal (run_id, seq, event, crc) VALUES (?1, 2, ?2, ?3)",
            rusqlite::params![run.0, event, checksum::entry(run, 2, &event)],
        )
        .expect("append entry 2");
    // Entry 3 comes next, not entry 2: a commit at 3 lands where one at 2 conflicts.
    commit_as(&store, run, "a", 1, 3)
        .await
        .expect("entry 3 comes next");
    let conflict = commit_as(&store, run, "a", 1, 3).await;
    assert!(
        matches!(conflict, Err(StoreError::Conflict { seq: 3, .. })),
        "{conflict:?}"
    );
    let stored = store.load(run).await.expect("load").expect("the run");
    assert_eq!(stored.events.len(), 4);
}

/// The file's free pages, read through a connection of its own.
fn free_pages(dir: &TempDir) -> i64 {
    let conn = rusqlite::Connection::open(dir.0.join("store.db")).expect("open the file");
    conn.query_row("PRAGMA freelist_count", [], |row| row.get(0))
        .expect("freelist_count")
}

#[tokio::test]
async fn a_purge_deletes_runs_in_several_transactions_and_vacuums_once_at_the_end() {
    let dir = TempDir::new("purge");
    let store = open(&dir);
    let mut runs = Vec::new();
    for _ in 0..30 {
        let run = create_owned(&store, "a").await;
        for seq in 1..20 {
            commit_as(&store, run, "a", 1, seq).await.expect("commit");
        }
        store
            .commit(Commit {
                status: Some((RunStatus::Completed, None)),
                fence: Some(Fence {
                    owner: "a",
                    token: 1,
                }),
                ..Commit::events(run, 20, &[], 100)
            })
            .await
            .expect("finish");
        runs.push(run);
    }
    let filter = |after: Option<RunId>| PurgeFilter {
        before: 1_000,
        after,
        limit: 25,
        ..PurgeFilter::default()
    };
    let before = store.commits();
    let first = store.purge(filter(None)).await.expect("purge");
    assert_eq!(first, runs[..25]);
    // Deleted a few runs at a time, so that other writes go between; the walk did not
    // reach its end yet, so the freed pages wait for it.
    assert!(store.commits() - before > 1, "one transaction for 25 runs");
    assert!(free_pages(&dir) > 0);
    let rest = store
        .purge(filter(first.last().copied()))
        .await
        .expect("purge");
    assert_eq!(rest, runs[25..]);
    assert_eq!(free_pages(&dir), 0, "the pass ended with a vacuum");
    for run in runs {
        assert!(
            store.load(run).await.expect("load").is_none(),
            "{run} is gone"
        );
    }
    assert!(store.verify().await.expect("verify").is_clean());
}

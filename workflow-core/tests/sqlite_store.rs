//! The SQLite store: the `Store` contract, durability across opens, group commit, and
//! the files it must refuse without touching them.
#![cfg(feature = "sqlite")]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::store::{
    Created, DeadLetter, NewRun, RunFilter, RunStatus, SqliteOptions, SqliteStore, Store,
    StoreError, Synchronous,
};
use workflow_core::{ErrorKind, RunId};

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "workflow-sqlite-{name}-{}-{nanos}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn started(workflow: &str, at: u64) -> Event {
    Event::RunStarted {
        workflow: workflow.to_owned(),
        fingerprint: "fp1".to_owned(),
        input: json!({ "user": "ada", "tags": ["a", "b"] }),
        seed: 42,
        trace_id: "trace-1".to_owned(),
        dry_run: false,
        deadline: Some(at + 60_000),
        at,
    }
}

async fn create(store: &SqliteStore, workflow: &str, key: Option<&str>, at: u64) -> Created {
    let event = started(workflow, at);
    store
        .create_run(NewRun {
            workflow,
            fingerprint: "fp1",
            idempotency_key: key,
            started: &event,
            at,
        })
        .await
        .expect("create a run")
}

fn attempt(step: usize, at: u64) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at,
    }
}

fn letter(run: RunId, at: u64) -> DeadLetter {
    DeadLetter {
        run,
        workflow: "onboard".to_owned(),
        step: "send_welcome_email".to_owned(),
        attempts: 3,
        kind: ErrorKind::Unavailable,
        message: "smtp down".to_owned(),
        trace_id: format!("trace-{}", run.0),
        at,
    }
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).expect("open the file with rusqlite")
}

fn assert_integrity(path: &Path) {
    let verdict: String = raw(path)
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("run integrity_check");
    assert_eq!(verdict, "ok");
}

fn short_timeout() -> SqliteOptions {
    SqliteOptions {
        busy_timeout: Duration::from_millis(200),
        ..SqliteOptions::default()
    }
}

#[test]
fn the_store_is_shareable_and_printable() {
    fn shareable<T: Send + Sync + 'static + std::fmt::Debug>() {}
    shareable::<SqliteStore>();
    let options = SqliteOptions::default();
    assert_eq!(options.synchronous, Synchronous::Full);
    assert_eq!(options.busy_timeout, Duration::from_secs(5));
}

#[tokio::test]
async fn create_is_idempotent_per_workflow_and_key() {
    let dir = TempDir::new("create");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.path(), path.as_path());
    assert!(format!("{store:?}").contains("SqliteStore"));

    let first = create(&store, "onboard", Some("evt-1"), 1_000).await;
    assert_eq!(first, Created::New(RunId(1)));
    assert_eq!(
        create(&store, "onboard", Some("evt-1"), 2_000).await,
        Created::Existing(RunId(1))
    );
    // The same key under another workflow, and runs without a key, are new runs.
    assert_eq!(
        create(&store, "offboard", Some("evt-1"), 3_000).await,
        Created::New(RunId(2))
    );
    assert_eq!(
        create(&store, "onboard", None, 4_000).await,
        Created::New(RunId(3))
    );
    assert_eq!(
        create(&store, "onboard", None, 5_000).await,
        Created::New(RunId(4))
    );
    assert_eq!(store.journal_writes(), 4);

    let loaded = store
        .load(RunId(1))
        .await
        .expect("load")
        .expect("run 1 exists");
    assert_eq!(loaded.record.workflow, "onboard");
    assert_eq!(loaded.record.fingerprint, "fp1");
    assert_eq!(loaded.record.status, RunStatus::Running);
    assert_eq!(loaded.record.idempotency_key.as_deref(), Some("evt-1"));
    assert_eq!(loaded.record.created_at, 1_000);
    assert_eq!(loaded.events, vec![started("onboard", 1_000)]);
    assert_eq!(store.load(RunId(99)).await, Ok(None));
    drop(store);
    assert_integrity(&path);
}

#[tokio::test]
async fn appended_events_load_back_in_order() {
    let dir = TempDir::new("roundtrip");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let run = create(&store, "onboard", None, 1_000).await.id();
    let events = vec![
        started("onboard", 1_000),
        attempt(0, 1_001),
        Event::AttemptFailed {
            step: 0,
            attempt: 1,
            kind: ErrorKind::RateLimited,
            message: "slow down \u{1F6A6} \"quoted\"".to_owned(),
            retry_after: Some(250),
            at: 1_002,
        },
        Event::StepSucceeded {
            step: 0,
            output: json!({ "id": 7, "nested": { "ok": true, "none": null } }),
            at: 1_003,
        },
        Event::TaskOpened {
            step: 1,
            assignee: "managers".to_owned(),
            prompt: None,
            deadline: 172_800_000,
            at: 1_004,
        },
        Event::TaskDecided {
            step: 1,
            by: "grace".to_owned(),
            decision: json!("approve"),
            at: 1_005,
        },
        Event::Compensated {
            step: 0,
            error: Some("undo failed".to_owned()),
            at: 1_006,
        },
        Event::DeadlinePassed { at: 1_007 },
    ];
    for (seq, event) in events.iter().enumerate().skip(1) {
        store.append(run, seq as u64, event).await.expect("append");
    }
    let loaded = store
        .load(run)
        .await
        .expect("load")
        .expect("the run exists");
    assert_eq!(loaded.events, events);
    assert_eq!(loaded.record.updated_at, 1_007);
    assert_eq!(store.journal_writes(), events.len() as u64);
    drop(store);
    assert_integrity(&path);
}

#[tokio::test]
async fn a_taken_sequence_number_conflicts_alone() {
    let dir = TempDir::new("conflict");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let a = create(&store, "onboard", None, 1).await.id();
    let b = create(&store, "onboard", None, 2).await.id();
    store.append(a, 1, &attempt(0, 3)).await.expect("append");
    assert_eq!(
        store.append(a, 1, &attempt(1, 4)).await,
        Err(StoreError::Conflict { run: a, seq: 1 })
    );
    // A gap is a conflict too, as in the memory store.
    assert_eq!(
        store.append(a, 5, &attempt(1, 4)).await,
        Err(StoreError::Conflict { run: a, seq: 5 })
    );
    assert_eq!(
        store.append(RunId(77), 1, &attempt(0, 4)).await,
        Err(StoreError::UnknownRun(RunId(77)))
    );

    // Requests queued together share a transaction; the conflicting one fails alone.
    let (ok_a, bad_a, ok_b) = (attempt(2, 5), attempt(3, 5), attempt(0, 5));
    let first = store.append(a, 2, &ok_a);
    let second = store.append(a, 2, &bad_a);
    let third = store.append(b, 1, &ok_b);
    let (first, second, third) = tokio::join!(first, second, third);
    assert_eq!(first, Ok(()));
    assert_eq!(second, Err(StoreError::Conflict { run: a, seq: 2 }));
    assert_eq!(third, Ok(()));

    let a_events = store.load(a).await.expect("load").expect("a exists").events;
    assert_eq!(a_events.len(), 3);
    assert_eq!(a_events[2], ok_a);
    let b_events = store.load(b).await.expect("load").expect("b exists").events;
    assert_eq!(b_events, vec![started("onboard", 2), ok_b]);
    // Two creations and three successful appends.
    assert_eq!(store.journal_writes(), 5);
    drop(store);
    assert_integrity(&path);
}

#[tokio::test]
async fn statuses_and_dead_letters() {
    let dir = TempDir::new("dead");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let a = create(&store, "onboard", None, 1).await.id();
    let b = create(&store, "onboard", None, 2).await.id();
    let c = create(&store, "onboard", None, 3).await.id();

    store
        .set_status(
            a,
            RunStatus::Failed,
            Some("smtp down"),
            Some(&letter(a, 10)),
        )
        .await
        .expect("fail a");
    store
        .set_status(b, RunStatus::Failed, Some("timeout"), Some(&letter(b, 20)))
        .await
        .expect("fail b");
    store
        .set_status(c, RunStatus::Parked, Some("spec changed"), None)
        .await
        .expect("park c");
    assert_eq!(
        store
            .set_status(RunId(42), RunStatus::Completed, None, None)
            .await,
        Err(StoreError::UnknownRun(RunId(42)))
    );

    let record = store.load(a).await.expect("load").expect("a exists").record;
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.note.as_deref(), Some("smtp down"));
    let record = store.load(c).await.expect("load").expect("c exists").record;
    assert_eq!(record.status, RunStatus::Parked);
    assert_eq!(record.note.as_deref(), Some("spec changed"));

    assert_eq!(
        store.dead_letters().await,
        Ok(vec![letter(b, 20), letter(a, 10)])
    );
    store.remove_dead_letter(b).await.expect("remove");
    store
        .remove_dead_letter(b)
        .await
        .expect("removing twice is fine");
    assert_eq!(store.dead_letters().await, Ok(vec![letter(a, 10)]));

    // Retried, then completed: the note is cleared.
    store
        .set_status(a, RunStatus::Completed, None, None)
        .await
        .expect("complete a");
    let record = store.load(a).await.expect("load").expect("a exists").record;
    assert_eq!((record.status, record.note), (RunStatus::Completed, None));
    drop(store);
    assert_integrity(&path);
}

#[tokio::test]
async fn runs_are_filtered_and_listed_newest_first() {
    let dir = TempDir::new("runs");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    for (i, workflow) in ["onboard", "offboard", "onboard", "onboard", "offboard"]
        .iter()
        .enumerate()
    {
        create(&store, workflow, None, i as u64).await;
    }
    store
        .set_status(RunId(3), RunStatus::Completed, None, None)
        .await
        .expect("complete");

    let ids = |records: Vec<workflow_core::store::RunRecord>| {
        records.iter().map(|r| r.id.0).collect::<Vec<_>>()
    };
    let all = store.runs(RunFilter::default()).await.expect("runs");
    assert_eq!(ids(all), vec![5, 4, 3, 2, 1]);
    let onboard = RunFilter {
        workflow: Some("onboard".to_owned()),
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.runs(onboard.clone()).await.expect("runs")),
        vec![4, 3, 1]
    );
    let running_onboard = RunFilter {
        status: Some(RunStatus::Running),
        ..onboard.clone()
    };
    assert_eq!(
        ids(store.runs(running_onboard).await.expect("runs")),
        vec![4, 1]
    );
    let limited = RunFilter {
        limit: Some(2),
        ..RunFilter::default()
    };
    assert_eq!(ids(store.runs(limited).await.expect("runs")), vec![5, 4]);
    let completed = RunFilter {
        status: Some(RunStatus::Completed),
        ..RunFilter::default()
    };
    let records = store.runs(completed).await.expect("runs");
    assert_eq!(ids(records.clone()), vec![3]);
    assert_eq!(records[0].workflow, "onboard");
    let none = RunFilter {
        workflow: Some("nope".to_owned()),
        ..RunFilter::default()
    };
    assert_eq!(store.runs(none).await, Ok(vec![]));
    drop(store);
    assert_integrity(&path);
}

#[tokio::test]
async fn unfinished_runs_are_claimed() {
    let dir = TempDir::new("claim");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    for workflow in ["onboard", "offboard", "onboard", "audit", "onboard"] {
        create(&store, workflow, None, 1).await;
    }
    store
        .set_status(RunId(3), RunStatus::Completed, None, None)
        .await
        .expect("complete");
    store
        .set_status(RunId(5), RunStatus::Parked, Some("spec changed"), None)
        .await
        .expect("park");

    let claimed = store
        .claim_unfinished("worker-1", &["onboard", "offboard", "onboard"])
        .await
        .expect("claim");
    assert_eq!(claimed, vec![RunId(1), RunId(2)]);
    assert_eq!(store.claim_unfinished("worker-1", &[]).await, Ok(vec![]));
    drop(store);

    let owners: Vec<(u64, Option<String>)> = raw(&path)
        .prepare("SELECT id, owner FROM runs ORDER BY id")
        .and_then(|mut s| {
            s.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect()
        })
        .expect("read owners");
    let worker = Some("worker-1".to_owned());
    assert_eq!(
        owners,
        vec![
            (1, worker.clone()),
            (2, worker),
            (3, None),
            (4, None),
            (5, None)
        ]
    );
    assert_integrity(&path);
}

#[tokio::test]
async fn everything_survives_a_reopen() {
    let dir = TempDir::new("reopen");
    let path = dir.file("store.db");
    let options = SqliteOptions {
        synchronous: Synchronous::Normal,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&path, options.clone()).expect("open");
    let run = create(&store, "onboard", Some("evt-9"), 1).await.id();
    store.append(run, 1, &attempt(0, 2)).await.expect("append");
    store
        .set_status(run, RunStatus::Failed, Some("boom"), Some(&letter(run, 3)))
        .await
        .expect("fail");
    let before = store.load(run).await.expect("load");
    drop(store);

    let store = SqliteStore::open_with(&path, options).expect("reopen");
    assert_eq!(store.load(run).await.expect("load"), before);
    assert_eq!(store.dead_letters().await, Ok(vec![letter(run, 3)]));
    assert_eq!(
        create(&store, "onboard", Some("evt-9"), 5).await,
        Created::Existing(run)
    );
    assert_eq!(
        create(&store, "onboard", None, 6).await,
        Created::New(RunId(2))
    );
    store
        .append(run, 2, &attempt(1, 7))
        .await
        .expect("append after reopen");
    drop(store);

    let store = SqliteStore::open(&path).expect("reopen with FULL sync");
    let events = store
        .load(run)
        .await
        .expect("load")
        .expect("the run exists")
        .events;
    assert_eq!(events.len(), 3);
    drop(store);
    assert_integrity(&path);
    let journal_mode: String = raw(&path)
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal mode");
    assert_eq!(journal_mode, "wal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_commits() {
    let dir = TempDir::new("group");
    let path = dir.file("store.db");
    let store = Arc::new(SqliteStore::open(&path).expect("open"));
    let mut runs = Vec::new();
    for i in 0..50 {
        runs.push(create(&store, "onboard", None, i).await.id());
    }
    assert_eq!(store.journal_writes(), 50);
    let commits_before = store.commits();

    let barrier = Arc::new(tokio::sync::Barrier::new(runs.len()));
    let tasks: Vec<_> = runs
        .iter()
        .map(|&run| {
            let store = Arc::clone(&store);
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                for seq in 1..=4u64 {
                    store
                        .append(run, seq, &attempt(seq as usize, 100 + seq))
                        .await?;
                }
                Ok::<(), StoreError>(())
            })
        })
        .collect();
    for task in tasks {
        task.await
            .expect("the task ran")
            .expect("every append lands");
    }

    let appends = 200;
    assert_eq!(store.journal_writes(), 50 + appends);
    let commits = store.commits() - commits_before;
    assert!(commits < appends, "{commits} commits for {appends} appends");
    for &run in &runs {
        let events = store
            .load(run)
            .await
            .expect("load")
            .expect("the run exists")
            .events;
        assert_eq!(events.len(), 5, "{run}");
    }
    drop(store);
    assert_integrity(&path);
}

fn refused_untouched(path: &Path, bytes: &[u8]) -> String {
    std::fs::write(path, bytes).expect("write the file");
    let error = SqliteStore::open(path).expect_err("a bad file is refused");
    let StoreError::Corrupt {
        path: shown,
        reason,
    } = &error
    else {
        panic!("expected Corrupt, got {error:?}");
    };
    assert_eq!(shown, &path.display().to_string());
    assert_eq!(
        std::fs::read(path).expect("read the file back"),
        bytes,
        "the file was modified"
    );
    let dir = path.parent().expect("the file is in a dir");
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a file name");
    for suffix in ["-wal", "-shm", "-journal"] {
        assert!(
            !dir.join(format!("{name}{suffix}")).exists(),
            "{suffix} was created"
        );
    }
    reason.clone()
}

#[test]
fn files_that_are_not_stores_are_refused_untouched() {
    let dir = TempDir::new("corrupt");
    // Random bytes (xorshift, fixed seed).
    let mut state = 0x2545_F491_4F6C_DD1D_u64;
    let random: Vec<u8> = (0..8192)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    refused_untouched(&dir.file("random.db"), &random);
    refused_untouched(&dir.file("notes.txt"), b"remember the milk\nand the eggs\n");
    refused_untouched(&dir.file("short.db"), b"SQLite format 3\0tiny");

    // A SQLite header followed by garbage: SQLite itself refuses it before we write.
    let mut fake = b"SQLite format 3\0".to_vec();
    fake.extend_from_slice(&random[..4080]);
    refused_untouched(&dir.file("fake.db"), &fake);
}

#[test]
fn a_database_of_another_application_is_refused() {
    let dir = TempDir::new("foreign");
    let path = dir.file("other.db");
    {
        let conn = raw(&path);
        conn.execute_batch("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('ada');")
            .expect("create a foreign database");
    }
    let bytes = std::fs::read(&path).expect("read");
    let error = SqliteStore::open(&path).expect_err("refused");
    assert!(
        matches!(&error, StoreError::Corrupt { reason, .. } if reason.contains("customers")),
        "{error:?}"
    );
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    assert_integrity(&path);
}

#[test]
fn a_corrupt_page_is_found_by_the_quick_check() {
    let dir = TempDir::new("quick");
    let path = dir.file("store.db");
    {
        let conn = raw(&path);
        conn.execute_batch(
            "PRAGMA page_size = 4096; CREATE TABLE t (x TEXT); CREATE INDEX t_x ON t (x);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO t SELECT printf('%0200d', i) FROM n;",
        )
        .expect("fill a database");
    }
    // Scribble over a page in the middle of the file.
    let mut bytes = std::fs::read(&path).expect("read");
    let middle = bytes.len() / 2 / 4096 * 4096;
    bytes[middle..middle + 4096].fill(0xA5);
    let reason = refused_untouched(&path, &bytes);
    assert!(!reason.is_empty());
}

#[tokio::test]
async fn a_locked_file_is_reported_after_the_busy_timeout() {
    let dir = TempDir::new("locked");
    let path = dir.file("store.db");
    let store = SqliteStore::open_with(&path, short_timeout()).expect("open");
    create(&store, "onboard", None, 1).await;

    let holder = raw(&path);
    holder
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("lock the file");

    // Writes wait for the lock, then give up; reads still see the last commit (WAL).
    let error = store
        .append(RunId(1), 1, &attempt(0, 2))
        .await
        .expect_err("locked");
    let StoreError::Locked {
        path: shown,
        waited_ms,
    } = error
    else {
        panic!("expected Locked, got {error:?}");
    };
    assert_eq!(shown, path.display().to_string());
    assert!(waited_ms >= 150, "waited {waited_ms} ms");
    assert_eq!(
        store
            .load(RunId(1))
            .await
            .expect("read")
            .map(|r| r.events.len()),
        Some(1)
    );

    // A second open takes the write lock once, so it reports the lock too.
    let error = SqliteStore::open_with(&path, short_timeout()).expect_err("locked");
    assert!(
        matches!(error, StoreError::Locked { waited_ms, .. } if waited_ms >= 150),
        "{error:?}"
    );

    holder.execute_batch("COMMIT").expect("unlock");
    store
        .append(RunId(1), 1, &attempt(0, 2))
        .await
        .expect("append after unlock");
    drop(holder);
    drop(store);
    assert_integrity(&path);
}

#[test]
fn a_new_file_locked_by_another_connection_is_reported() {
    let dir = TempDir::new("locked-new");
    let path = dir.file("store.db");
    let holder = raw(&path);
    holder
        .execute_batch("BEGIN EXCLUSIVE")
        .expect("lock the file");
    let error = SqliteStore::open_with(&path, short_timeout()).expect_err("locked");
    assert!(
        matches!(error, StoreError::Locked { waited_ms, .. } if waited_ms >= 150),
        "{error:?}"
    );
    holder.execute_batch("COMMIT").expect("unlock");
    drop(holder);
    drop(SqliteStore::open_with(&path, short_timeout()).expect("open once unlocked"));
}

#[tokio::test]
async fn a_journal_row_that_does_not_decode_is_a_bad_row() {
    let dir = TempDir::new("badrow");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let run = create(&store, "onboard", None, 1).await.id();
    store.append(run, 1, &attempt(0, 2)).await.expect("append");

    raw(&path)
        .execute(
            "INSERT INTO journal (run_id, seq, event) VALUES (?1, 2, ?2)",
            rusqlite::params![run.0, r#"{"event":"no_such_event","at":3}"#],
        )
        .expect("insert a bad row");
    let error = store.load(run).await.expect_err("bad row");
    assert!(
        matches!(&error, StoreError::BadRow { run: r, seq: 2, reason } if *r == run && reason.contains("no_such_event")),
        "{error:?}"
    );
    // Other runs still load.
    let other = create(&store, "onboard", None, 4).await.id();
    assert!(store.load(other).await.expect("load").is_some());
    drop(store);
    assert_integrity(&path);
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = TempDir::new("newer");
    let path = dir.file("store.db");
    drop(SqliteStore::open(&path).expect("create"));
    let newer = SqliteStore::SCHEMA_VERSION + 1;
    raw(&path)
        .pragma_update(None, "user_version", newer)
        .expect("bump the schema version");
    let bytes = std::fs::read(&path).expect("read");
    assert_eq!(
        SqliteStore::open(&path).expect_err("newer"),
        StoreError::NewerSchema {
            path: path.display().to_string(),
            found: newer,
            supported: SqliteStore::SCHEMA_VERSION,
        }
    );
    assert_eq!(std::fs::read(&path).expect("read"), bytes);
    assert_integrity(&path);
}

#[test]
fn an_empty_file_becomes_a_store() {
    let dir = TempDir::new("empty");
    let path = dir.file("store.db");
    std::fs::write(&path, b"").expect("create an empty file");
    drop(SqliteStore::open(&path).expect("open"));
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("user_version");
    assert_eq!(version, SqliteStore::SCHEMA_VERSION);
    // Reopening an up-to-date store migrates nothing.
    drop(SqliteStore::open(&path).expect("reopen"));
    assert_integrity(&path);
}

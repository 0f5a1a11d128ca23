//! The SQLite store beyond the `Store` contract (which `tests/conformance.rs` checks for
//! every store): durability across opens, group commit, migrations of older files, and
//! the files it must refuse without touching them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::store::{
    checksum, Claim, Claimant, Commit, Created, DeadLetter, DeadLetterChange, NewRun, RunStatus,
    Store, StoreError,
};
use workflow_core::{ErrorKind, RunId};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

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
        parent_span: None,
        dry_run: false,
        deadline: Some(at + 60_000),
        at,
    }
}

async fn create(store: &SqliteStore, workflow: &str, key: Option<&str>, at: u64) -> Created {
    let events = [started(workflow, at)];
    store
        .create_run(NewRun {
            workflow,
            fingerprint: "fp1",
            idempotency_key: key,
            events: &events,
            parent: None,
            owner: None,
            supersedes: None,
            at,
            search: &[],
        })
        .await
        .expect("create a run")
}

async fn append(
    store: &SqliteStore,
    run: RunId,
    seq: u64,
    event: &Event,
) -> Result<(), StoreError> {
    store
        .commit(Commit::events(
            run,
            seq,
            std::slice::from_ref(event),
            event.at(),
        ))
        .await
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
async fn everything_survives_a_reopen() {
    let dir = TempDir::new("reopen");
    let path = dir.file("store.db");
    let options = SqliteOptions {
        synchronous: Synchronous::Normal,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&path, options.clone()).expect("open");
    let run = create(&store, "onboard", Some("evt-9"), 1).await.id();
    append(&store, run, 1, &attempt(0, 2))
        .await
        .expect("append");
    let letter_3 = letter(run, 3);
    store
        .commit(Commit {
            status: Some((RunStatus::Failed, Some("boom"))),
            dead_letter: DeadLetterChange::Put(&letter_3),
            ..Commit::events(run, 2, &[], 3)
        })
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
    assert_eq!(create(&store, "onboard", None, 6).await.id(), RunId(2));
    append(&store, run, 2, &attempt(1, 7))
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
                    append(&store, run, seq, &attempt(seq as usize, 100 + seq)).await?;
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
    let StoreError::CorruptFile {
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
        matches!(&error, StoreError::CorruptFile { reason, .. } if reason.contains("customers")),
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
        .commit(Commit::events(RunId(1), 1, &[attempt(0, 2)], 2))
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
        .commit(Commit::events(RunId(1), 1, &[attempt(0, 2)], 2))
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
async fn a_journal_row_without_its_checksum_is_damaged_and_one_that_does_not_decode_is_a_bad_row() {
    let dir = TempDir::new("badrow");
    let path = dir.file("store.db");
    let store = SqliteStore::open(&path).expect("open");
    let run = create(&store, "onboard", None, 1).await.id();
    append(&store, run, 1, &attempt(0, 2))
        .await
        .expect("append");

    // A row an unknown writer put there, without a checksum: damaged.
    let unknown = r#"{"event":"no_such_event","at":3}"#;
    raw(&path)
        .execute(
            "INSERT INTO journal (run_id, seq, event) VALUES (?1, 2, ?2)",
            rusqlite::params![run.0, unknown],
        )
        .expect("insert a row");
    let error = store.load(run).await.expect_err("damaged");
    assert_eq!(error, StoreError::Corrupt { run, seq: 2 });
    // The same row with its checksum (a newer version wrote an event this one does not
    // know): it is intact but does not decode.
    raw(&path)
        .execute(
            "UPDATE journal SET crc = ?2 WHERE run_id = ?1 AND seq = 2",
            rusqlite::params![run.0, checksum::entry(run, 2, unknown)],
        )
        .expect("its checksum");
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

/// The schema of the first release that had specs (version 2), as such files hold it.
const VERSION_2: &[&str] = &[
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        workflow TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status TEXT NOT NULL,
        idempotency_key TEXT,
        note TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        owner TEXT
    );
    CREATE UNIQUE INDEX runs_idempotency ON runs (workflow, idempotency_key);
    CREATE INDEX runs_status ON runs (status, workflow);
    CREATE TABLE journal (
        run_id INTEGER NOT NULL REFERENCES runs (id),
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE dead_letters (
        run_id INTEGER PRIMARY KEY,
        workflow TEXT NOT NULL,
        step TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        at INTEGER NOT NULL
    );",
    "CREATE TABLE specs (
        fingerprint TEXT PRIMARY KEY,
        spec TEXT NOT NULL
    ) WITHOUT ROWID;",
];

#[tokio::test]
async fn a_file_of_an_older_version_is_migrated_with_its_runs() {
    let dir = TempDir::new("migrate");
    let path = dir.file("store.db");
    {
        let conn = raw(&path);
        conn.execute_batch(&VERSION_2.join("\n"))
            .expect("old schema");
        conn.pragma_update(None, "application_id", 0x5746_4C57)
            .expect("application id");
        conn.pragma_update(None, "user_version", 2)
            .expect("version");
        conn.execute(
            "INSERT INTO runs (id, workflow, fingerprint, status, created_at, updated_at, owner)
             VALUES (1, 'onboard', 'fp1', 'running', 1, 1, 'local')",
            [],
        )
        .expect("a run");
        let event = serde_json::to_string(&started("onboard", 1)).expect("json");
        conn.execute(
            "INSERT INTO journal (run_id, seq, event) VALUES (1, 0, ?1)",
            [event],
        )
        .expect("its first entry");
        conn.execute(
            "INSERT INTO specs (fingerprint, spec) VALUES ('fp1', '{\"name\":\"onboard\"}')",
            [],
        )
        .expect("its spec");
    }
    let store = SqliteStore::open(&path).expect("open and migrate");
    let stored = store.load(RunId(1)).await.expect("load").expect("the run");
    assert_eq!(stored.events, [started("onboard", 1)]);
    assert_eq!(stored.record.owner.as_deref(), Some("local"));
    let specs = store.specs("onboard").await.expect("specs");
    assert_eq!(specs.len(), 1, "the spec learned its workflow's name");
    // The old owner's lease has lapsed: anyone may take the run.
    let leases = store
        .claim(Claim {
            claimant: Claimant {
                owner: "new",
                lease_ms: 0,
                now: 2,
            },
            workflows: &["onboard"],
            run: None,
            reclaim_own: false,
            limit: None,
            claimable: workflow_core::store::Claimable::Any,
            versions: None,
        })
        .await
        .expect("claim");
    assert_eq!(leases.iter().map(|l| l.run).collect::<Vec<_>>(), [RunId(1)]);
    drop(store);
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .expect("user_version");
    assert_eq!(version, SqliteStore::SCHEMA_VERSION);
    assert_integrity(&path);
}

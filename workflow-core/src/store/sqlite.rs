//! The embedded default store: one SQLite file in WAL mode.
//!
//! Writes go through one dedicated writer thread that owns the write connection. It
//! drains every request already queued into one transaction (each request inside its own
//! savepoint, so a failing request is rolled back alone), commits once and then answers
//! every request: concurrent runs share fsyncs instead of paying one per step (group
//! commit). Reads use a second connection on the blocking pool; WAL lets them run beside
//! the writer.
//!
//! Opening checks the file before writing anything: a file that is not a SQLite database,
//! a database of another application, a corrupt database or one written by a newer
//! version of this library is refused and left untouched.

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};
use tokio::sync::oneshot;

use super::{
    Created, DeadLetter, NewRun, RunFilter, RunRecord, RunStatus, Store, StoreError, StoredRun,
};
use crate::error::{ErrorKind, RunId};
use crate::journal::{Event, Timestamp};
use crate::workflow::BoxFuture;

/// Identifies our files in the SQLite header (`PRAGMA application_id`): "WFLW".
const APPLICATION_ID: i32 = 0x5746_4C57;

/// The schema migrations: entry `i` takes a file from version `i` to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    // Version 1: runs, their journals and the dead letters.
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
    // Version 2: the specs runs were started under, by fingerprint, for tools.
    "CREATE TABLE specs (
        fingerprint TEXT PRIMARY KEY,
        spec TEXT NOT NULL
    ) WITHOUT ROWID;",
];

/// The tables a store of the current schema version has.
const TABLES: [&str; 4] = ["runs", "journal", "dead_letters", "specs"];

/// The first 16 bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The length of a SQLite database header.
const HEADER_LEN: usize = 100;

/// When the writer commits. `Full` is the default: a commit survives a power loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Synchronous {
    /// Sync the WAL on every commit (`PRAGMA synchronous = FULL`): durable across power
    /// loss.
    #[default]
    Full,
    /// Sync at checkpoints only (`NORMAL`): survives a process crash, but the last commits
    /// may roll back after a power loss.
    Normal,
    /// Never sync (`OFF`): for tests and throwaway data.
    Off,
}

impl Synchronous {
    fn pragma_value(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
            Synchronous::Off => "OFF",
        }
    }
}

/// How [`SqliteStore::open_with`] opens the file.
///
/// ```
/// use std::time::Duration;
/// use workflow_core::store::{SqliteOptions, Synchronous};
///
/// let options = SqliteOptions {
///     synchronous: Synchronous::Normal,
///     busy_timeout: Duration::from_millis(500),
///     ..SqliteOptions::default()
/// };
/// assert!(options.quick_check);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// When commits reach the disk ([`Synchronous::Full`] by default).
    pub synchronous: Synchronous,
    /// How long to wait for a file locked by another connection before failing with
    /// [`StoreError::Locked`] (5 seconds by default).
    pub busy_timeout: Duration,
    /// Whether `open` runs `PRAGMA quick_check` on an existing file before using it (on
    /// by default). It reads the whole file: turn it off for very large stores.
    pub quick_check: bool,
    /// The most write requests committed in one transaction (512 by default; at least 1).
    pub max_batch: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            quick_check: true,
            max_batch: 512,
        }
    }
}

/// The embedded default store: runs, journals and dead letters in one SQLite file (WAL
/// mode). Appends from concurrent runs share commits (group commit); every future
/// resolves only once its write is committed.
///
/// A write is queued when the method is called, not when its future is first polled.
/// Dropping the store lets the writer finish what is queued, then stops it.
///
/// Under tokio's paused test clock, prefer [`MemoryStore`](super::MemoryStore): the
/// runtime does not know that a write is in flight on the writer thread and may advance
/// the paused clock while waiting for it.
pub struct SqliteStore {
    path: PathBuf,
    /// The path as error messages show it.
    shown: Arc<str>,
    options: SqliteOptions,
    writer: Option<mpsc::Sender<Box<dyn Job>>>,
    writer_thread: Option<JoinHandle<()>>,
    reader: Arc<Mutex<Db>>,
    stats: Arc<Stats>,
}

/// Counters shared with the writer thread.
#[derive(Debug, Default)]
struct Stats {
    journal_writes: AtomicU64,
    commits: AtomicU64,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("options", &self.options)
            .field("journal_writes", &self.journal_writes())
            .field("commits", &self.commits())
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// The schema version this library reads and writes.
    pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

    /// The schema migrations in order (entry `i` moves version `i` to `i + 1`): for tools
    /// and benchmarks that need the store's exact tables.
    #[doc(hidden)]
    pub const MIGRATIONS: &'static [&'static str] = MIGRATIONS;

    /// Opens (or creates) the store at `path` with the default [`SqliteOptions`].
    ///
    /// Fails with [`StoreError::Corrupt`] when the file is not a store of ours,
    /// [`StoreError::NewerSchema`] when a newer library wrote it and
    /// [`StoreError::Locked`] when another connection keeps it locked past the busy
    /// timeout. A refused file is left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// Opens (or creates) the store at `path`: checks the file, creates or migrates the
    /// schema, and starts the writer thread. See [`SqliteStore::open`] for the errors.
    pub fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        check_header(&path, &shown)?;

        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let writer = Db::open(&path, &shown, flags, options.busy_timeout)?;
        writer.prepare(&options)?;

        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let reader = Db::open(&path, &shown, flags, options.busy_timeout)?;
        let started = Instant::now();
        reader
            .conn
            .pragma_update(None, "query_only", true)
            .map_err(|e| reader.error(e, started))?;

        let stats = Arc::new(Stats::default());
        let (sender, receiver) = mpsc::channel::<Box<dyn Job>>();
        let max_batch = options.max_batch.max(1);
        let thread_stats = Arc::clone(&stats);
        let writer_thread = std::thread::Builder::new()
            .name("workflow-sqlite-writer".to_owned())
            .spawn(move || write_loop(writer, receiver, max_batch, &thread_stats))
            .map_err(|e| StoreError::Io(format!("{shown}: cannot start the writer thread: {e}")))?;

        tracing::debug!(path = %shown, "opened the SQLite store");
        Ok(SqliteStore {
            path,
            shown: Arc::from(shown),
            options,
            writer: Some(sender),
            writer_thread: Some(writer_thread),
            reader: Arc::new(Mutex::new(reader)),
            stats,
        })
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many journal entries this store wrote since it was opened (run creations
    /// included), counted when their transaction commits.
    pub fn journal_writes(&self) -> u64 {
        self.stats.journal_writes.load(Ordering::Relaxed)
    }

    /// How many write transactions this store committed since it was opened. With
    /// concurrent runs it stays below the number of writes: they share commits.
    pub fn commits(&self) -> u64 {
        self.stats.commits.load(Ordering::Relaxed)
    }

    /// Queues `work` for the writer thread; the future resolves once its batch commits.
    fn write<T, F>(&self, work: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&Db) -> Result<(T, u64), StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let request: Box<dyn Job> = Box::new(Request {
            work: Some(work),
            result: None,
            reply,
        });
        let sent = match &self.writer {
            Some(sender) => sender.send(request).is_ok(),
            None => false,
        };
        let shown = Arc::clone(&self.shown);
        let stopped = move || StoreError::Io(format!("{shown}: the store's writer thread stopped"));
        Box::pin(async move {
            if !sent {
                return Err(stopped());
            }
            wait_for_writer(answer).await.ok_or_else(stopped)?
        })
    }

    /// Runs `work` on the read connection, off the async runtime's threads.
    fn read<T, F>(&self, work: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&Db) -> Result<T, StoreError> + Send + 'static,
    {
        let reader = Arc::clone(&self.reader);
        let job = move || {
            let db = reader.lock().unwrap_or_else(PoisonError::into_inner);
            if !db.conn.is_autocommit() {
                // A read interrupted by a panic left its transaction open.
                let _ = db.conn.execute_batch("ROLLBACK");
            }
            work(&db)
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let shown = Arc::clone(&self.shown);
                Box::pin(async move {
                    handle
                        .spawn_blocking(job)
                        .await
                        .map_err(|e| StoreError::Io(format!("{shown}: read task failed: {e}")))?
                })
            }
            // Outside a tokio runtime there is no blocking pool: read in place.
            Err(_) => Box::pin(std::future::ready(job())),
        }
    }
}

/// Waits for the writer thread's answer; `None` if the writer is gone.
///
/// With the `test-util` feature the wait occupies a blocking-pool thread: tokio does not
/// auto-advance paused time while blocking work is in flight, so a test under
/// `start_paused` never sees its clock jump past a step timeout while a write is pending.
#[cfg(feature = "test-util")]
async fn wait_for_writer<T: Send + 'static>(answer: oneshot::Receiver<T>) -> Option<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => tokio::task::spawn_blocking(move || answer.blocking_recv().ok())
            .await
            .ok()
            .flatten(),
        Err(_) => answer.await.ok(),
    }
}

/// Waits for the writer thread's answer; `None` if the writer is gone.
#[cfg(not(feature = "test-util"))]
async fn wait_for_writer<T>(answer: oneshot::Receiver<T>) -> Option<T> {
    answer.await.ok()
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Closing the channel ends the writer loop once the queued requests are written.
        drop(self.writer.take());
        if let Some(thread) = self.writer_thread.take() {
            if thread.join().is_err() {
                tracing::error!(path = %self.path.display(), "the SQLite writer thread panicked");
            }
        }
    }
}

/// Refuses a non-empty file that does not start with a SQLite header, before SQLite
/// touches it.
fn check_header(path: &Path, shown: &str) -> Result<(), StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::Io(format!("{shown}: {e}"))),
    };
    let mut header = Vec::with_capacity(HEADER_LEN);
    file.take(HEADER_LEN as u64)
        .read_to_end(&mut header)
        .map_err(|e| StoreError::Io(format!("{shown}: {e}")))?;
    let corrupt = |reason: String| StoreError::Corrupt {
        path: shown.to_owned(),
        reason,
    };
    if header.is_empty() {
        Ok(())
    } else if !header.starts_with(SQLITE_MAGIC) {
        Err(corrupt(
            "the file does not start with a SQLite header".to_owned(),
        ))
    } else if header.len() < HEADER_LEN {
        Err(corrupt(format!(
            "the file is {} bytes, shorter than a SQLite header",
            header.len()
        )))
    } else {
        Ok(())
    }
}

/// A connection with the file name its errors mention.
struct Db {
    conn: Connection,
    path: String,
}

impl Db {
    fn open(
        path: &Path,
        shown: &str,
        flags: OpenFlags,
        busy_timeout: Duration,
    ) -> Result<Db, StoreError> {
        let started = Instant::now();
        let db = Db {
            conn: Connection::open_with_flags(path, flags)
                .map_err(|e| error_for(shown, e, started))?,
            path: shown.to_owned(),
        };
        db.conn
            .busy_timeout(busy_timeout)
            .map_err(|e| db.error(e, started))?;
        Ok(db)
    }

    /// Classifies a database error: lock waits, corruption, anything else.
    fn error(&self, error: rusqlite::Error, started: Instant) -> StoreError {
        error_for(&self.path, error, started)
    }

    fn corrupt(&self, reason: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            reason,
        }
    }

    /// Checks the file with reads only, then switches to WAL and creates or migrates the
    /// schema in one write transaction.
    fn prepare(&self, options: &SqliteOptions) -> Result<(), StoreError> {
        let started = Instant::now();
        let (application_id, version, tables) =
            self.inspect().map_err(|e| self.error(e, started))?;
        if options.quick_check {
            self.quick_check(started)?;
        }
        if application_id != APPLICATION_ID
            && (application_id != 0 || version != 0 || !tables.is_empty())
        {
            return Err(self.corrupt(format!(
                "not a workflow store (application id {application_id:#x}, tables: {})",
                if tables.is_empty() {
                    "none".to_owned()
                } else {
                    tables.join(", ")
                }
            )));
        }
        self.check_version(version)?;

        let mode: String = self
            .conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|e| self.error(e, started))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Io(format!(
                "{}: cannot switch to WAL mode (journal mode is {mode})",
                self.path
            )));
        }
        self.conn
            .pragma_update(None, "synchronous", options.synchronous.pragma_value())
            .map_err(|e| self.error(e, started))?;
        self.conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(|e| self.error(e, started))?;

        // Always take the write lock once: another process may have migrated the file
        // since the checks above, and a file held locked is reported now, not at the
        // first write.
        let started = Instant::now();
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.error(e, started))?;
        let result = self.migrate(started);
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self
            .conn
            .execute_batch(end)
            .map_err(|e| self.error(e, started));
        if ended.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result.and(ended)
    }

    /// The application id, the schema version and our kind of tables (reads only).
    fn inspect(&self) -> rusqlite::Result<(i32, u32, Vec<String>)> {
        let application_id: i32 = self
            .conn
            .pragma_query_value(None, "application_id", |row| row.get(0))?;
        let version: u32 = self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))?;
        let mut statement = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")?;
        let tables = statement
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?;
        Ok((application_id, version, tables))
    }

    fn quick_check(&self, started: Instant) -> Result<(), StoreError> {
        let mut statement = self
            .conn
            .prepare("PRAGMA quick_check")
            .map_err(|e| self.error(e, started))?;
        let findings = statement
            .query_map([], |row| row.get::<_, String>(0))
            .and_then(|rows| rows.take(5).collect::<rusqlite::Result<Vec<String>>>())
            .map_err(|e| self.error(e, started))?;
        if findings.len() == 1 && findings[0] == "ok" {
            Ok(())
        } else {
            Err(self.corrupt(format!("quick_check: {}", findings.join("; "))))
        }
    }

    fn check_version(&self, version: u32) -> Result<(), StoreError> {
        if version > SqliteStore::SCHEMA_VERSION {
            Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found: version,
                supported: SqliteStore::SCHEMA_VERSION,
            })
        } else {
            Ok(())
        }
    }

    /// Inside the open write transaction: migrates the schema to the current version.
    fn migrate(&self, started: Instant) -> Result<(), StoreError> {
        let (application_id, version, _) = self.inspect().map_err(|e| self.error(e, started))?;
        self.check_version(version)?;
        if application_id != APPLICATION_ID && version != 0 {
            return Err(self.corrupt(format!(
                "not a workflow store (application id {application_id:#x})"
            )));
        }
        for (from, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tracing::info!(path = %self.path, from, to = from + 1, "migrating the store schema");
            self.conn
                .execute_batch(migration)
                .map_err(|e| self.error(e, started))?;
        }
        if version < SqliteStore::SCHEMA_VERSION || application_id != APPLICATION_ID {
            self.conn
                .pragma_update(None, "application_id", APPLICATION_ID)
                .and_then(|()| {
                    self.conn
                        .pragma_update(None, "user_version", SqliteStore::SCHEMA_VERSION)
                })
                .map_err(|e| self.error(e, started))?;
        }
        let (_, _, tables) = self.inspect().map_err(|e| self.error(e, started))?;
        match TABLES
            .iter()
            .find(|table| !tables.iter().any(|t| t == *table))
        {
            Some(missing) => Err(self.corrupt(format!("the store has no `{missing}` table"))),
            None => Ok(()),
        }
    }
}

fn error_for(path: &str, error: rusqlite::Error, started: Instant) -> StoreError {
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked {
            path: path.to_owned(),
            waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_owned(),
            reason: error.to_string(),
        },
        _ => StoreError::Io(format!("{path}: {error}")),
    }
}

/// A database error inside a request, where waits do not happen (the writer holds the
/// write lock, a reader sees a snapshot).
fn db_error(db: &Db) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    let started = Instant::now();
    move |e| db.error(e, started)
}

/// A write request as the writer thread sees it.
trait Job: Send {
    /// Runs the request inside the open transaction: the journal entries it wrote, or
    /// `None` when it failed (its error is kept for the reply).
    fn apply(&mut self, db: &Db) -> Option<u64>;
    /// The batch did not commit: a request that succeeded fails with `error`.
    fn fail(&mut self, error: &StoreError);
    /// Sends the outcome to the caller.
    fn reply(self: Box<Self>);
}

struct Request<T, F> {
    work: Option<F>,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Job for Request<T, F>
where
    T: Send,
    F: FnOnce(&Db) -> Result<(T, u64), StoreError> + Send,
{
    fn apply(&mut self, db: &Db) -> Option<u64> {
        let work = self.work.take()?;
        match work(db) {
            Ok((value, entries)) => {
                self.result = Some(Ok(value));
                Some(entries)
            }
            Err(error) => {
                self.result = Some(Err(error));
                None
            }
        }
    }

    fn fail(&mut self, error: &StoreError) {
        if !matches!(self.result, Some(Err(_))) {
            self.result = Some(Err(error.clone()));
        }
    }

    fn reply(self: Box<Self>) {
        let result = self
            .result
            .unwrap_or_else(|| Err(StoreError::Io("the write request was not run".to_owned())));
        // The caller may have stopped waiting; the write stands either way.
        let _ = self.reply.send(result);
    }
}

/// The writer thread: takes every queued request (up to `max_batch`), writes them in one
/// transaction, commits, answers them all. Ends when the store is dropped.
fn write_loop(db: Db, requests: mpsc::Receiver<Box<dyn Job>>, max_batch: usize, stats: &Stats) {
    let mut batch: Vec<Box<dyn Job>> = Vec::new();
    while let Ok(first) = requests.recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match requests.try_recv() {
                Ok(request) => batch.push(request),
                Err(_) => break,
            }
        }
        write_batch(&db, &mut batch, stats);
        for request in batch.drain(..) {
            request.reply();
        }
    }
    tracing::debug!(path = %db.path, "the SQLite writer stopped");
}

fn write_batch(db: &Db, batch: &mut [Box<dyn Job>], stats: &Stats) {
    let started = Instant::now();
    let batch_len = batch.len();
    if let Err(e) = db.conn.execute_batch("BEGIN IMMEDIATE") {
        let error = db.error(e, started);
        tracing::warn!(path = %db.path, %error, "cannot start a write transaction");
        batch.iter_mut().for_each(|request| request.fail(&error));
        return;
    }
    let mut entries = 0;
    let run = |sql: &str| {
        db.conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map(drop)
    };
    if let [request] = batch {
        // Alone in its transaction, a failing request needs no savepoint: roll it all back.
        match request.apply(db) {
            Some(written) => entries += written,
            None => {
                let _ = db.conn.execute_batch("ROLLBACK");
                return;
            }
        }
    }
    for request in batch.iter_mut().filter(|_| batch_len > 1) {
        let step = run("SAVEPOINT request").and_then(|()| match request.apply(db) {
            Some(written) => {
                entries += written;
                run("RELEASE request")
            }
            None => run("ROLLBACK TO request").and_then(|()| run("RELEASE request")),
        });
        if let Err(e) = step {
            // The transaction is in an unknown state: give it up whole.
            let error = db.error(e, started);
            tracing::warn!(path = %db.path, %error, "a write batch failed");
            let _ = db.conn.execute_batch("ROLLBACK");
            batch.iter_mut().for_each(|request| request.fail(&error));
            return;
        }
    }
    match db.conn.execute_batch("COMMIT") {
        Ok(()) => {
            stats.commits.fetch_add(1, Ordering::Relaxed);
            stats.journal_writes.fetch_add(entries, Ordering::Relaxed);
            tracing::trace!(path = %db.path, requests = batch.len(), entries, "committed a write batch");
        }
        Err(e) => {
            let error = db.error(e, started);
            tracing::warn!(path = %db.path, %error, "a write batch did not commit");
            if !db.conn.is_autocommit() {
                let _ = db.conn.execute_batch("ROLLBACK");
            }
            batch.iter_mut().for_each(|request| request.fail(&error));
        }
    }
}

fn to_json(event: &Event) -> Result<String, StoreError> {
    serde_json::to_string(event)
        .map_err(|e| StoreError::Io(format!("cannot serialize a journal entry: {e}")))
}

const RUN_COLUMNS: &str =
    "id, workflow, fingerprint, status, idempotency_key, note, created_at, updated_at";

/// A `runs` row as stored, before its status is checked.
type RawRun = (
    RunId,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    u64,
    u64,
);

fn raw_run(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRun> {
    Ok((
        RunId(row.get(0)?),
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
    ))
}

fn run_record(db: &Db, raw: RawRun) -> Result<RunRecord, StoreError> {
    let (id, workflow, fingerprint, status, idempotency_key, note, created_at, updated_at) = raw;
    let Some(status) = RunStatus::parse(&status) else {
        return Err(db.corrupt(format!("{id} has an unknown status `{status}`")));
    };
    Ok(RunRecord {
        id,
        workflow,
        fingerprint,
        status,
        idempotency_key,
        note,
        created_at,
        updated_at,
    })
}

fn create(
    db: &Db,
    workflow: &str,
    fingerprint: &str,
    key: Option<&str>,
    started: &str,
    at: u64,
) -> Result<(Created, u64), StoreError> {
    let fail = db_error(db);
    if let Some(key) = key {
        let existing = db
            .conn
            .prepare_cached("SELECT id FROM runs WHERE workflow = ?1 AND idempotency_key = ?2")
            .and_then(|mut s| {
                s.query_row(params![workflow, key], |row| row.get(0))
                    .optional()
            })
            .map_err(&fail)?;
        if let Some(id) = existing {
            return Ok((Created::Existing(RunId(id)), 0));
        }
    }
    let id: u64 = db
        .conn
        .prepare_cached(
            "INSERT INTO runs (workflow, fingerprint, status, idempotency_key, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5) RETURNING id",
        )
        .and_then(|mut s| {
            s.query_row(
                params![workflow, fingerprint, RunStatus::Running.as_str(), key, at],
                |row| row.get(0),
            )
        })
        .map_err(&fail)?;
    db.conn
        .prepare_cached("INSERT INTO journal (run_id, seq, event) VALUES (?1, 0, ?2)")
        .and_then(|mut s| s.execute(params![id, started]))
        .map_err(&fail)?;
    Ok((Created::New(RunId(id)), 1))
}

fn append(db: &Db, run: RunId, seq: u64, event: &str, at: u64) -> Result<((), u64), StoreError> {
    let fail = db_error(db);
    // The next entry is the journal's length: a taken or skipped sequence number is a
    // conflict, as in the memory store.
    let next: Option<u64> = db
        .conn
        .prepare_cached(
            "SELECT (SELECT COALESCE(MAX(seq) + 1, 0) FROM journal WHERE run_id = ?1)
             FROM runs WHERE id = ?1",
        )
        .and_then(|mut s| s.query_row(params![run.0], |row| row.get(0)).optional())
        .map_err(&fail)?;
    match next {
        None => return Err(StoreError::UnknownRun(run)),
        Some(next) if next != seq => return Err(StoreError::Conflict { run, seq }),
        Some(_) => {}
    }
    let inserted = db
        .conn
        .prepare_cached("INSERT INTO journal (run_id, seq, event) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![run.0, seq, event]));
    match inserted {
        Ok(_) => {}
        Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
            return Err(StoreError::Conflict { run, seq });
        }
        Err(e) => return Err(fail(e)),
    }
    db.conn
        .prepare_cached("UPDATE runs SET updated_at = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![run.0, at]))
        .map_err(&fail)?;
    Ok(((), 1))
}

fn set_status(
    db: &Db,
    run: RunId,
    status: RunStatus,
    note: Option<&str>,
    letter: Option<&DeadLetter>,
) -> Result<((), u64), StoreError> {
    let fail = db_error(db);
    let changed = db
        .conn
        .prepare_cached("UPDATE runs SET status = ?2, note = ?3 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![run.0, status.as_str(), note]))
        .map_err(&fail)?;
    if changed == 0 {
        return Err(StoreError::UnknownRun(run));
    }
    if let Some(letter) = letter {
        db.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO dead_letters (run_id, workflow, step, attempts, kind, message, trace_id, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    run.0,
                    letter.workflow,
                    letter.step,
                    letter.attempts,
                    letter.kind.as_str(),
                    letter.message,
                    letter.trace_id,
                    letter.at,
                ])
            })
            .map_err(&fail)?;
    }
    Ok(((), 0))
}

fn claim(db: &Db, owner: &str, workflows: &[String]) -> Result<(Vec<RunId>, u64), StoreError> {
    let fail = db_error(db);
    let mut ids = Vec::new();
    let mut statement = db
        .conn
        .prepare_cached(
            "UPDATE runs SET owner = ?1 WHERE status = ?2 AND workflow = ?3 RETURNING id",
        )
        .map_err(&fail)?;
    for workflow in workflows {
        let rows = statement
            .query_map(
                params![owner, RunStatus::Running.as_str(), workflow],
                |row| row.get(0),
            )
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<u64>>>())
            .map_err(&fail)?;
        ids.extend(rows.into_iter().map(RunId));
    }
    ids.sort_unstable();
    ids.dedup();
    Ok((ids, 0))
}

fn load(db: &Db, run: RunId) -> Result<Option<StoredRun>, StoreError> {
    let fail = db_error(db);
    // One read transaction: the row and the journal from the same snapshot.
    let snapshot = db.conn.unchecked_transaction().map_err(&fail)?;
    let raw = db
        .conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))
        .and_then(|mut s| s.query_row(params![run.0], raw_run).optional())
        .map_err(&fail)?;
    let Some(raw) = raw else {
        return Ok(None);
    };
    let record = run_record(db, raw)?;
    let mut statement = db
        .conn
        .prepare_cached("SELECT seq, event FROM journal WHERE run_id = ?1 ORDER BY seq")
        .map_err(&fail)?;
    let mut rows = statement.query(params![run.0]).map_err(&fail)?;
    let mut events = Vec::new();
    while let Some(row) = rows.next().map_err(&fail)? {
        let seq: u64 = row.get(0).map_err(&fail)?;
        let bad = |reason: String| StoreError::BadRow { run, seq, reason };
        let text = row
            .get_ref(1)
            .map_err(&fail)?
            .as_str()
            .map_err(|e| bad(format!("the entry is not text: {e}")))?;
        events.push(serde_json::from_str::<Event>(text).map_err(|e| bad(e.to_string()))?);
    }
    drop(rows);
    drop(statement);
    snapshot.commit().map_err(&fail)?;
    Ok(Some(StoredRun { record, events }))
}

fn list_runs(db: &Db, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
    let fail = db_error(db);
    let limit = filter
        .limit
        .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let raws = db
        .conn
        .prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM runs
             WHERE (?1 IS NULL OR workflow = ?1) AND (?2 IS NULL OR status = ?2)
             ORDER BY id DESC LIMIT ?3"
        ))
        .and_then(|mut s| {
            s.query_map(
                params![filter.workflow, filter.status.map(RunStatus::as_str), limit],
                raw_run,
            )?
            .collect::<rusqlite::Result<Vec<RawRun>>>()
        })
        .map_err(&fail)?;
    raws.into_iter().map(|raw| run_record(db, raw)).collect()
}

/// A `dead_letters` row as stored, before its kind is checked.
type RawLetter = (RunId, String, String, u32, String, String, String, u64);

fn list_dead_letters(db: &Db) -> Result<Vec<DeadLetter>, StoreError> {
    let fail = db_error(db);
    let raws = db
        .conn
        .prepare_cached(
            "SELECT run_id, workflow, step, attempts, kind, message, trace_id, at
             FROM dead_letters ORDER BY run_id DESC",
        )
        .and_then(|mut s| {
            s.query_map([], |row| -> rusqlite::Result<RawLetter> {
                Ok((
                    RunId(row.get(0)?),
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                    row.get(7)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<RawLetter>>>()
        })
        .map_err(&fail)?;
    raws.into_iter()
        .map(
            |(run, workflow, step, attempts, kind, message, trace_id, at)| {
                let kind = kind
                    .parse::<ErrorKind>()
                    .map_err(|e| db.corrupt(format!("the dead letter of {run}: {e}")))?;
                Ok(DeadLetter {
                    run,
                    workflow,
                    step,
                    attempts,
                    kind,
                    message,
                    trace_id,
                    at,
                })
            },
        )
        .collect()
}

impl Store for SqliteStore {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        let started = match to_json(run.started) {
            Ok(json) => json,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let workflow = run.workflow.to_owned();
        let fingerprint = run.fingerprint.to_owned();
        let key = run.idempotency_key.map(str::to_owned);
        let at = run.at;
        self.write(move |db| create(db, &workflow, &fingerprint, key.as_deref(), &started, at))
    }

    fn append<'a>(
        &'a self,
        run: RunId,
        seq: u64,
        event: &'a Event,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let json = match to_json(event) {
            Ok(json) => json,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let at = event.at();
        self.write(move |db| append(db, run, seq, &json, at))
    }

    fn set_status<'a>(
        &'a self,
        run: RunId,
        status: RunStatus,
        note: Option<&'a str>,
        dead_letter: Option<&'a DeadLetter>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let note = note.map(str::to_owned);
        let letter = dead_letter.cloned();
        self.write(move |db| set_status(db, run, status, note.as_deref(), letter.as_ref()))
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        self.read(move |db| load(db, run))
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        self.read(move |db| list_runs(db, &filter))
    }

    fn claim_unfinished<'a>(
        &'a self,
        owner: &'a str,
        workflows: &'a [&'a str],
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        let owner = owner.to_owned();
        let workflows: Vec<String> = workflows.iter().map(|w| (*w).to_owned()).collect();
        self.write(move |db| claim(db, &owner, &workflows))
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        self.read(list_dead_letters)
    }

    fn remove_dead_letter(&self, run: RunId) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(move |db| {
            db.conn
                .prepare_cached("DELETE FROM dead_letters WHERE run_id = ?1")
                .and_then(|mut s| s.execute(params![run.0]))
                .map_err(db_error(db))?;
            Ok(((), 0))
        })
    }

    fn shared(&self) -> bool {
        true
    }

    fn changed_since(&self, since: Timestamp) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.read(move |db| {
            let mut statement = db
                .conn
                .prepare_cached("SELECT id FROM runs WHERE status = 'running' AND updated_at >= ?1")
                .map_err(db_error(db))?;
            let ids = statement
                .query_map(params![since as i64], |row| row.get::<_, i64>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(db_error(db))?;
            Ok(ids.into_iter().map(|id| RunId(id as u64)).collect())
        })
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        spec_json: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let fingerprint = fingerprint.to_owned();
        let spec = spec_json.to_owned();
        self.write(move |db| {
            db.conn
                .prepare_cached("INSERT OR IGNORE INTO specs (fingerprint, spec) VALUES (?1, ?2)")
                .and_then(|mut s| s.execute(params![fingerprint, spec]))
                .map_err(db_error(db))?;
            Ok(((), 0))
        })
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let fingerprint = fingerprint.to_owned();
        self.read(move |db| {
            db.conn
                .prepare_cached("SELECT spec FROM specs WHERE fingerprint = ?1")
                .and_then(|mut s| {
                    s.query_row(params![fingerprint], |row| row.get::<_, String>(0))
                        .optional()
                })
                .map_err(db_error(db))
        })
    }
}

//! The embedded default store: one SQLite file in WAL mode.
//!
//! Writes go through one write connection. A write that finds nothing else pending is
//! written by its caller, on the caller's thread, with no hand-off to another thread;
//! writes that queue up meanwhile are written together in one transaction (each request
//! inside its own savepoint, so a failing request is rolled back alone), by the caller
//! that leads or by a writer thread that takes over under load: concurrent runs share
//! fsyncs instead of paying one per step (group commit). The write connection keeps
//! each running run's owner, token and journal length in memory, so a step's commit is
//! inserts only. Reads use a second connection on the blocking pool; WAL lets them run
//! beside the writer.
//!
//! Opening checks the file before writing anything: a file that is not a SQLite database,
//! a database of another application, a corrupt database or one written by a newer
//! version of this library is refused and left untouched.
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod admission;
mod check;
mod commits;
mod known;
mod leases;
mod limits;
mod options;
mod read;
mod schedules;
mod schema;
mod search;
mod sql;
mod tasks;
#[cfg(feature = "test-util")]
pub mod testing;
mod writer;

/// The `rusqlite` this store is built on. A build links one SQLite: an application that
/// uses rusqlite too can use this one (`workflow_sqlite::rusqlite`) and needs no second
/// version of its own.
pub use rusqlite;

pub use self::options::{SqliteOptions, Synchronous};

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use rusqlite::OpenFlags;
use tokio::sync::oneshot;

use self::commits::{wait_for_writer, Commits, Pending};
use self::schema::{check_header, Db, MIGRATIONS};
use self::sql::{CommitRow, NewRunRow};
use self::writer::{Job, Request, Writer};
use workflow_core::journal::Timestamp;
use workflow_core::store::{
    Claim, Claimant, Commit, Created, DeadLetter, Heartbeat, InboxItem, Lease, Message, NewRun,
    PurgeFilter, RunFilter, RunRecord, SpecRecord, Store, StoreError, StoredRun, Submitted,
    Verification, WorkerRow,
};
use workflow_core::BoxFuture;
use workflow_core::RunId;

/// The embedded default store: runs, journals and dead letters in one SQLite file (WAL
/// mode). Appends from concurrent runs share commits (group commit); every future
/// resolves only once its write is committed.
///
/// A write is queued when the method is called, not when its future is first polled; a
/// write whose future is dropped is still made. Dropping the store lets the writer finish
/// what is queued, then stops it.
///
/// A write that finds nothing else pending is made on the thread that awaits it, which
/// blocks that thread for the transaction and its fsync (as a blocking step would); under
/// load the writer thread takes over, and a write never waits on the caller's thread for
/// another process's lock.
///
/// Under tokio's paused test clock, prefer [`MemoryStore`](workflow_core::store::MemoryStore): the
/// runtime does not know that a write is in flight on the writer thread and may advance
/// the paused clock while waiting for it.
///
/// ```
/// use std::sync::Arc;
/// use workflow_core::store::{RunFilter, RunStatus, Store};
/// use workflow_core::Engine;
/// use workflow_sqlite::SqliteStore;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = std::env::temp_dir().join(format!("sqlite-store-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// // Created when missing, migrated when older; a file of a newer version is refused.
/// let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.join("runs.db"))?);
/// let engine = Engine::builder().shared_store(Arc::clone(&store)).build();
/// // The same store, read from your own code (reading needs the `Store` trait in scope).
/// let failed = store
///     .runs(RunFilter { status: Some(RunStatus::Failed), ..RunFilter::default() })
///     .await?;
/// assert!(failed.is_empty());
/// assert!(store.verify().await?.is_clean()); // every checksum verified: no damage
/// # drop((engine, store));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # Ok(()) }
/// ```
pub struct SqliteStore {
    path: PathBuf,
    /// The path as error messages show it.
    shown: Arc<str>,
    options: SqliteOptions,
    commits: Arc<Commits>,
    writer_thread: Option<JoinHandle<()>>,
    reader: Arc<Mutex<Db>>,
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
    /// Fails with [`StoreError::CorruptFile`] when the file is not a store of ours,
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

        let commits = Arc::new(Commits::new(
            Writer::new(writer, options.busy_timeout, options.synchronous),
            options.max_batch,
        ));
        let thread_commits = Arc::clone(&commits);
        let writer_thread = std::thread::Builder::new()
            .name("workflow-sqlite-writer".to_owned())
            .spawn(move || thread_commits.writer_thread())
            .map_err(|e| StoreError::Io(format!("{shown}: cannot start the writer thread: {e}")))?;

        tracing::debug!(path = %shown, "opened the SQLite store");
        Ok(SqliteStore {
            path,
            shown: Arc::from(shown),
            options,
            commits,
            writer_thread: Some(writer_thread),
            reader: Arc::new(Mutex::new(reader)),
        })
    }

    /// The file this store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many journal entries this store wrote since it was opened (run creations
    /// included), counted when their transaction commits.
    pub fn journal_writes(&self) -> u64 {
        self.commits.stats.journal_writes.load(Ordering::Relaxed)
    }

    /// How many write transactions this store committed since it was opened. With
    /// concurrent runs it stays below the number of writes: they share commits.
    pub fn commits(&self) -> u64 {
        self.commits.stats.commits.load(Ordering::Relaxed)
    }

    /// Changes the largest size the file may grow to (`None`: no limit), at once.
    pub fn set_max_size(
        &self,
        max_size: Option<u64>,
    ) -> BoxFuture<'static, Result<(), StoreError>> {
        self.write(move |db| db.set_max_size(max_size).map(|()| ((), 0)))
    }

    /// Queues `work`; the future resolves once its batch commits. Awaited while nobody
    /// writes, it is written on the awaiting thread (see [`SqliteStore`]).
    fn write<T, F>(&self, work: F) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnOnce(&Writer) -> Result<(T, u64), StoreError> + Send + 'static,
    {
        let (reply, mut answer) = oneshot::channel();
        let request: Box<dyn Job> = Box::new(Request::new(work, reply));
        let queued = self.commits.push(request);
        let mut pending = Pending::new(Arc::clone(&self.commits));
        let shown = Arc::clone(&self.shown);
        let stopped = move || StoreError::Io(format!("{shown}: the store's writer stopped"));
        Box::pin(async move {
            if !queued {
                return Err(stopped());
            }
            let mut answered = None;
            pending
                .settle(|| match answer.try_recv() {
                    Ok(result) => {
                        answered = Some(result);
                        true
                    }
                    Err(oneshot::error::TryRecvError::Empty) => false,
                    Err(oneshot::error::TryRecvError::Closed) => true,
                })
                .await;
            if let Some(result) = answered {
                return result;
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

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // The writer thread ends once what was handed to it is written.
        self.commits.close();
        if let Some(thread) = self.writer_thread.take() {
            // The last handle can be dropped by a write the writer thread runs: that
            // thread ends by itself once it is done.
            if thread.thread().id() == std::thread::current().id() {
                return;
            }
            if thread.join().is_err() {
                tracing::error!(path = %self.path.display(), "the SQLite writer thread panicked");
            }
        }
    }
}
impl Store for SqliteStore {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        match new_run_row(&run) {
            Ok(row) => self.write(move |db| sql::create(db, &row)),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }

    fn create_runs<'a>(
        &'a self,
        runs: &'a [NewRun<'a>],
    ) -> BoxFuture<'a, Result<Vec<Created>, StoreError>> {
        match runs.iter().map(new_run_row).collect::<Result<Vec<_>, _>>() {
            Ok(rows) => self.write(move |db| sql::create_many(db, &rows)),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }

    fn create_gated<'a>(
        &'a self,
        run: NewRun<'a>,
        gate: workflow_core::store::limits::Gate<'a>,
    ) -> BoxFuture<'a, Result<Created, StoreError>> {
        let row = match new_run_row(&run) {
            Ok(row) => row,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let gate = limits::GateRow::new(&gate);
        self.write(move |db| {
            let (created, entries) = sql::create(db, &row)?;
            if let Created::New { run, .. } = created {
                limits::insert_gate(db, run, &row.workflow, row.at, &gate)?;
            }
            Ok((created, entries))
        })
    }

    fn admit<'a>(
        &'a self,
        admit: workflow_core::store::limits::Admit<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Admission, StoreError>> {
        let row = admission::AdmitRow::new(&admit);
        // A read until a gated run waits. The write is made only after it: a write is
        // queued to the writer as soon as it is made and stands even if nobody awaits it,
        // and an admission whose answer nobody reads would hold runs no engine drives.
        let any = self.read(admission::any_gated);
        Box::pin(async move {
            if !any.await? {
                return Ok(workflow_core::store::limits::Admission::default());
            }
            self.write(move |db| admission::admit(db, &row)).await
        })
    }

    fn acquire_slot<'a>(
        &'a self,
        request: workflow_core::store::limits::SlotRequest<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Acquired, StoreError>> {
        let row = limits::SlotRow::new(&request);
        self.write(move |db| limits::acquire(db, &row))
    }

    fn release_slot<'a>(
        &'a self,
        run: RunId,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let holder = holder.to_owned();
        self.write(move |db| limits::release(db, run, &holder))
    }

    fn flow_of(
        &self,
        run: RunId,
    ) -> BoxFuture<'_, Result<workflow_core::store::limits::RunFlow, StoreError>> {
        self.read(move |db| limits::flow_of(db, run))
    }

    fn rate_buckets(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::limits::RateBucket>, StoreError>> {
        self.read(move |db| limits::rate_buckets(db, limit))
    }

    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        match CommitRow::new(&commit) {
            Ok(row) => self.write(move |db| sql::commit(db, &row)),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }

    fn commit_peeking<'a>(
        &'a self,
        commit: Commit<'a>,
        after: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        match CommitRow::new(&commit) {
            Ok(row) => self.write(move |db| {
                let ((), rows) = sql::commit(db, &row)?;
                Ok((read::inbox_holds(db, row.run, after)?, rows))
            }),
            Err(error) => Box::pin(std::future::ready(Err(error))),
        }
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        self.read(move |db| read::load(db, run))
    }

    fn load_many<'a>(
        &'a self,
        runs: &'a [RunId],
    ) -> BoxFuture<'a, Result<Vec<StoredRun>, StoreError>> {
        let runs = runs.to_vec();
        self.read(move |db| read::load_many(db, &runs))
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        self.read(move |db| read::list_runs(db, &filter))
    }

    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        let owner = claim.claimant.owner.to_owned();
        let workflows: Vec<String> = claim.workflows.iter().map(|w| (*w).to_owned()).collect();
        let (lease_ms, now) = (claim.claimant.lease_ms, claim.claimant.now);
        let (run, reclaim_own, limit) = (claim.run, claim.reclaim_own, claim.limit);
        let claimable = claim.claimable;
        let versions: Option<Vec<String>> = claim
            .versions
            .map(|v| v.iter().map(|f| (*f).to_owned()).collect());
        let write = move || {
            self.write(move |db| {
                let workflows: Vec<&str> = workflows.iter().map(String::as_str).collect();
                let versions: Option<Vec<&str>> = versions
                    .as_ref()
                    .map(|v| v.iter().map(String::as_str).collect());
                sql::claim(
                    db,
                    &Claim {
                        claimant: Claimant {
                            owner: &owner,
                            lease_ms,
                            now,
                        },
                        workflows: &workflows,
                        run,
                        reclaim_own,
                        limit,
                        claimable,
                        versions: versions.as_deref(),
                    },
                )
            })
        };
        if claimable != workflow_core::store::Claimable::Queued {
            return write();
        }
        // Looking for queued runs is a read until there is one: an idle worker's
        // admission pass costs the writer nothing. (A write is queued to the writer as
        // soon as it is made, so it is made only after the read.)
        let any_unowned = self.read(|db| {
            db.conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'running' AND owner IS NULL)",
                )
                .and_then(|mut s| s.query_row([], |row| row.get::<_, bool>(0)))
                .map_err(self::schema::db_error(db))
        });
        Box::pin(async move {
            if !any_unowned.await? {
                return Ok(Vec::new());
            }
            write().await
        })
    }

    fn renew<'a>(
        &'a self,
        claimant: Claimant<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        let owner = claimant.owner.to_owned();
        let until = claimant.now.saturating_add(claimant.lease_ms);
        self.write(move |db| sql::renew(db, &owner, until))
    }

    fn heartbeat<'a>(
        &'a self,
        beat: Heartbeat<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        let beat = sql::Beat::from(beat);
        self.write(move |db| sql::heartbeat(db, &beat))
    }

    fn workers(&self) -> BoxFuture<'_, Result<Vec<WorkerRow>, StoreError>> {
        self.read(sql::workers)
    }

    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let owner = owner.to_owned();
        let runs = runs.map(<[RunId]>::to_vec);
        self.write(move |db| sql::release(db, &owner, runs.as_deref()))
    }

    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>> {
        let message = match sql::to_json(message) {
            Ok(json) => json,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let key = key.map(str::to_owned);
        self.write(move |db| sql::submit(db, run, &message, key.as_deref(), at))
    }

    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>> {
        self.read(move |db| read::inbox(db, run, after))
    }

    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>> {
        self.read(move |db| read::pending_inbox(db, after))
    }

    fn open_tasks(
        &self,
        filter: workflow_core::store::TaskFilter,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::OpenTask>, StoreError>> {
        self.read(move |db| tasks::list(db, &filter))
    }

    fn task_counts(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::TaskCount>, StoreError>> {
        self.read(tasks::counts)
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        self.read(read::list_dead_letters)
    }

    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_spec::Schedule,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<workflow_core::store::ScheduleRow, StoreError>> {
        let id = id.to_owned();
        let workflow = workflow.to_owned();
        let definition = serde_json::to_string(schedule).unwrap_or_default();
        self.write(move |db| schedules::put_schedule(db, &id, &workflow, &definition, at))
    }

    fn schedules(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::ScheduleRow>, StoreError>> {
        self.read(schedules::schedules)
    }

    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: workflow_core::store::ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let id = id.to_owned();
        self.write(move |db| schedules::update_schedule(db, &id, version, &change))
    }

    fn decide_schedules(
        &self,
        due: workflow_core::store::DueSchedules,
        decide: workflow_core::store::Decider,
    ) -> BoxFuture<'_, Result<workflow_core::store::DueBatch, StoreError>> {
        self.write(move |db| schedules::decide_schedules(db, &due, &decide))
    }

    fn update_schedules(
        &self,
        updates: Vec<workflow_core::store::ScheduleUpdate>,
    ) -> BoxFuture<'_, Result<Vec<bool>, StoreError>> {
        self.write(move |db| schedules::update_schedules(db, &updates))
    }

    fn purge(&self, filter: PurgeFilter) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        if filter.dry_run {
            self.read(move |db| search::purgeable(db, &filter))
        } else {
            let mut purge = search::Purge::new(filter);
            let shown = Arc::clone(&self.shown);
            self.commits
                .maintain(shown, move |writer| purge.step(writer))
        }
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        let id = id.to_owned();
        self.write(move |db| schedules::delete_schedule(db, &id))
    }

    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<workflow_core::store::MissedTicks>, StoreError>> {
        let id = id.to_owned();
        self.read(move |db| schedules::missed_ticks(db, &id, limit))
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let fingerprint = fingerprint.to_owned();
        let workflow = workflow.to_owned();
        let spec = spec_json.to_owned();
        self.write(move |db| sql::put_spec(db, &fingerprint, &workflow, &spec, at))
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let fingerprint = fingerprint.to_owned();
        self.read(move |db| read::spec(db, &fingerprint))
    }

    fn specs<'a>(
        &'a self,
        workflow: &'a str,
    ) -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>> {
        let workflow = workflow.to_owned();
        self.read(move |db| read::specs(db, &workflow))
    }

    fn verify(&self) -> BoxFuture<'_, Result<Verification, StoreError>> {
        self.read(check::verify)
    }

    fn shared(&self) -> bool {
        true
    }
}

/// The owned parts of a [`NewRun`], moved to the writer thread.
fn new_run_row(run: &NewRun<'_>) -> Result<NewRunRow, StoreError> {
    Ok(NewRunRow {
        workflow: run.workflow.to_owned(),
        fingerprint: run.fingerprint.to_owned(),
        key: run.idempotency_key.map(str::to_owned),
        events: run
            .events
            .iter()
            .map(sql::to_json)
            .collect::<Result<_, _>>()?,
        parent: run.parent,
        owner: run.owner.map(|c| (c.owner.to_owned(), c.lease_ms, c.now)),
        supersedes: run.supersedes.map(|(old, note)| (old, note.to_owned())),
        at: run.at,
        tasks: workflow_core::store::tasks::changes(
            run.events,
            None,
            workflow_core::store::RunStatus::Running,
        ),
        search: run.search.to_vec(),
    })
}

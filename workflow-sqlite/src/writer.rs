//! The write connection and its transactions: every request of a batch is written in one
//! transaction (group commit), each inside its own savepoint so a failing one is rolled
//! back alone. Who runs a batch, and when, is `commits.rs`'s.

use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::ErrorCode;
use tokio::sync::oneshot;

use super::known::Known;
use super::schema::Db;
use super::Synchronous;
use workflow_core::store::StoreError;

/// Counters of the write connection.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) journal_writes: AtomicU64,
    pub(super) commits: AtomicU64,
}

/// The write connection, with what it knows of the runs it writes.
pub(super) struct Writer {
    db: Db,
    /// Each running run's owner, token and journal length.
    pub(super) known: RefCell<Known>,
    /// How long a transaction waits for another process's lock when it may wait.
    busy_timeout: Duration,
    /// Whether the connection currently waits out locks (`busy_timeout`) or fails at once.
    patient: Cell<bool>,
    /// When the store's commits reach the disk.
    synchronous: Synchronous,
}

impl Deref for Writer {
    type Target = Db;

    fn deref(&self) -> &Db {
        &self.db
    }
}

impl Writer {
    pub(super) fn new(db: Db, busy_timeout: Duration, synchronous: Synchronous) -> Writer {
        Writer {
            db,
            known: RefCell::new(Known::default()),
            busy_timeout,
            patient: Cell::new(true),
            synchronous,
        }
    }

    /// Runs `write` (maintenance) with commits that do not sync the WAL
    /// (`synchronous = NORMAL`) when the store syncs every commit: a maintenance step then
    /// costs its own work, not a sync a live commit would wait behind. SQLite's WAL stays
    /// consistent either way; a power loss may only roll back the last such steps (runs a
    /// purge deleted are back whole), and the next synced commit makes them durable too.
    pub(super) fn unsynced<R>(&self, write: impl FnOnce() -> R) -> R {
        let relax = self.synchronous == Synchronous::Full
            && self
                .db
                .conn
                .execute_batch("PRAGMA synchronous = NORMAL")
                .is_ok();
        let written = write();
        if relax {
            let restore = "PRAGMA synchronous = FULL";
            if let Err(error) = self.db.conn.execute_batch(restore) {
                tracing::error!(path = %self.db.path, %error, "cannot restore synchronous = FULL");
            }
        }
        written
    }

    /// Makes transactions wait out another process's lock up to the busy timeout
    /// (`patient`), or fail at once.
    fn set_patient(&self, patient: bool) {
        if self.patient.get() != patient {
            let timeout = if patient {
                self.busy_timeout
            } else {
                Duration::ZERO
            };
            if self.db.conn.busy_timeout(timeout).is_ok() {
                self.patient.set(patient);
            }
        }
    }
}

/// A write request as a batch sees it.
pub(super) trait Job: Send {
    /// Runs the request inside the open transaction: the journal entries it wrote, or
    /// `None` when it failed (its error is kept for the reply).
    fn apply(&mut self, writer: &Writer) -> Option<u64>;
    /// The batch did not commit: a request that succeeded fails with `error`.
    fn fail(&mut self, error: &StoreError);
    /// The error this request failed with, if it failed.
    fn error(&self) -> Option<StoreError>;
    /// Sends the outcome to the caller.
    fn reply(self: Box<Self>);
    /// Once its transaction committed: whether the request has more to do in a
    /// transaction of its own (it is queued again, and answered once it is done).
    fn again(&self) -> bool {
        false
    }
}

/// A request's answer, kept until its transaction ends, then sent to the caller.
struct Answer<T> {
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T> Answer<T> {
    fn new(reply: oneshot::Sender<Result<T, StoreError>>) -> Self {
        Answer {
            result: None,
            reply,
        }
    }

    /// What the request's work gave: the journal entries it wrote, or `None` (and the
    /// error kept) when it failed.
    fn keep(&mut self, written: Result<(Option<T>, u64), StoreError>) -> Option<u64> {
        match written {
            Ok((value, entries)) => {
                if let Some(value) = value {
                    self.result = Some(Ok(value));
                }
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

    fn error(&self) -> Option<StoreError> {
        match &self.result {
            Some(Err(error)) => Some(error.clone()),
            _ => None,
        }
    }

    fn send(self) {
        let result = self
            .result
            .unwrap_or_else(|| Err(StoreError::Io("the write request was not run".to_owned())));
        // The caller may have stopped waiting; the write stands either way.
        let _ = self.reply.send(result);
    }
}

/// A write request: `work` runs once, in the batch's transaction.
pub(super) struct Request<T, F> {
    work: Option<F>,
    answer: Answer<T>,
}

impl<T, F> Request<T, F> {
    pub(super) fn new(work: F, reply: oneshot::Sender<Result<T, StoreError>>) -> Self {
        Request {
            work: Some(work),
            answer: Answer::new(reply),
        }
    }
}

impl<T, F> Job for Request<T, F>
where
    T: Send,
    F: FnOnce(&Writer) -> Result<(T, u64), StoreError> + Send,
{
    fn apply(&mut self, writer: &Writer) -> Option<u64> {
        let work = self.work.take()?;
        self.answer
            .keep(work(writer).map(|(value, entries)| (Some(value), entries)))
    }

    fn fail(&mut self, error: &StoreError) {
        self.answer.fail(error);
    }

    fn error(&self) -> Option<StoreError> {
        self.answer.error()
    }

    fn reply(self: Box<Self>) {
        self.answer.send();
    }
}

/// What one step of a [`Steps`] request did.
pub(super) enum Step<T> {
    /// More is left to do, in another transaction.
    More(u64),
    /// The request is done: its answer, and the journal entries its last step wrote.
    Done(T, u64),
}

/// A maintenance request done in steps, each alone in a transaction of its own: `work`
/// runs once per step until it says the request is done. A step that fails (or whose
/// transaction does not commit) ends the request with its error; the steps before it stay
/// committed.
pub(super) struct Steps<T, F> {
    work: F,
    more: bool,
    answer: Answer<T>,
}

impl<T, F> Steps<T, F> {
    pub(super) fn new(work: F, reply: oneshot::Sender<Result<T, StoreError>>) -> Self {
        Steps {
            work,
            more: false,
            answer: Answer::new(reply),
        }
    }
}

impl<T, F> Job for Steps<T, F>
where
    T: Send,
    F: FnMut(&Writer) -> Result<Step<T>, StoreError> + Send,
{
    fn apply(&mut self, writer: &Writer) -> Option<u64> {
        let step = (self.work)(writer);
        self.more = matches!(step, Ok(Step::More(_)));
        self.answer.keep(step.map(|step| match step {
            Step::More(entries) => (None, entries),
            Step::Done(value, entries) => (Some(value), entries),
        }))
    }

    fn fail(&mut self, error: &StoreError) {
        self.more = false;
        self.answer.fail(error);
    }

    fn error(&self) -> Option<StoreError> {
        self.answer.error()
    }

    fn reply(self: Box<Self>) {
        self.answer.send();
    }

    fn again(&self) -> bool {
        self.more
    }
}

/// How a batch ended.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// Committed, or failed: every request holds its outcome.
    Done,
    /// Not begun: another process holds the file's write lock and the batch may not wait
    /// for it. Nothing was run; the requests are as they were.
    Busy,
}

/// Writes `batch` in one transaction. With `patient`, beginning waits out another
/// process's lock up to the busy timeout; without, it gives up at once ([`Written::Busy`]).
pub(super) fn write_batch(
    writer: &Writer,
    batch: &mut [Box<dyn Job>],
    stats: &Stats,
    patient: bool,
) -> Written {
    let db = &writer.db;
    let started = Instant::now();
    if !db.conn.is_autocommit() {
        // A batch interrupted by a panic left its transaction open.
        let _ = db.conn.execute_batch("ROLLBACK");
        writer.known.borrow_mut().clear();
    }
    writer.set_patient(patient);
    if let Err(e) = db.conn.execute_batch("BEGIN IMMEDIATE") {
        if !patient
            && matches!(
                e.sqlite_error_code(),
                Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
            )
        {
            return Written::Busy;
        }
        let error = db.error(e, started);
        tracing::warn!(path = %db.path, %error, "cannot start a write transaction");
        batch.iter_mut().for_each(|request| request.fail(&error));
        return Written::Done;
    }
    // Another connection (another process) wrote since this one last did: what this one
    // knows of runs may be stale.
    match db
        .conn
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut s| s.query_row([], |row| row.get::<_, i64>(0)))
    {
        Ok(version) => writer.known.borrow_mut().check_version(version),
        Err(_) => writer.known.borrow_mut().clear(),
    }
    let committed = run_batch(writer, batch, stats, started);
    if !committed {
        // What the batch's requests taught may not have been kept.
        writer.known.borrow_mut().clear();
    }
    Written::Done
}

/// Runs the requests in the open transaction and commits; whether it committed.
fn run_batch(writer: &Writer, batch: &mut [Box<dyn Job>], stats: &Stats, started: Instant) -> bool {
    let db = &writer.db;
    let batch_len = batch.len();
    let mut entries = 0;
    let run = |sql: &str| {
        db.conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map(drop)
    };
    if let [request] = batch {
        // Alone in its transaction, a failing request needs no savepoint: roll it all back.
        match request.apply(writer) {
            Some(written) => entries += written,
            None => {
                let _ = db.conn.execute_batch("ROLLBACK");
                return true;
            }
        }
    }
    for index in (0..batch.len()).filter(|_| batch_len > 1) {
        let request = &mut batch[index];
        let step = run("SAVEPOINT request").and_then(|()| match request.apply(writer) {
            Some(written) => {
                entries += written;
                run("RELEASE request")
            }
            // Some failures (a full disk, an I/O error) make SQLite roll the whole
            // transaction back: every request of the batch fails with that error.
            None if db.conn.is_autocommit() => Ok(()),
            None => run("ROLLBACK TO request").and_then(|()| run("RELEASE request")),
        });
        if step.is_ok() && db.conn.is_autocommit() {
            let error = batch[index]
                .error()
                .unwrap_or_else(|| StoreError::Io("the write transaction was rolled back".into()));
            tracing::warn!(path = %db.path, %error, "a write batch was rolled back");
            batch.iter_mut().for_each(|request| request.fail(&error));
            return false;
        }
        if let Err(e) = step {
            // The transaction is in an unknown state: give it up whole.
            let error = db.error(e, started);
            tracing::warn!(path = %db.path, %error, "a write batch failed");
            let _ = db.conn.execute_batch("ROLLBACK");
            batch.iter_mut().for_each(|request| request.fail(&error));
            return false;
        }
    }
    match db.conn.execute_batch("COMMIT") {
        Ok(()) => {
            stats.commits.fetch_add(1, Ordering::Relaxed);
            stats.journal_writes.fetch_add(entries, Ordering::Relaxed);
            tracing::trace!(path = %db.path, requests = batch.len(), entries, "committed a write batch");
            true
        }
        Err(e) => {
            let error = db.error(e, started);
            tracing::warn!(path = %db.path, %error, "a write batch did not commit");
            if !db.conn.is_autocommit() {
                let _ = db.conn.execute_batch("ROLLBACK");
            }
            batch.iter_mut().for_each(|request| request.fail(&error));
            false
        }
    }
}

//! The writer thread: it owns the write connection and commits every request already
//! queued in one transaction (group commit), each request inside its own savepoint so a
//! failing one is rolled back alone.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::schema::Db;
use crate::store::StoreError;

/// Counters shared with the writer thread.
#[derive(Debug, Default)]
pub(super) struct Stats {
    pub(super) journal_writes: AtomicU64,
    pub(super) commits: AtomicU64,
}

/// A write request as the writer thread sees it.
pub(super) trait Job: Send {
    /// Runs the request inside the open transaction: the journal entries it wrote, or
    /// `None` when it failed (its error is kept for the reply).
    fn apply(&mut self, db: &Db) -> Option<u64>;
    /// The batch did not commit: a request that succeeded fails with `error`.
    fn fail(&mut self, error: &StoreError);
    /// The error this request failed with, if it failed.
    fn error(&self) -> Option<StoreError>;
    /// Sends the outcome to the caller.
    fn reply(self: Box<Self>);
}

pub(super) struct Request<T, F> {
    pub(super) work: Option<F>,
    pub(super) result: Option<Result<T, StoreError>>,
    pub(super) reply: oneshot::Sender<Result<T, StoreError>>,
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

    fn error(&self) -> Option<StoreError> {
        match &self.result {
            Some(Err(error)) => Some(error.clone()),
            _ => None,
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
pub(super) fn write_loop(
    db: Db,
    requests: mpsc::Receiver<Box<dyn Job>>,
    max_batch: usize,
    stats: &Stats,
) {
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
    for index in (0..batch.len()).filter(|_| batch_len > 1) {
        let request = &mut batch[index];
        let step = run("SAVEPOINT request").and_then(|()| match request.apply(db) {
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
            return;
        }
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

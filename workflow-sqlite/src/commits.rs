//! Who writes a batch, and when: the caller itself when nothing else is pending, the
//! writer thread under load.
//!
//! A write request joins a queue when the method is called. Its caller, awaiting it,
//! first yields once, so that the tasks ready on its thread queue their requests too;
//! then, if nobody is writing and its request was not written meanwhile, it leads: it
//! writes every queued request in one transaction on its own thread and answers them. A
//! request alone therefore costs no hand-off to another thread and back. Requests queued
//! while a leader writes wait for it; if some are left when it is done, it hands the
//! queue to the writer thread, which leads until the queue is empty, so concurrent runs
//! keep sharing commits (group commit) and a busy store keeps its fsyncs off the async
//! runtime's threads.
//!
//! A caller never waits for another process's lock: when the file is locked, its batch
//! goes to the writer thread, which waits up to the busy timeout.
//!
//! Maintenance (the retention purge, and the vacuum after it) queues apart, with a lower
//! priority: only the writer thread writes it, one step at a time, each step alone in its
//! transaction, and only when no ordinary request waits, so a commit arriving during
//! maintenance waits for one small step at most. So that maintenance still makes
//! progress under a load that never lets the queue empty, a maintenance step is taken
//! anyway once [`MAINTENANCE_AFTER`] ordinary batches passed it over.
//! A maintenance step's commit does not sync the WAL ([`Writer::unsynced`]).

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;
use workflow_core::store::StoreError;
use workflow_core::BoxFuture;

use super::writer::{write_batch, Job, Stats, Step, Steps, Writer, Written};

/// How many ordinary batches may be written while a maintenance request waits before one
/// step of it is taken anyway.
pub(super) const MAINTENANCE_AFTER: usize = 4;

/// The queue of write requests and who leads it.
#[derive(Default)]
struct State {
    queue: VecDeque<Box<dyn Job>>,
    /// Maintenance requests, oldest first: written by the writer thread only, one step
    /// at a time, when `queue` is empty or `passed_over` reached [`MAINTENANCE_AFTER`].
    maintenance: VecDeque<Box<dyn Job>>,
    /// Ordinary batches written while a maintenance request waited, since one was last
    /// taken.
    passed_over: usize,
    /// Someone (a caller or the writer thread) writes the queue.
    leader: bool,
    /// The leader handed the queue to the writer thread.
    handoff: bool,
    /// The store was dropped: the writer thread ends once nothing is handed to it.
    closed: bool,
}

impl State {
    /// Whether no request, ordinary or maintenance, is queued.
    fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.maintenance.is_empty()
    }
}

/// The write side of a store, shared by the store, its pending writes and the writer
/// thread.
pub(super) struct Commits {
    state: Mutex<State>,
    wake: Condvar,
    /// Locked by the leader only.
    writer: Mutex<Writer>,
    pub(super) stats: Stats,
    max_batch: usize,
}

impl Commits {
    pub(super) fn new(writer: Writer, max_batch: usize) -> Commits {
        Commits {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            writer: Mutex::new(writer),
            stats: Stats::default(),
            max_batch: max_batch.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a request; `false` once the store was dropped.
    pub(super) fn push(&self, job: Box<dyn Job>) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        state.queue.push_back(job);
        true
    }

    /// Queues a maintenance request; the writer thread writes it (woken unless someone
    /// leads, who hands it over when done). `false` once the store was dropped.
    pub(super) fn push_maintenance(&self, job: Box<dyn Job>) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        state.maintenance.push_back(job);
        if !std::mem::replace(&mut state.leader, true) {
            self.hand_off(state);
        }
        true
    }

    /// Queues `work` as maintenance: the writer thread runs its steps, each alone in a
    /// transaction, when no ordinary write waits. `shown` names the file in errors.
    pub(super) fn maintain<T, F>(
        &self,
        shown: Arc<str>,
        work: F,
    ) -> BoxFuture<'static, Result<T, StoreError>>
    where
        T: Send + 'static,
        F: FnMut(&Writer) -> Result<Step<T>, StoreError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Steps::new(work, reply));
        let queued = self.push_maintenance(job);
        let stopped = move || StoreError::Io(format!("{shown}: the store's writer stopped"));
        Box::pin(async move {
            match queued {
                true => wait_for_writer(answer).await.ok_or_else(stopped)?,
                false => Err(stopped()),
            }
        })
    }

    /// The next ordinary batch; `None` when none waits.
    fn take_ordinary(&self, state: &mut State) -> Option<Vec<Box<dyn Job>>> {
        if state.queue.is_empty() {
            return None;
        }
        if !state.maintenance.is_empty() {
            state.passed_over += 1;
        }
        let take = state.queue.len().min(self.max_batch);
        Some(state.queue.drain(..take).collect())
    }

    /// What the writer thread writes next: an ordinary batch, else (or when maintenance
    /// was passed over long enough) one maintenance request alone, and whether it is
    /// maintenance; `None` when nothing waits.
    fn take_next(&self, state: &mut State) -> Option<(Vec<Box<dyn Job>>, bool)> {
        let overdue = state.passed_over >= MAINTENANCE_AFTER;
        if !overdue || state.maintenance.is_empty() {
            if let Some(batch) = self.take_ordinary(state) {
                return Some((batch, false));
            }
        }
        let job = state.maintenance.pop_front()?;
        state.passed_over = 0;
        Some((vec![job], true))
    }

    /// Becomes the leader unless someone leads already.
    fn try_lead(&self) -> bool {
        let mut state = self.state();
        !std::mem::replace(&mut state.leader, true)
    }

    /// Requests are queued and nobody leads: the writer thread writes them (the caller
    /// does, once the store was dropped and the writer thread is gone).
    fn orphaned(&self, mut state: MutexGuard<'_, State>) {
        if state.leader || state.is_empty() {
            return;
        }
        state.leader = true;
        if state.closed {
            drop(state);
            self.lead_until_empty();
        } else {
            self.hand_off(state);
        }
    }

    /// Leads as a caller: writes ordinary batches until `done` says the caller's own
    /// request was answered (or none is queued), then gives up the lead, handing what is
    /// left (maintenance included) to the writer thread.
    fn lead(&self, mut done: impl FnMut() -> bool) {
        loop {
            let mut batch = {
                let mut state = self.state();
                match self.take_ordinary(&mut state) {
                    Some(batch) => batch,
                    None => return self.give_up(state),
                }
            };
            let written = {
                let writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
                write_batch(&writer, &mut batch, &self.stats, false)
            };
            if written == Written::Busy {
                // Another process holds the file: the writer thread waits for it.
                let mut state = self.state();
                for job in batch.into_iter().rev() {
                    state.queue.push_front(job);
                }
                if state.closed {
                    drop(state);
                    self.lead_until_empty();
                } else {
                    self.hand_off(state);
                }
                return;
            }
            batch.into_iter().for_each(|job| job.reply());
            if done() {
                return self.give_up(self.state());
            }
        }
    }

    /// A caller gives up the lead: to nobody when nothing is queued, else to the writer
    /// thread (or, once the store was dropped, it writes what is left itself).
    fn give_up(&self, mut state: MutexGuard<'_, State>) {
        if state.is_empty() {
            state.leader = false;
        } else if state.closed {
            drop(state);
            self.lead_until_empty();
        } else {
            self.hand_off(state);
        }
    }

    /// Gives the lead (held) to the writer thread.
    fn hand_off(&self, mut state: MutexGuard<'_, State>) {
        state.handoff = true;
        drop(state);
        self.wake.notify_one();
    }

    /// Leads (held) until nothing is queued, waiting out other processes' locks: ordinary
    /// batches first, maintenance steps when none waits (see [`MAINTENANCE_AFTER`]).
    fn lead_until_empty(&self) {
        loop {
            let (mut batch, maintenance) = {
                let mut state = self.state();
                match self.take_next(&mut state) {
                    Some(next) => next,
                    None => {
                        state.leader = false;
                        return;
                    }
                }
            };
            {
                let writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
                let mut write = || write_batch(&writer, &mut batch, &self.stats, true);
                match maintenance {
                    true => writer.unsynced(write),
                    false => write(),
                };
            }
            for job in batch {
                if job.again() {
                    // A maintenance request with steps left keeps its place.
                    self.state().maintenance.push_front(job);
                } else {
                    job.reply();
                }
            }
        }
    }

    /// The writer thread: leads whenever the lead is handed to it; ends once the store
    /// is dropped and nothing is left to it.
    pub(super) fn writer_thread(self: Arc<Self>) {
        loop {
            let mut state = self.state();
            while !state.handoff && !state.closed {
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.handoff {
                state.handoff = false;
                drop(state);
                self.lead_until_empty();
                continue;
            }
            // Closed. Requests nobody waits for any more are still written.
            if !state.leader && !state.is_empty() {
                state.leader = true;
                drop(state);
                self.lead_until_empty();
            }
            return;
        }
    }

    /// The store was dropped: the writer thread finishes what is handed to it and ends.
    pub(super) fn close(&self) {
        self.state().closed = true;
        self.wake.notify_one();
    }
}

/// A queued request, from its caller's side: the caller writes the queue when nobody
/// does.
pub(super) struct Pending {
    commits: Arc<Commits>,
    /// The caller leads and has not given up the lead yet.
    leading: bool,
    /// The request was answered, or is in the hands of whoever leads.
    settled: bool,
}

impl Pending {
    pub(super) fn new(commits: Arc<Commits>) -> Pending {
        Pending {
            commits,
            leading: false,
            settled: false,
        }
    }

    /// Yields once, so that the tasks ready on this thread queue their requests too; then,
    /// unless `answered` says the request was answered meanwhile or someone else writes,
    /// writes batches on this thread until the request is answered.
    ///
    /// The lead is only ever held while a batch is written, never across an await: a
    /// future that stops being polled (a step's future its driver does not poll while
    /// it commits) never holds up anyone else's write.
    pub(super) async fn settle(&mut self, mut answered: impl FnMut() -> bool) {
        tokio::task::yield_now().await;
        if !answered() && self.commits.try_lead() {
            self.leading = true;
            self.commits.lead(answered);
            self.leading = false;
        }
        self.settled = true;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.leading {
            // A batch panicked: give up the lead.
            let mut state = self.commits.state();
            state.leader = false;
            if !state.closed {
                self.commits.orphaned(state);
            }
        } else if !self.settled {
            // Dropped before its request was in hand: whoever leads next writes it, or the
            // writer thread if nobody leads.
            self.commits.orphaned(self.commits.state());
        }
    }
}

/// Waits for the writer thread's answer; `None` if the writer is gone.
///
/// When workflow-core is built with its `test-util` feature the wait occupies a
/// blocking-pool thread: tokio does not auto-advance paused time while blocking work is in
/// flight, so a test under `start_paused` never sees its clock jump past a step timeout
/// while a write is pending.
pub(super) async fn wait_for_writer<T: Send + 'static>(answer: oneshot::Receiver<T>) -> Option<T> {
    if workflow_core::store::TEST_UTIL && tokio::runtime::Handle::try_current().is_ok() {
        return tokio::task::spawn_blocking(move || answer.blocking_recv().ok())
            .await
            .ok()
            .flatten();
    }
    answer.await.ok()
}

#[cfg(test)]
mod tests;

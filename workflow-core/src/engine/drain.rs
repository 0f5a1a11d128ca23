//! Leaving gracefully: [`Engine::drain`] stops taking work, lets the attempts in flight
//! finish until a deadline, commits their outcomes and hands each run over by releasing
//! its lease, so another worker takes it up at once instead of after a lease's lapse.

use std::time::Duration;

use super::{lock, Engine};
use crate::error::RunId;
use crate::journal::Timestamp;

/// A run a draining engine handed over: the record of its release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Handover {
    /// The run.
    pub run: RunId,
    /// When its lease was released, by the engine's clock.
    pub released_at: Timestamp,
    /// Its journal's length at the release, when its driver released it (a run that
    /// waited with nothing in flight was not loaded): the next owner's first entry is the
    /// one at this position.
    pub journal_len: Option<u64>,
}

/// What a drain did ([`Engine::drain`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drained {
    /// The runs whose attempts in flight all finished (or that had none) and were handed
    /// over.
    pub handed_over: Vec<Handover>,
    /// The runs whose attempts were still in flight at the deadline: stopped (dropped
    /// unjournaled, as a crash would leave them) and released.
    pub stopped: Vec<RunId>,
    /// Whether every run this engine owned was released in the store (a release that
    /// failed leaves its runs to lapse after their lease).
    pub released: bool,
}

impl Engine {
    /// Whether the engine drains or drained ([`Engine::drain`]).
    pub fn is_draining(&self) -> bool {
        *self.inner.draining.borrow()
    }

    /// Whether this engine claims, admits and drives runs now: built as a worker and not
    /// draining.
    pub(super) fn is_worker(&self) -> bool {
        self.inner.worker && !self.is_draining()
    }

    /// A subscription to the drain signal, for a driver.
    pub(super) fn drain_signal(&self) -> tokio::sync::watch::Receiver<bool> {
        self.inner.draining.subscribe()
    }

    /// Leaves gracefully, as a worker of a rolling deploy should (`workflow serve` does it
    /// on SIGTERM and SIGINT):
    ///
    /// 1. takes no more work: claims, admits and wakes no run, fires no schedule; a start
    ///    on this engine is queued for the other workers, as on an intake-only engine;
    /// 2. lets the attempts and compensations in flight finish until `deadline`, commits
    ///    their outcomes and starts nothing after them;
    /// 3. hands each run over as soon as it has nothing in flight: its lease is released
    ///    in the store (the runs waiting for a person or a timer at once), so another
    ///    worker takes it up at once, not after the lease lapses;
    /// 4. at the deadline, stops what still runs, as a cancel's grace would end: the
    ///    attempt's future is dropped (a browser page is closed) and nothing of it is
    ///    journaled, so the next owner finds it interrupted and recovers it as after a
    ///    crash (an internal step runs again; an external effect is reconciled, or settles
    ///    `outcome_unknown` unless idempotent).
    ///
    /// Returns once every run is released; the engine then drives nothing (like
    /// [`Engine::shutdown`]). The gauge `workflow_draining` reads 1 from the call on.
    pub async fn drain(&self, deadline: Duration) -> Drained {
        let until = tokio::time::Instant::now() + deadline;
        self.inner.draining.send_replace(true);
        metrics::gauge!("workflow_draining").set(1.0);
        lock(&self.inner.drain_began).get_or_insert(self.now());
        if self.inner.store.multi_worker() {
            // Its worker row says it drains from now on (each heartbeat after says so too).
            if let Err(error) = self.inner.store.heartbeat(self.heartbeat()).await {
                tracing::warn!(error = %error, "cannot record that this engine drains");
            }
        }
        tracing::info!(
            deadline_ms = deadline.as_millis() as u64,
            "draining: no more work is taken; runs are handed over as their attempts finish"
        );
        if let Some(scheduler) = lock(&self.inner.scheduler).take() {
            scheduler.abort();
        }
        // Runs with nothing in flight are released at once.
        let idle: Vec<RunId> = {
            let mut hibernating = self.inner.lock_hibernating();
            hibernating.drain().map(|(run, _)| run).collect()
        };
        self.inner.lock_wakeups().clear();
        let mut drained = Drained::default();
        for run in idle {
            if self.release(run).await {
                drained.handed_over.push(Handover {
                    run,
                    released_at: self.now(),
                    journal_len: None,
                });
            }
        }
        // Drivers release their own runs as their work ends (`Driver::drain_out`).
        loop {
            let live: Vec<RunId> = self.inner.lock_live().keys().copied().collect();
            if live.is_empty() || tokio::time::Instant::now() >= until {
                break;
            }
            let wait = until.saturating_duration_since(tokio::time::Instant::now());
            tokio::time::sleep(wait.min(Duration::from_millis(5))).await;
        }
        drained.handed_over.extend(self.handed_over());
        let stopped: Vec<(RunId, super::Live)> = self.inner.lock_live().drain().collect();
        for (run, live) in stopped {
            if let Some(abort) = live.abort {
                abort.abort();
            }
            // Gone once its driver is dropped (with its work: futures, pages, tasks).
            let mut done = live.done;
            let gone = async { while done.changed().await.is_ok() {} };
            if tokio::time::timeout(Duration::from_secs(5), gone)
                .await
                .is_err()
            {
                tracing::warn!(run = %run, "a stopped driver did not end within 5 s");
            }
            tracing::warn!(run = %run, "drain deadline: the run's attempts in flight were stopped");
            drained.stopped.push(run);
        }
        // Everything this engine still owns (runs stopped at the deadline, runs it held
        // without driving them).
        drained.released = match self.inner.store.release(&self.inner.owner, None).await {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(error = %error, "cannot release the runs this engine owns; they lapse after their lease");
                false
            }
        };
        drained.handed_over.sort_unstable();
        metrics::counter!("workflow_runs_handed_over_total")
            .increment((drained.handed_over.len() + drained.stopped.len()) as u64);
        tracing::info!(
            handed_over = drained.handed_over.len(),
            stopped = drained.stopped.len(),
            "drained"
        );
        self.shutdown();
        drained
    }

    /// Releases one run's lease for another worker; `false` when the store refused.
    pub(super) async fn release(&self, run: RunId) -> bool {
        match self
            .inner
            .store
            .release(&self.inner.owner, Some(&[run]))
            .await
        {
            Ok(()) => {
                tracing::info!(run = %run, "handed over: the run's lease was released");
                true
            }
            Err(error) => {
                tracing::warn!(run = %run, error = %error, "cannot release the run; it lapses after its lease");
                false
            }
        }
    }

    /// Records a run a driver handed over while draining, with its journal's length.
    pub(super) fn record_handover(&self, run: RunId, journal_len: u64) {
        let released_at = self.now();
        lock(&self.inner.handed_over).push(Handover {
            run,
            released_at,
            journal_len: Some(journal_len),
        });
    }

    fn handed_over(&self) -> Vec<Handover> {
        std::mem::take(&mut *lock(&self.inner.handed_over))
    }
}

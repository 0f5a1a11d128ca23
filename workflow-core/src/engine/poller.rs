//! The engine's one background task: it wakes hibernating runs when their timers are due,
//! hands messages other processes left in inboxes to the runs this engine drives, in
//! stores several engines share, renews this engine's leases and takes over runs whose
//! owner's lease lapsed, and admits queued runs (`queue`). It sleeps until its next timer, at most a second in shared stores,
//! and wakes early when the store signals that another process wrote something for it.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::driver::Msg;
use super::lifecycle::is_damage;
use super::{lock, Engine, FOREIGN_POLL};
use crate::clock::until;
use crate::error::{RunError, RunId};
use crate::journal::Timestamp;
use crate::store::{Claim, Claimable};

impl Engine {
    /// Starts the poller unless it runs.
    pub(super) fn ensure_poller(&self) {
        let mut poller = lock(&self.inner.poller);
        if poller.is_some() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let notify = Arc::clone(&self.inner.wake_notify);
        let mut signal = self.inner.store.wake_signal();
        let handle = tokio::spawn(async move {
            let mut renewed: Option<Timestamp> = None;
            let mut idle_owned: Vec<RunId> = Vec::new();
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let engine = Engine { inner };
                engine.wake_due().await;
                let shared = engine.inner.store.shared();
                if shared && engine.drives_any() {
                    engine.deliver_inbox().await;
                }
                let multi = engine.inner.store.multi_worker();
                if multi {
                    let now = engine.now();
                    let every = engine.inner.lease_ms / 3;
                    if renewed.is_none_or(|at| now >= at + every) {
                        engine.renew(&mut idle_owned).await;
                        renewed = Some(now);
                    }
                    engine.take_over().await;
                }
                engine.admit_queued().await;
                let next = engine.inner.lock_wakeups().first().map(|(at, _)| *at);
                let mut pause =
                    next.map_or(Duration::from_secs(3600), |at| until(engine.now(), at));
                if shared || multi {
                    pause = pause.min(FOREIGN_POLL);
                }
                if multi {
                    // Renewals keep their cadence (a third of the lease) however short the
                    // lease: a late one would make the engine fence itself off.
                    pause = pause.min(Duration::from_millis(engine.inner.lease_ms / 3));
                }
                drop(engine);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = notify.notified() => {}
                    Ok(()) = store_signal(&mut signal) => {}
                }
            }
        });
        *poller = Some(handle.abort_handle());
    }

    /// The runs this engine drives or keeps hibernating.
    fn driven(&self) -> Vec<RunId> {
        let live = self.inner.lock_live();
        let hibernating = self.inner.lock_hibernating();
        live.keys().chain(hibernating.keys()).copied().collect()
    }

    fn drives_any(&self) -> bool {
        !self.inner.lock_live().is_empty() || !self.inner.lock_hibernating().is_empty()
    }

    /// Wakes the hibernating runs whose timers are due.
    async fn wake_due(&self) {
        let now = self.now();
        let due: Vec<RunId> = {
            let mut wakeups = self.inner.lock_wakeups();
            let mut due = Vec::new();
            while let Some(&(at, run)) = wakeups.first() {
                if at > now {
                    break;
                }
                wakeups.pop_first();
                due.push(run);
            }
            due
        };
        for run in due {
            if let Err(error) = self.wake(run).await {
                tracing::error!(run = %run, error = %error, "cannot wake a hibernating run");
            }
        }
    }

    /// Tells the runs this engine drives that their inboxes hold new messages.
    async fn deliver_inbox(&self) {
        let seen = self.inner.inbox_seen.load(Ordering::Relaxed);
        let (runs, last) = match self.inner.store.pending_inbox(seen).await {
            Ok(pending) => pending,
            Err(error) => {
                tracing::warn!(error = %error, "cannot look at the inboxes");
                return;
            }
        };
        self.inner.inbox_seen.store(last, Ordering::Relaxed);
        for run in runs.into_iter().filter(|run| self.drives(*run)) {
            if let Err(error) = self.send(run, || Box::new(Msg::Inbox)).await {
                tracing::warn!(run = %run, error = %error, "cannot deliver inbox messages");
            }
        }
    }

    /// Renews this engine's leases with its worker row (`Store::heartbeat`); runs it no
    /// longer holds are dropped. Runs it holds but
    /// does not drive (a driver stopped by a store failure, a claim whose answer was lost
    /// with its connection) are taken up again when two renewals in a row find them so: a
    /// run just created or claimed is launched a moment after its lease is written.
    async fn renew(&self, idle_owned: &mut Vec<RunId>) {
        // Only runs driven before the renewal was asked for can have been lost by it: a run
        // created or claimed while the renewal ran is missing from its answer but held.
        let driven_before: HashSet<RunId> = self.driven().into_iter().collect();
        let sent = self.inner.lease.now_ms();
        let held = match self.inner.store.heartbeat(self.heartbeat()).await {
            Ok(held) => {
                self.inner.lease.renewed(sent);
                held
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot renew leases; retrying");
                return;
            }
        };
        let lost: Vec<RunId> = self
            .driven()
            .into_iter()
            .filter(|run| driven_before.contains(run) && !held.contains(run))
            .collect();
        // A damaged run stays held, not driven, and is not taken up again.
        let idle: Vec<RunId> = held
            .iter()
            .filter(|run| !self.drives(**run) && !self.is_damaged(**run))
            .copied()
            .collect();
        let before = std::mem::replace(idle_owned, idle);
        for run in idle_owned.iter().filter(|run| before.contains(run)) {
            match self.take_up(*run).await {
                Ok(true) => {
                    tracing::info!(run = %run, "took up a run this engine owned but no longer drove")
                }
                Ok(false) => {
                    if let Err(error) = self
                        .inner
                        .store
                        .release(&self.inner.owner, Some(&[*run]))
                        .await
                    {
                        tracing::warn!(run = %run, error = %error, "cannot release a run this engine cannot drive");
                    }
                }
                // Held, not driven (see `set_damaged`).
                Err(RunError::Store(error)) if is_damage(&error) => {
                    self.set_damaged(*run, error).await;
                }
                Err(error) => {
                    tracing::warn!(run = %run, error = %error, "cannot take up a run this engine owns")
                }
            }
        }
        for run in lost {
            tracing::warn!(run = %run, "lost the lease of a run; another engine drives it now");
            if let Some(entry) = self.inner.lock_live().remove(&run) {
                if let Some(abort) = entry.abort {
                    abort.abort();
                }
            }
            self.inner.lock_hibernating().remove(&run);
            self.forget(run);
        }
    }

    /// Claims runs whose owners' leases lapsed and drives them.
    async fn take_over(&self) {
        let names = self.inner.registry.names();
        if names.is_empty() || !self.is_worker() {
            return;
        }
        let _one_claimer = self.inner.claiming.lock().await;
        let sent = self.inner.lease.now_ms();
        let leases = self
            .inner
            .store
            .claim(Claim {
                claimant: self.claimant(),
                workflows: &names,
                run: None,
                reclaim_own: false,
                limit: Some(64),
                // Queued runs are the admission point's.
                claimable: Claimable::Begun,
                versions: None,
            })
            .await;
        match leases {
            Ok(leases) => {
                for lease in leases {
                    self.inner.lease.claimed(lease.run, sent);
                    metrics::counter!("workflow_lease_takeovers_total").increment(1);
                    tracing::info!(run = %lease.run, "taking over a run whose owner stopped");
                    if let Err(error) = self.resume_claimed(lease.run, lease.token).await {
                        tracing::error!(run = %lease.run, error = %error, "cannot take over the run");
                    }
                }
            }
            Err(error) => tracing::warn!(error = %error, "cannot look for runs to take over"),
        }
    }
}

/// Resolves when the store signals a write from another process; never without a signal.
async fn store_signal(signal: &mut Option<tokio::sync::watch::Receiver<u64>>) -> Result<(), ()> {
    match signal {
        Some(receiver) => receiver.changed().await.map_err(drop),
        None => std::future::pending().await,
    }
}

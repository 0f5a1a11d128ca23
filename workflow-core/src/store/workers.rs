//! Worker rows and run watches: who keeps leases in the store, and a subscription to one
//! run's commits.
//!
//! An engine that keeps leases (a store several engine processes share,
//! [`Store::multi_worker`](super::Store::multi_worker)) records itself with every lease
//! renewal it sends ([`Store::heartbeat`](super::Store::heartbeat)): its name, when it
//! started, when it last renewed and until when its leases hold, and since when it drains.
//! The renewal and the row are one write. An engine that stops releases its runs
//! ([`Store::release`](super::Store::release) of all of them), which marks its row
//! stopped in the same write; one that crashed simply stops renewing, and its row shows a
//! lease that lapsed. Worker rows are operational state like the leases of runs: they
//! carry no checksum, and rows not renewed for [`WORKER_KEPT_MS`] are deleted by the next
//! heartbeat of any engine.

use std::time::Duration;

use tokio::sync::watch;

use super::Claimant;
use crate::journal::Timestamp;

/// How long a worker row stays after its last renewal (a day), in ms.
pub const WORKER_KEPT_MS: u64 = 24 * 60 * 60 * 1000;

/// An engine's lease renewal with what it says of itself: see
/// [`Store::heartbeat`](super::Store::heartbeat).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat<'a> {
    /// Who renews, for how long, as of when.
    pub claimant: Claimant<'a>,
    /// When the engine started, by its clock.
    pub started: Timestamp,
    /// Since when it drains ([`Engine::drain`](crate::Engine::drain)), by its clock.
    pub draining: Option<Timestamp>,
}

/// One engine that keeps leases, as it last recorded itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRow {
    /// Its name: the owner its runs carry.
    pub name: String,
    /// When it started, by its clock.
    pub started_at: Timestamp,
    /// When it last renewed its leases, by the store's clock.
    pub renewed_at: Timestamp,
    /// Until when its leases hold without another renewal, by the store's clock: past
    /// it, the worker's lease lapsed and other workers take its runs over.
    pub lease_until: Timestamp,
    /// Since when it drains, by its clock.
    pub draining_since: Option<Timestamp>,
    /// Whether it stopped and released its runs.
    pub stopped: bool,
}

impl WorkerRow {
    /// Whether its lease lapsed at `now` (the store's clock) without it having stopped.
    pub fn lapsed(&self, now: Timestamp) -> bool {
        !self.stopped && self.lease_until < now
    }
}

/// How often the default [`RunWatch`] looks again.
pub const WATCH_POLL: Duration = Duration::from_millis(250);

/// A subscription to one run's commits ([`Store::watch`](super::Store::watch)):
/// [`RunWatch::changed`] resolves when the run may have changed, after which the
/// watcher reads it again. It may resolve with nothing new (a poll, or a subscription to
/// renew: [`RunWatch::needs_renewal`]).
#[derive(Debug)]
pub struct RunWatch {
    /// Bumped by the store after a commit to the run; `None`: poll.
    signal: Option<watch::Receiver<u64>>,
    /// The longest wait of one `changed`.
    every: Duration,
    /// When the store's subscription must be made again, if ever.
    renew_at: Option<tokio::time::Instant>,
}

impl RunWatch {
    /// A watch that looks again every `every`: what stores without a commit signal give.
    pub fn polling(every: Duration) -> Self {
        RunWatch {
            signal: None,
            every,
            renew_at: None,
        }
    }

    /// A watch told of commits by `signal` (bumped after each), whose store subscription
    /// holds for `holds`: it asks to be renewed ([`RunWatch::needs_renewal`]) after half
    /// of it, and `changed` resolves by then at the latest.
    pub fn signalled(signal: watch::Receiver<u64>, holds: Duration) -> Self {
        let every = holds / 2;
        RunWatch {
            signal: Some(signal),
            every,
            renew_at: Some(tokio::time::Instant::now() + every),
        }
    }

    /// Resolves when the run may have changed since the last call.
    pub async fn changed(&mut self) {
        let wait = match self.renew_at {
            Some(at) => at.saturating_duration_since(tokio::time::Instant::now()),
            None => self.every,
        };
        match &mut self.signal {
            Some(signal) => {
                tokio::select! {
                    changed = signal.changed() => {
                        if changed.is_err() {
                            // The store's signal is gone: poll from now on.
                            self.signal = None;
                            self.every = WATCH_POLL;
                            self.renew_at = None;
                        }
                    }
                    () = tokio::time::sleep(wait) => {}
                }
            }
            None => tokio::time::sleep(wait).await,
        }
    }

    /// Whether the store's subscription lapses soon: ask [`Store::watch`] again.
    ///
    /// [`Store::watch`]: super::Store::watch
    pub fn needs_renewal(&self) -> bool {
        self.renew_at
            .is_some_and(|at| tokio::time::Instant::now() >= at)
    }
}

/// Whether a heartbeat at `now` (the store's clock) keeps `row`: renewed within
/// [`WORKER_KEPT_MS`].
pub(crate) fn kept(row: &WorkerRow, now: Timestamp) -> bool {
    row.renewed_at.saturating_add(WORKER_KEPT_MS) >= now
}

//! Self-fencing: a worker that cannot be sure it still holds a run's lease stops running
//! that run's user code before another worker can have taken the run over.
//!
//! The store's fencing token guards the journal: a worker whose lease lapsed cannot write.
//! It cannot guard what user code does to the outside world, so the engine keeps its own
//! view of each lease on its monotonic clock (from when the claim or the last successful
//! renewal was *sent*, so the view never outlasts the lease the store granted) and trips a
//! margin before that view expires:
//!
//! - a step future (attempt or compensation) is never polled again once its run's lease
//!   has less than the margin left ([`SelfFenced`]); the run's driver then stops, commits
//!   nothing more, and the run is taken up again if a later renewal shows it is still held;
//! - nothing is committed, so no attempt starts, with less than the margin left.
//!
//! What no engine can stop without help from the service it calls: a request already on
//! its way when the worker froze. `StepContext::fence` (a number that only grows for a
//! run) lets the service refuse such a late caller.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use super::lock;
use crate::error::RunId;

/// An engine's view of its leases, on its monotonic clock.
#[derive(Debug)]
pub(super) struct LeaseWatch {
    epoch: Instant,
    /// The lease in ms; 0 when the store has no leases (one engine drives it).
    lease_ms: u64,
    /// How much of the lease must be left for user code to run.
    margin_ms: u64,
    /// When the last successful renewal was sent, in ms since `epoch`.
    renewed: AtomicU64,
    /// When each run's claim (or create) was sent, in ms since `epoch`.
    claimed: Mutex<HashMap<RunId, u64>>,
    /// The most the clocks of the store, the engines, operators and the services steps
    /// call may differ by, in ms (0 in stores without leases).
    skew_ms: u64,
}

impl LeaseWatch {
    pub(super) fn new(lease_ms: u64, margin: Duration) -> Self {
        let margin_ms = u64::try_from(margin.as_millis()).unwrap_or(u64::MAX);
        LeaseWatch {
            epoch: Instant::now(),
            lease_ms,
            margin_ms: if lease_ms == 0 {
                0
            } else {
                margin_ms.min(lease_ms / 2)
            },
            renewed: AtomicU64::new(0),
            claimed: Mutex::new(HashMap::new()),
            skew_ms: 0,
        }
    }

    /// The watch with a clock-skew bound (ignored in stores without leases).
    pub(super) fn with_skew(mut self, skew: Duration) -> Self {
        if self.lease_ms > 0 {
            self.skew_ms = u64::try_from(skew.as_millis()).unwrap_or(u64::MAX);
        }
        self
    }

    /// How long after an interrupted external effect is found (by the engine that took
    /// its run over) an operator's retry is safe: the self-fencing margin, plus twice the
    /// clock-skew bound. The effect's lease ended by the takeover (on the store's clock),
    /// so every request of that attempt carried a `valid_until` no later; a service
    /// refuses what it decides after that by its own clock, which may be behind the store's
    /// by the skew, and the operator's clock may be ahead of the finder's by as much.
    pub(super) fn retry_wait_ms(&self) -> u64 {
        self.margin_ms
            .saturating_add(self.skew_ms.saturating_mul(2))
    }

    /// Now, in ms since the watch was made.
    pub(super) fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The margin in ms (0 in stores without leases).
    pub(super) fn margin_ms(&self) -> u64 {
        self.margin_ms
    }

    /// A renewal sent at `sent` (ms) succeeded.
    pub(super) fn renewed(&self, sent: u64) {
        self.renewed.fetch_max(sent, Ordering::Relaxed);
    }

    /// `run` was claimed (or created owned) by a request sent at `sent` (ms).
    pub(super) fn claimed(&self, run: RunId, sent: u64) {
        let mut claimed = lock(&self.claimed);
        let at = claimed.entry(run).or_insert(sent);
        *at = (*at).max(sent);
    }

    /// Whether the engine holds `run` (claimed or created it, and has not let it go).
    pub(super) fn holds(&self, run: RunId) -> bool {
        lock(&self.claimed).contains_key(&run)
    }

    /// The engine no longer holds `run`.
    pub(super) fn forget(&self, run: RunId) {
        lock(&self.claimed).remove(&run);
    }

    /// When (ms) `run`'s user code must stop: `None` in stores without leases.
    fn trips_at(&self, run: RunId) -> Option<u64> {
        if self.lease_ms == 0 {
            return None;
        }
        let claimed = lock(&self.claimed).get(&run).copied().unwrap_or(0);
        let held_from = claimed.max(self.renewed.load(Ordering::Relaxed));
        Some((held_from + self.lease_ms).saturating_sub(self.margin_ms))
    }

    /// How long `run`'s lease holds from now by this engine's view (ms; negative once it
    /// lapsed): `None` in stores without leases. The view counts from when the claim or
    /// the last successful renewal was sent, so the store's lease ends no earlier.
    pub(super) fn left_ms(&self, run: RunId) -> Option<i64> {
        let trips = self.trips_at(run)?;
        let ends = trips.saturating_add(self.margin_ms);
        Some(
            i64::try_from(ends).unwrap_or(i64::MAX)
                - i64::try_from(self.now_ms()).unwrap_or(i64::MAX),
        )
    }

    /// Whether `run`'s lease has less than the margin left: its user code must not run.
    pub(super) fn tripped(&self, run: RunId) -> bool {
        self.trips_at(run).is_some_and(|at| self.now_ms() >= at)
    }
}

impl super::Engine {
    /// When `run`'s lease ends, on the store's clock, read live by a step's context: the
    /// engine's wall clock plus the store's offset plus what is left of the lease by the
    /// engine's monotonic view.
    pub(super) fn valid_until(&self, run: RunId) -> crate::context::ValidUntil {
        if self.inner.lease_ms == 0 {
            return crate::context::ValidUntil::none();
        }
        // The lease view, the store and the clock, not the engine: a context kept by user
        // code keeps no engine alive.
        let lease = Arc::clone(&self.inner.lease);
        let store = Arc::clone(&self.inner.store);
        let clock = Arc::clone(&self.inner.clock);
        let now = move || {
            let left = lease.left_ms(run)?;
            let offset = store.clock_offset_ms();
            let now = i64::try_from(clock.now()).unwrap_or(i64::MAX);
            u64::try_from(now.saturating_add(offset).saturating_add(left)).ok()
        };
        // Once this engine no longer holds the run, the value stops moving: a request sent
        // after that (by a task the step spawned) carries the lease end last known.
        let last = AtomicU64::new(now().unwrap_or(0));
        let held = Arc::clone(&self.inner.lease);
        crate::context::ValidUntil::live(move || {
            if held.holds(run) {
                if let Some(until) = now() {
                    last.fetch_max(until, Ordering::Relaxed);
                }
            }
            Some(last.load(Ordering::Relaxed))
        })
    }
}

/// A step future that is polled only while its run's lease has at least the margin left;
/// once it has not, the future is dropped unpolled and [`SelfFenced::Tripped`] reported.
/// It also wakes itself at the trip, so a future waiting on something that never answers
/// is stopped on time.
pub(super) struct Guarded<F> {
    watch: Option<Arc<LeaseWatch>>,
    run: RunId,
    inner: Pin<Box<F>>,
    alarm: Option<(u64, Pin<Box<tokio::time::Sleep>>)>,
}

/// What a guarded future gives: the inner output, or the news that it was stopped.
pub(super) enum SelfFenced<T> {
    Ran(T),
    Tripped,
}

impl<F> Guarded<F> {
    /// Guards `inner` with `watch` (no guard when `None`: stores without leases).
    pub(super) fn new(watch: Option<Arc<LeaseWatch>>, run: RunId, inner: F) -> Self {
        Guarded {
            watch,
            run,
            inner: Box::pin(inner),
            alarm: None,
        }
    }
}

impl<F: Future> Future for Guarded<F> {
    type Output = SelfFenced<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(watch) = self.watch.clone() else {
            return self.inner.as_mut().poll(cx).map(SelfFenced::Ran);
        };
        if watch.tripped(self.run) {
            return Poll::Ready(SelfFenced::Tripped);
        }
        if let Poll::Ready(output) = self.inner.as_mut().poll(cx) {
            return Poll::Ready(SelfFenced::Ran(output));
        }
        let Some(at) = watch.trips_at(self.run) else {
            return Poll::Pending;
        };
        let deadline = watch.epoch + Duration::from_millis(at);
        match &mut self.alarm {
            Some((set, sleep)) if *set == at => {
                let _ = sleep.as_mut().poll(cx);
            }
            alarm => {
                let mut sleep = Box::pin(tokio::time::sleep_until(deadline));
                let _ = sleep.as_mut().poll(cx);
                *alarm = Some((at, sleep));
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn trips_a_margin_before_the_lease_ends_and_renewals_push_it_back() {
        let watch = Arc::new(LeaseWatch::new(3_000, Duration::from_millis(1_000)));
        let run = RunId(1);
        watch.claimed(run, watch.now_ms());
        assert!(!watch.tripped(run));
        tokio::time::advance(Duration::from_millis(1_999)).await;
        assert!(!watch.tripped(run), "1 ms more than the margin is left");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(watch.tripped(run), "only the margin is left");
        // A renewal sent now holds the run for another lease.
        watch.renewed(watch.now_ms());
        assert!(!watch.tripped(run));
        tokio::time::advance(Duration::from_millis(2_000)).await;
        assert!(watch.tripped(run));
    }

    #[tokio::test(start_paused = true)]
    async fn the_lease_left_counts_from_the_last_claim_or_renewal_sent() {
        let watch = LeaseWatch::new(3_000, Duration::from_millis(1_000));
        let run = RunId(2);
        assert_eq!(LeaseWatch::new(0, Duration::ZERO).left_ms(run), None);
        watch.claimed(run, watch.now_ms());
        assert_eq!(watch.left_ms(run), Some(3_000));
        tokio::time::advance(Duration::from_millis(1_200)).await;
        assert_eq!(watch.left_ms(run), Some(1_800));
        // A renewal sent now: the lease holds a whole lease from when it was sent.
        let sent = watch.now_ms();
        tokio::time::advance(Duration::from_millis(300)).await;
        watch.renewed(sent);
        assert_eq!(watch.left_ms(run), Some(2_700));
        tokio::time::advance(Duration::from_millis(4_000)).await;
        assert_eq!(watch.left_ms(run), Some(-1_300), "lapsed");
    }

    #[tokio::test(start_paused = true)]
    async fn stores_without_leases_never_trip() {
        let watch = LeaseWatch::new(0, Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(!watch.tripped(RunId(1)));
        assert_eq!(watch.margin_ms(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_guarded_future_is_not_polled_after_the_trip() {
        let watch = Arc::new(LeaseWatch::new(3_000, Duration::from_millis(1_000)));
        let run = RunId(7);
        watch.claimed(run, watch.now_ms());
        let applied = Arc::new(AtomicU64::new(0));
        let effect = {
            let applied = Arc::clone(&applied);
            async move {
                // Frozen inside the effect past the lease.
                tokio::time::sleep(Duration::from_secs(10)).await;
                applied.fetch_add(1, Ordering::SeqCst);
            }
        };
        let outcome = Guarded::new(Some(Arc::clone(&watch)), run, effect).await;
        assert!(matches!(outcome, SelfFenced::Tripped));
        assert_eq!(applied.load(Ordering::SeqCst), 0, "the effect never ran");
    }

    #[tokio::test(start_paused = true)]
    async fn a_future_that_never_answers_is_stopped_at_the_trip() {
        let watch = Arc::new(LeaseWatch::new(3_000, Duration::from_millis(1_000)));
        let run = RunId(8);
        watch.claimed(run, watch.now_ms());
        let started = Instant::now();
        let outcome =
            Guarded::new(Some(Arc::clone(&watch)), run, std::future::pending::<()>()).await;
        assert!(matches!(outcome, SelfFenced::Tripped));
        assert_eq!(started.elapsed(), Duration::from_millis(2_000));
    }
}

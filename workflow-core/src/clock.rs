//! Time, injected: the engine reads the wall clock only through a [`Clock`], so tests run
//! 48-hour timeouts in milliseconds under tokio's paused time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::journal::Timestamp;

/// A source of absolute time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// The default clock: the wall clock at creation, advanced by tokio's monotonic clock.
/// Under `#[tokio::test(start_paused = true)]` it moves only when tokio's time does.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: Timestamp,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock starting at the current wall-clock time.
    pub fn new() -> Self {
        let base = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Self::starting_at(base)
    }

    /// A clock starting at a fixed time: a frozen, reproducible start for tests.
    pub fn starting_at(base: Timestamp) -> Self {
        TokioClock {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        self.base + self.start.elapsed().as_millis() as u64
    }
}

/// How long from `now` until `at` (zero when it has passed).
pub(crate) fn until(now: Timestamp, at: Timestamp) -> Duration {
    Duration::from_millis(at.saturating_sub(now))
}

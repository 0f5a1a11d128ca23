//! Time, injected: the engine reads the wall clock only through a [`Clock`], so tests run
//! 48-hour timeouts in milliseconds under tokio's paused time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch: absolute, so deadlines survive restarts.
pub type Timestamp = u64;

/// A timestamp in RFC 3339, in UTC, to the millisecond: `2025-03-04T05:06:07.089Z`.
pub fn rfc3339(at: Timestamp) -> String {
    let secs = at / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    // Howard Hinnant's `civil_from_days`.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let rest = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        at % 1000
    )
}

/// A source of absolute time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now.
    fn now(&self) -> Timestamp;

    /// The time at `instant` of tokio's clock, which the caller read just now: one read
    /// of the monotonic clock then serves as both. A clock that does not follow tokio's
    /// gives [`Clock::now`].
    fn at(&self, instant: tokio::time::Instant) -> Timestamp {
        let _ = instant;
        self.now()
    }
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

    fn at(&self, instant: tokio::time::Instant) -> Timestamp {
        self.base + instant.saturating_duration_since(self.start).as_millis() as u64
    }
}

/// How long from `now` until `at` (zero when it has passed).
pub(crate) fn until(now: Timestamp, at: Timestamp) -> Duration {
    Duration::from_millis(at.saturating_sub(now))
}

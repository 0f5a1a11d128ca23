//! The instants a cron pattern names in a zone.
//!
//! The pattern is matched against wall-clock (civil) times, and daylight-saving changes
//! follow cron's own convention (Vixie cron, cronie), which tells two kinds of pattern
//! apart by their minute and hour fields:
//! - a **wildcard** pattern, whose minute or hour field starts with `*` (`0 * * * *`,
//!   `*/15 * * * *`, `30 */2 * * *`, `@hourly`), fires at every instant whose wall-clock
//!   time it names: through an autumn fold the repeated times fire twice, once in each
//!   offset, and the times a spring gap skips do not exist, so they do not fire. An hourly
//!   pattern fires once each real hour through both changes.
//! - a **fixed-time** pattern (every other one: `30 2 * * *`, `0 9 * * MON-FRI`,
//!   `0 1-23 * * *`) fires once per wall-clock time it names: a time that happens twice
//!   fires at the first of its two instants; one that does not happen fires at the end of
//!   the gap with `dst_gap: next_valid` (the first instant after it, 02:30 -> 03:00, as
//!   cronie runs the jobs of the skipped minutes when the clock jumps), or not at all with
//!   `dst_gap: skip`.
//!
//! Several civil times may land on one instant (every minute of a gap with `next_valid`, and
//! the wall-clock time right after it): they are one tick. `dst_gap` does not apply to a
//! wildcard pattern, which has nothing to make up for.

use std::time::Duration;

use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp as Instant;
use workflow_spec::schedule::{parse_cron, parse_zone, CronPattern};

use super::{DstGap, Schedule, ScheduleError, Timestamp};

/// A schedule whose pattern and zone are parsed, ready to compute ticks.
#[derive(Clone, Debug)]
pub struct CompiledSchedule {
    schedule: Schedule,
    cron: CronPattern,
    zone: TimeZone,
    wildcard: bool,
}

impl CompiledSchedule {
    /// Checks and compiles a schedule.
    pub fn new(schedule: Schedule) -> Result<CompiledSchedule, ScheduleError> {
        schedule.validate()?;
        let cron = parse_cron(&schedule.cron)?;
        let zone = parse_zone(&schedule.tz)?;
        let wildcard = is_wildcard(&schedule.cron);
        Ok(CompiledSchedule {
            schedule,
            cron,
            zone,
            wildcard,
        })
    }

    /// Whether the pattern is a wildcard one (its minute or hour field starts with `*`),
    /// which fires at every real instant it names through daylight-saving changes, rather
    /// than once per wall-clock time.
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    /// The schedule it was compiled from.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The first tick strictly after `after`, if the pattern names one (within croner's
    /// search limit of several years).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let after_instant = instant(after)?;
        if self.wildcard {
            return millis(self.next_real(after_instant)?);
        }
        let mut civil = self.zone.to_datetime(after_instant);
        // Civil times before `after`'s own can land after it only inside a fold, which the
        // first-instant rule maps before it; so the search starts at `after`'s civil time.
        let mut candidate = self.cron.next_from(civil)?;
        // Bounded: a fold repeats at most a few hours of civil time, and a per-second pattern
        // names at most 3,600 civil times an hour.
        for _ in 0..100_000 {
            if let Some(at) = self.place(candidate) {
                if at > after {
                    return Some(at);
                }
            }
            civil = candidate;
            candidate = self.cron.next_after(civil)?;
        }
        None
    }

    /// The ticks in `(after, until]`, oldest first, at most `limit` of them.
    pub fn between(&self, after: Timestamp, until: Timestamp, limit: usize) -> Vec<Timestamp> {
        let mut ticks = Vec::new();
        let mut cursor = after;
        while ticks.len() < limit {
            match self.next_after(cursor) {
                Some(at) if at <= until => {
                    ticks.push(at);
                    cursor = at;
                }
                _ => break,
            }
        }
        ticks
    }

    /// The next `count` ticks after `after`.
    pub fn upcoming(&self, after: Timestamp, count: usize) -> Vec<Timestamp> {
        self.between(after, Timestamp::MAX, count)
    }

    /// A tick's time as a wall-clock time in the schedule's zone, with its offset:
    /// `2026-03-29T03:00:00+02:00[Europe/Berlin]`.
    pub fn local(&self, at: Timestamp) -> String {
        match instant(at) {
            Some(instant) => instant.to_zoned(self.zone.clone()).to_string(),
            None => at.to_string(),
        }
    }

    /// A wildcard pattern's next tick: the first instant after `after` whose wall-clock
    /// time the pattern names. The timeline is walked one offset at a time: between two
    /// transitions wall-clock time moves with the instant, so the first match in a stretch
    /// is its first tick; a stretch without one hands over to the next at its transition.
    fn next_real(&self, after: Instant) -> Option<Instant> {
        let mut from = after;
        let mut inclusive = false;
        // Bounded: each turn crosses one transition, and zones have a few a year.
        for _ in 0..10_000 {
            let offset = self.zone.to_offset(from);
            let civil = offset.to_datetime(from);
            let candidate = if inclusive {
                self.cron.next_from(civil)?
            } else {
                self.cron.next_after(civil)?
            };
            let at = offset.to_timestamp(candidate).ok()?;
            match self.zone.following(from).next() {
                Some(transition) if at >= transition.timestamp() => {
                    // The offset changes before the match: read the wall clock again from
                    // the transition on (its own instant included).
                    from = transition.timestamp();
                    inclusive = true;
                }
                _ => return Some(at),
            }
        }
        None
    }

    /// Places a matching civil time of a fixed-time pattern on the timeline by the DST
    /// rules.
    fn place(&self, civil: jiff::civil::DateTime) -> Option<Timestamp> {
        let ambiguous = self.zone.to_ambiguous_timestamp(civil);
        let instant = match ambiguous.offset() {
            AmbiguousOffset::Unambiguous { .. } | AmbiguousOffset::Fold { .. } => {
                // A fold fires once, at the first of its two instants.
                ambiguous.earlier().ok()?
            }
            AmbiguousOffset::Gap { after, .. } => match self.schedule.dst_gap {
                DstGap::Skip => return None,
                // The gap ends at the transition: the first one after `civil` read with the
                // later offset (an instant inside or just before the jump).
                DstGap::NextValid => {
                    let probe = after.to_timestamp(civil).ok()?;
                    self.zone.following(probe).next()?.timestamp()
                }
            },
        };
        millis(instant)
    }
}

/// Whether `cron` is a wildcard pattern in cron's sense: its minute or hour field starts
/// with `*` (Vixie cron's and cronie's `MIN_STAR` and `HR_STAR`), or it is `@hourly`. With
/// six fields the first is the seconds, and the minute and hour are the next two.
fn is_wildcard(cron: &str) -> bool {
    let cron = cron.trim();
    if let Some(nickname) = cron.strip_prefix('@') {
        return nickname.eq_ignore_ascii_case("hourly");
    }
    let fields: Vec<&str> = cron.split_whitespace().collect();
    let (minute, hour) = match fields.len() {
        6 => (fields[1], fields[2]),
        _ => (
            fields.first().copied().unwrap_or(""),
            fields.get(1).copied().unwrap_or(""),
        ),
    };
    minute.starts_with('*') || hour.starts_with('*')
}

fn instant(at: Timestamp) -> Option<Instant> {
    Instant::from_millisecond(i64::try_from(at).ok()?).ok()
}

fn millis(instant: Instant) -> Option<Timestamp> {
    u64::try_from(instant.as_millisecond()).ok()
}

/// The jitter of `schedule`'s tick at `scheduled`: a delay in `[0, max]`, the same on every
/// worker and every run (a hash of the schedule id and the tick, not a random draw), so
/// any worker computes the same fire time.
pub fn jitter(schedule: &str, scheduled: Timestamp, max: Option<Duration>) -> Duration {
    let Some(max) = max else {
        return Duration::ZERO;
    };
    let max_ms = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    if max_ms == 0 {
        return Duration::ZERO;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in schedule.bytes().chain(scheduled.to_le_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // Mix the low bits, which FNV leaves weak for short inputs.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    Duration::from_millis(hash % (max_ms.saturating_add(1)))
}

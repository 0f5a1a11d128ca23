//! Schedules, decided purely: which instants a cron pattern names in its zone (through
//! daylight-saving gaps and folds), which missed ticks run after downtime and which are
//! recorded as missed, how far each tick's start is jittered, and what a tick does while an
//! earlier run is still going.
//!
//! No I/O and no clock here: every function takes the times it needs and returns what to
//! do, and the rows a store keeps ([`ScheduleRow`] and its changes) are plain data. The
//! engine and the stores carry out what these functions decide; the operations on a
//! store's schedule rows that the engine and tools share are
//! [`admin::schedules`](crate::admin::schedules).
//!
//! Times are milliseconds since the Unix epoch ([`Timestamp`]), as everywhere in the engine.

mod catchup;
mod due;
mod overlap;
mod row;
mod ticks;

use serde::{Deserialize, Serialize};

pub use self::catchup::{catch_up, fire_time, CatchUp, ON_TIME};
pub use self::due::{next_fire, next_fire_compiled, next_fire_pending, PENDING_GRACE};
pub use self::overlap::{decide_overlap, OverlapDecision};
pub use self::row::{
    Decider, DueBatch, DueDecision, DueRow, DueSchedules, MissedTicks, ScheduleChange, ScheduleRow,
    ScheduleState, ScheduleUpdate,
};
pub use self::ticks::{jitter, CompiledSchedule};
pub use crate::journal::Timestamp;
pub use workflow_spec::schedule::{Catchup, DstGap, Overlap, Schedule, ScheduleError};

/// What a scheduled run is given: which schedule started it, for which scheduled time, and
/// when it was actually fired. A scheduled workflow takes no inputs or exactly this one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Tick {
    /// The schedule's id (a registered workflow's schedule is named after the workflow).
    pub schedule: String,
    /// The instant the cron pattern named (after the DST policy), in ms since the epoch.
    pub scheduled: Timestamp,
    /// The instant the run was started for it (after jitter and any lag), in ms.
    pub fired: Timestamp,
}

impl Tick {
    /// The start idempotency key of this tick's run: `schedule:<id>@<scheduled ms>`. Every
    /// worker computes the same key, so each tick starts one run on any store.
    pub fn idempotency_key(&self) -> String {
        tick_key(&self.schedule, self.scheduled)
    }

    /// How late the tick fired (`fired - scheduled`), in ms.
    pub fn lag_ms(&self) -> u64 {
        self.fired.saturating_sub(self.scheduled)
    }
}

/// The start idempotency key of the run for `schedule`'s tick at `scheduled`.
pub fn tick_key(schedule: &str, scheduled: Timestamp) -> String {
    format!("schedule:{schedule}@{scheduled}")
}

/// The schedule and scheduled time a tick key names (`schedule:<id>@<ms>`), if it is one.
pub fn parse_tick_key(key: &str) -> Option<(&str, Timestamp)> {
    let (schedule, scheduled) = key.strip_prefix("schedule:")?.rsplit_once('@')?;
    if schedule.is_empty() {
        return None;
    }
    Some((schedule, scheduled.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tick_key_reads_back_and_other_keys_are_not_ticks() {
        let key = tick_key("tenant@42", 1_767_571_200_000);
        assert_eq!(parse_tick_key(&key), Some(("tenant@42", 1_767_571_200_000)));
        for other in [
            "api Job k",
            "schedule:@5",
            "schedule:x@",
            "schedule:x@soon",
            "x@5",
        ] {
            assert_eq!(parse_tick_key(other), None, "{other}");
        }
    }
}

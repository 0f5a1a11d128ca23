//! When a schedule row is next due: the instant a store indexes it by, so a scheduler's
//! pass reads only the rows due by now instead of every row.
//!
//! The time is a function of the row (its definition, paused flag and state): a store
//! computes it on every write of the row with [`next_fire`]; the scheduler, which has the
//! compiled pattern at hand, computes it with [`next_fire_compiled`] and hands it over
//! with the write.

use std::time::Duration;

use super::row::ScheduleRow;
use super::{fire_time, CompiledSchedule, Timestamp};

/// How long ticks a scheduler decided to run may stay pending (their runs being started)
/// before another worker looks at the row: the longest a worker that stopped right after
/// deciding delays them.
pub const PENDING_GRACE: Duration = Duration::from_secs(30);

/// When `row` is next due, or `None` when it never is (paused, or its definition is not
/// valid): ticks waiting to start (pending, cancels, a buffered tick) are due at once,
/// otherwise the fire time (with jitter) of the first tick after its state's `after`.
pub fn next_fire(row: &ScheduleRow) -> Option<Timestamp> {
    let compiled = CompiledSchedule::new(row.schedule.clone()).ok()?;
    next_fire_compiled(row, &compiled)
}

/// [`next_fire`] with the row's schedule compiled already.
pub fn next_fire_compiled(row: &ScheduleRow, compiled: &CompiledSchedule) -> Option<Timestamp> {
    if row.paused {
        return None;
    }
    let state = &row.state;
    if !state.pending.is_empty() || !state.cancel.is_empty() || state.buffered.is_some() {
        return Some(0);
    }
    compiled
        .next_after(state.after)
        .map(|tick| fire_time(&row.id, tick, row.schedule.jitter))
}

/// The next fire time of a row whose pending ticks a scheduler decided at `now` and is
/// starting: not before [`PENDING_GRACE`] (another worker carries them out only if this
/// one stopped), unless its next regular tick comes sooner.
pub fn next_fire_pending(
    row: &ScheduleRow,
    compiled: &CompiledSchedule,
    now: Timestamp,
) -> Option<Timestamp> {
    if row.paused {
        return None;
    }
    let grace = now.saturating_add(u64::try_from(PENDING_GRACE.as_millis()).unwrap_or(u64::MAX));
    let regular = compiled
        .next_after(row.state.after)
        .map(|tick| fire_time(&row.id, tick, row.schedule.jitter));
    Some(regular.map_or(grace, |at| at.min(grace)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::ScheduleState;
    use workflow_spec::Schedule;

    fn row(cron: &str, after: Timestamp) -> ScheduleRow {
        ScheduleRow {
            id: "s".to_owned(),
            workflow: "W".to_owned(),
            schedule: Schedule::new(cron),
            paused: false,
            state: ScheduleState {
                after,
                ..ScheduleState::default()
            },
            version: 1,
            created_at: after,
        }
    }

    #[test]
    fn a_row_is_due_at_its_next_tick_at_once_with_work_waiting_and_never_paused() {
        let minute = 60_000;
        let mut r = row("* * * * *", 10 * minute + 5);
        assert_eq!(next_fire(&r), Some(11 * minute));
        r.state.pending.push(11 * minute);
        assert_eq!(next_fire(&r), Some(0), "pending ticks are due at once");
        let compiled = CompiledSchedule::new(r.schedule.clone()).unwrap();
        assert_eq!(
            next_fire_pending(&r, &compiled, 10 * minute + 10),
            Some(10 * minute + 10 + 30_000),
            "pending ticks being started wait out the grace"
        );
        r.state.pending.clear();
        r.state.buffered = Some(11 * minute);
        assert_eq!(next_fire(&r), Some(0));
        r.paused = true;
        assert_eq!(next_fire(&r), None);
        let mut invalid = row("* * * * *", 0);
        invalid.schedule.cron = "not a cron".to_owned();
        assert_eq!(next_fire(&invalid), None);
    }
}

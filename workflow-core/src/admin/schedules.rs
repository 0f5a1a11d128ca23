//! Operations on the schedule rows of a store, for the engine's [`Schedules`] and for
//! tools that have the store but not the workflows' code (the CLI): list with next fire
//! times, pause, resume, delete, and asking for ticks to run (trigger, backfill).
//!
//! A tool cannot start a run itself; it leaves the ticks it asks for in the row's
//! `pending` list, and the next engine with the workflow registered starts each one under
//! its tick's key, exactly as it carries out the ticks its scheduler decided.
//!
//! [`Schedules`]: crate::Schedules

use crate::schedule::{CompiledSchedule, ScheduleError, Timestamp};
use crate::store::{ScheduleChange, ScheduleRow, Store, StoreError};

/// The most ticks one backfill asks for (or lists).
pub const MAX_BACKFILL: usize = 10_000;

/// What can go wrong with a schedule row.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RowError {
    /// No schedule has this id.
    #[error("no schedule `{0}`")]
    Unknown(String),
    /// The stored definition is not valid (written by another version, say).
    #[error("schedule `{id}` is not valid: {error}")]
    Invalid {
        /// The schedule.
        id: String,
        /// Why.
        error: ScheduleError,
    },
    /// A backfill range holds more ticks than one backfill asks for.
    #[error("the range holds more than {MAX_BACKFILL} ticks; backfill a shorter range")]
    TooManyTicks,
    /// The row kept changing under concurrent writers.
    #[error("schedule `{0}` is being changed by another process; try again")]
    Contended(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A schedule with its next fire times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The stored row: definition and state.
    pub row: ScheduleRow,
    /// The next ticks (scheduled times, ms); none while paused.
    pub next: Vec<Timestamp>,
    /// The same ticks as wall-clock times in the schedule's zone.
    pub next_local: Vec<String>,
}

/// Every schedule of `store`, with its next `count` fire times after `now`.
pub async fn list(
    store: &dyn Store,
    now: Timestamp,
    count: usize,
) -> Result<Vec<ScheduleInfo>, RowError> {
    let rows = store.schedules().await?;
    Ok(rows.into_iter().map(|row| info(row, now, count)).collect())
}

/// One schedule of `store`.
pub async fn get(store: &dyn Store, id: &str) -> Result<ScheduleRow, RowError> {
    store
        .schedules()
        .await?
        .into_iter()
        .find(|row| row.id == id)
        .ok_or_else(|| RowError::Unknown(id.to_owned()))
}

/// A row with its next `count` fire times after `now`.
pub fn info(row: ScheduleRow, now: Timestamp, count: usize) -> ScheduleInfo {
    let (next, next_local) = match CompiledSchedule::new(row.schedule.clone()) {
        Ok(compiled) if !row.paused => {
            let next = compiled.upcoming(row.state.after.max(now), count);
            let local = next.iter().map(|&at| compiled.local(at)).collect();
            (next, local)
        }
        _ => (Vec::new(), Vec::new()),
    };
    ScheduleInfo {
        row,
        next,
        next_local,
    }
}

/// Pauses a schedule: it fires nothing until resumed.
pub async fn pause(store: &dyn Store, id: &str) -> Result<(), RowError> {
    change(store, id, |_| ScheduleChange {
        state: None,
        paused: Some(true),
        missed: None,
    })
    .await
}

/// Resumes a schedule. Ticks that passed while it was paused are neither run nor counted
/// as missed: it goes on from `now`.
pub async fn resume(store: &dyn Store, id: &str, now: Timestamp) -> Result<(), RowError> {
    change(store, id, |row| {
        let mut state = row.state.clone();
        if row.paused {
            state.after = state.after.max(now);
        }
        ScheduleChange {
            state: Some(state),
            paused: Some(false),
            missed: None,
        }
    })
    .await
}

/// Deletes a schedule; the runs it started are kept.
pub async fn delete(store: &dyn Store, id: &str) -> Result<(), RowError> {
    if store.delete_schedule(id).await? {
        Ok(())
    } else {
        Err(RowError::Unknown(id.to_owned()))
    }
}

/// The ticks of `row` in `[from, to]`, at most [`MAX_BACKFILL`].
pub fn ticks_between(
    row: &ScheduleRow,
    from: Timestamp,
    to: Timestamp,
) -> Result<Vec<(Timestamp, String)>, RowError> {
    let compiled =
        CompiledSchedule::new(row.schedule.clone()).map_err(|error| RowError::Invalid {
            id: row.id.clone(),
            error,
        })?;
    let ticks = compiled.between(from.saturating_sub(1), to, MAX_BACKFILL + 1);
    if ticks.len() > MAX_BACKFILL {
        return Err(RowError::TooManyTicks);
    }
    Ok(ticks
        .into_iter()
        .map(|at| (at, compiled.local(at)))
        .collect())
}

/// Asks for `ticks` of schedule `id` to run: they join the row's pending ticks, and an
/// engine with the workflow registered starts each under its tick's key (so a tick that
/// ran already is not run again).
pub async fn request_ticks(
    store: &dyn Store,
    id: &str,
    ticks: &[Timestamp],
) -> Result<(), RowError> {
    change(store, id, |row| {
        let mut state = row.state.clone();
        for &tick in ticks {
            if !state.pending.contains(&tick) {
                state.pending.push(tick);
            }
        }
        ScheduleChange {
            state: Some(state),
            paused: None,
            missed: None,
        }
    })
    .await
}

/// Records that `run` was started for schedule `id`'s tick at `scheduled`, fired at
/// `fired`, outside the scheduler (a trigger): it becomes the schedule's last run unless a
/// newer tick's run is recorded already.
pub async fn note_run(
    store: &dyn Store,
    id: &str,
    run: crate::error::RunId,
    scheduled: Timestamp,
    fired: Timestamp,
) -> Result<(), RowError> {
    change(store, id, |row| {
        let mut state = row.state.clone();
        if state.last_tick.is_none_or(|last| last <= scheduled) {
            state.last_run = Some(run);
            state.last_tick = Some(scheduled);
            state.last_fired = Some(fired);
        }
        ScheduleChange {
            state: Some(state),
            paused: None,
            missed: None,
        }
    })
    .await
}

/// Reads an RFC 3339 instant (`2026-01-05T09:00:00Z`, `2026-01-05T10:00:00+01:00`) as ms
/// since the epoch; `None` if it is not one (or is before 1970).
pub fn parse_instant(text: &str) -> Option<Timestamp> {
    let at: jiff::Timestamp = text.trim().parse().ok()?;
    u64::try_from(at.as_millisecond()).ok()
}

/// Applies a change computed from the current row, again when another writer changed the
/// row in between.
async fn change(
    store: &dyn Store,
    id: &str,
    change: impl Fn(&ScheduleRow) -> ScheduleChange,
) -> Result<(), RowError> {
    for _ in 0..16 {
        let row = get(store, id).await?;
        if store.update_schedule(id, row.version, change(&row)).await? {
            return Ok(());
        }
    }
    Err(RowError::Contended(id.to_owned()))
}

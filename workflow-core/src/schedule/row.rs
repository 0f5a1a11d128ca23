//! Schedule rows: a schedule's definition (its workflow and `schedule: { ... }`) apart from
//! its state (the last tick decided, the runs it started, what it missed), so changing a
//! cron keeps what the schedule already did, and firing a tick never rewrites the
//! definition.

use serde::{Deserialize, Serialize};
use workflow_spec::Schedule;

use crate::error::RunId;
use crate::journal::Timestamp;

/// One schedule as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRow {
    /// The schedule's id: the workflow's journaled name for a schedule declared in a spec,
    /// any name for one created at run time.
    pub id: String,
    /// The journaled name of the workflow each tick starts.
    pub workflow: String,
    /// The definition: cron, zone and policies.
    pub schedule: Schedule,
    /// Whether it is paused: a paused schedule fires nothing, and ticks that pass while it
    /// is paused are not caught up when it resumes.
    pub paused: bool,
    /// What it has done so far.
    pub state: ScheduleState,
    /// Bumped by every change of the row: [`crate::store::Store::update_schedule`]
    /// compares it, so of several workers deciding the same ticks one wins.
    pub version: u64,
    /// When the row was created.
    pub created_at: Timestamp,
}

/// A schedule's runtime state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleState {
    /// Every tick at or before this instant has been decided (run, skipped or missed);
    /// the creation time for a new schedule.
    pub after: Timestamp,
    /// The run the newest started tick created.
    pub last_run: Option<RunId>,
    /// The scheduled time of that tick.
    pub last_tick: Option<Timestamp>,
    /// When that run was started.
    pub last_fired: Option<Timestamp>,
    /// Ticks recorded as missed (too old for the window, or left out by `catchup`).
    pub missed: u64,
    /// Ticks skipped because a run was in flight (`overlap: skip`, or a second buffered one).
    pub skipped: u64,
    /// The newest missed tick, if any was missed.
    pub last_missed: Option<Timestamp>,
    /// A tick waiting for the run in flight to finish (`overlap: buffer_one`).
    pub buffered: Option<Timestamp>,
    /// Runs this schedule started that were not yet seen finished.
    pub active: Vec<RunId>,
    /// Ticks decided to run whose runs are not recorded yet: a worker that stopped after
    /// deciding leaves them here, and the next one starts them (under their keys, so once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Timestamp>,
    /// Runs decided to be cancelled before the pending ticks start (`cancel_previous`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cancel: Vec<RunId>,
}

/// A change to a schedule row, applied only if its version is still the expected one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleChange {
    /// The new state, if it changes.
    pub state: Option<ScheduleState>,
    /// The new paused flag, if it changes.
    pub paused: Option<bool>,
    /// Ticks this change records as missed: written with the change, in the same
    /// transaction, so a decision that wins records them and one that loses records
    /// nothing.
    pub missed: Option<MissedTicks>,
}

/// A record of missed ticks: a run of consecutive ticks of one schedule that no run was
/// started for (older than the window when found, or left out by `catchup`), decided
/// together. Ranges of one schedule never overlap (its state moves past them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissedTicks {
    /// The oldest missed tick (scheduled time, ms).
    pub first: Timestamp,
    /// The newest missed tick (scheduled time, ms).
    pub last: Timestamp,
    /// How many ticks of the schedule lie in `[first, last]`, all missed.
    pub count: u64,
    /// When the decision that missed them was made.
    pub recorded_at: Timestamp,
}

/// Which due schedule rows [`crate::store::Store::decide_schedules`] takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueSchedules {
    /// Now, by the caller's clock: rows whose next fire time is at or before it are due.
    pub now: Timestamp,
    /// The workflows whose schedules the caller can start runs for.
    pub workflows: Vec<String>,
    /// The most rows one call takes.
    pub limit: usize,
}

/// What the decider makes of one due row.
#[derive(Clone, Debug, PartialEq, Eq)]
// One per row decided, handed straight to the store: boxing the change would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum DueDecision {
    /// Write this change (the version is bumped), with the row's new next fire time
    /// ([`crate::schedule::next_fire`] of the changed row, or later while its ticks are
    /// being started).
    Change {
        /// The change.
        change: ScheduleChange,
        /// The row's next fire time after it.
        next_fire: Option<Timestamp>,
    },
    /// Change nothing; the row is not due again before this instant.
    Later(Timestamp),
}

/// The decider of [`crate::store::Store::decide_schedules`]: called once per row taken,
/// inside the transaction that writes its answer. It must not block.
pub type Decider = std::sync::Arc<dyn Fn(&ScheduleRow) -> DueDecision + Send + Sync>;

/// A due row as [`crate::store::Store::decide_schedules`] left it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueRow {
    /// The row: as written when `decided`, as read otherwise.
    pub row: ScheduleRow,
    /// Whether the decider's change was written.
    pub decided: bool,
    /// The missed ticks recorded with the change.
    pub missed: Option<MissedTicks>,
}

/// The answer of [`crate::store::Store::decide_schedules`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DueBatch {
    /// The rows taken, in the order of their next fire times.
    pub rows: Vec<DueRow>,
    /// The earliest next fire time after `now` of the workflows' schedules that are not
    /// paused, after the batch's writes.
    pub next: Option<Timestamp>,
}

/// One compare-and-set of a batch ([`crate::store::Store::update_schedules`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleUpdate {
    /// The schedule.
    pub id: String,
    /// The version the change expects.
    pub version: u64,
    /// The change.
    pub change: ScheduleChange,
    /// The row's next fire time after the change ([`crate::schedule::next_fire`]).
    pub next_fire: Option<Timestamp>,
}

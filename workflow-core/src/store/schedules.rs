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

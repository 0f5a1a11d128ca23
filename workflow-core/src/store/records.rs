//! A run's row and journal as a store hands them out, and the filters that pick runs.

use serde::{Deserialize, Serialize};

use super::RunStatus;
use crate::error::{ErrorKind, RunId};
use crate::journal::{Event, Timestamp};

/// A run's row, without its journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run.
    pub id: RunId,
    /// Its workflow.
    pub workflow: String,
    /// The spec fingerprint it started under.
    pub fingerprint: String,
    /// Its status.
    pub status: RunStatus,
    /// The start's idempotency key.
    pub idempotency_key: Option<String>,
    /// A note: why it is parked or failed.
    pub note: Option<String>,
    /// The run that started it, for a child run.
    pub parent: Option<RunId>,
    /// The engine that drives it, while one does.
    pub owner: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
    /// When its status last changed.
    pub updated_at: Timestamp,
}

/// A run with its journal.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRun {
    /// The run's row.
    pub record: RunRecord,
    /// Its journal, in order.
    pub events: Vec<Event>,
}

impl StoredRun {
    /// Whether the run waits for a worker to admit it
    /// ([`Claimable::Queued`](super::Claimable::Queued)): running, owned by nobody, its
    /// journal only its start (and who initiated it).
    pub fn is_queued(&self) -> bool {
        self.record.status == RunStatus::Running
            && self.record.owner.is_none()
            && queued_journal(&self.events)
    }
}

/// Whether a journal is only a start: `RunStarted`, then at most who initiated it.
pub fn queued_journal(events: &[Event]) -> bool {
    events
        .iter()
        .skip(1)
        .all(|event| matches!(event, Event::Initiated { .. }))
}

/// A run that failed for good, with what an operator needs to act on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The run.
    pub run: RunId,
    /// Its workflow.
    pub workflow: String,
    /// The failed step (empty for a deadline or a cancellation).
    pub step: String,
    /// Attempts made.
    pub attempts: u32,
    /// The error's kind.
    pub kind: ErrorKind,
    /// The error's message.
    pub message: String,
    /// The run's trace id.
    pub trace_id: String,
    /// When.
    pub at: Timestamp,
}

/// Which runs to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Only runs with this status.
    pub status: Option<RunStatus>,
    /// Only runs older than this one (for paging: pass the last id of the previous page).
    pub before: Option<RunId>,
    /// At most this many, newest first (all when `None`).
    pub limit: Option<usize>,
    /// Only runs with every one of these search values (name, value).
    pub search: Vec<(String, String)>,
}

/// Which finished runs [`Store::purge`](super::Store::purge) takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeFilter {
    /// Only runs whose status last changed (they finished) before this time.
    pub before: Timestamp,
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Not runs of these workflows (they keep their runs for a retention of their own).
    pub except: Vec<String>,
    /// Only runs with a higher id (to page through a dry run).
    pub after: Option<RunId>,
    /// At most this many runs, lowest id first (at least 1).
    pub limit: usize,
    /// Name the runs only; delete nothing.
    pub dry_run: bool,
}

// The tick of a stored run: an inherent method of the schedule layer's `Tick`, written here
// where the run's record is, so the schedule rules never name the store.
impl crate::schedule::Tick {
    /// The tick that started a run, if a schedule started it: read from the run's start key
    /// (`schedule:<id>@<scheduled ms>`). The fire time is the `Tick` the run was given
    /// when its journaled inputs hold one, its creation time otherwise (a scheduled
    /// workflow without inputs).
    pub fn of_run(record: &RunRecord, events: &[Event]) -> Option<crate::schedule::Tick> {
        let (schedule, scheduled) =
            crate::schedule::parse_tick_key(record.idempotency_key.as_deref()?)?;
        let input = events.iter().find_map(|event| match event {
            Event::RunStarted { input, .. } => Some(input),
            _ => None,
        });
        let given = input
            .and_then(serde_json::Value::as_object)
            .into_iter()
            .flat_map(|fields| fields.values())
            .find_map(|value| serde_json::from_value::<crate::schedule::Tick>(value.clone()).ok())
            .filter(|tick| tick.schedule == schedule && tick.scheduled == scheduled);
        Some(given.unwrap_or_else(|| crate::schedule::Tick {
            schedule: schedule.to_owned(),
            scheduled,
            fired: record.created_at,
        }))
    }
}

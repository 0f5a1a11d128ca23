//! `Engine::schedules()`: schedules created, listed, paused, resumed, triggered, deleted and
//! backfilled at run time. Each is a row in the engine's store, so it survives restarts and
//! every engine sharing the store sees it.

use super::{lock, Engine};
use crate::error::{RunError, RunId};
use crate::journal::Timestamp;
use crate::schedule::{CompiledSchedule, Schedule, ScheduleError};
use crate::store::{ScheduleChange, ScheduleRow, StoreError};

/// The most ticks one backfill starts (or lists).
pub const MAX_BACKFILL: usize = 10_000;

/// What can go wrong with a schedule.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleApiError {
    /// The schedule's cron, zone or bounds are not valid.
    #[error("invalid schedule: {0}")]
    Invalid(#[from] ScheduleError),
    /// No schedule has this id.
    #[error("no schedule `{0}`")]
    Unknown(String),
    /// The workflow is not registered with this engine.
    #[error("workflow `{0}` is not registered with this engine")]
    NotRegistered(String),
    /// The workflow cannot be started by a schedule: it takes inputs other than one `Tick`.
    #[error("workflow `{workflow}` cannot be scheduled: it takes {inputs} input(s); a scheduled workflow takes none or one `Tick`")]
    NotSchedulable {
        /// The workflow.
        workflow: String,
        /// How many inputs it takes.
        inputs: usize,
    },
    /// A backfill range holds more ticks than one backfill starts.
    #[error("the range holds more than {MAX_BACKFILL} ticks; backfill a shorter range")]
    TooManyTicks,
    /// The row kept changing under concurrent writers.
    #[error("schedule `{0}` is being changed by another process; try again")]
    Contended(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Starting or cancelling a run failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// A schedule with its next fire times: what `workflow schedules` lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleInfo {
    /// The stored row: definition and state.
    pub row: ScheduleRow,
    /// The next ticks (scheduled times, ms), at most the number asked for; none while
    /// paused.
    pub next: Vec<Timestamp>,
    /// The same ticks as wall-clock times in the schedule's zone.
    pub next_local: Vec<String>,
}

/// One tick of a backfill: its scheduled time and, unless it was a dry run, its run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackfillTick {
    /// The scheduled time (ms).
    pub scheduled: Timestamp,
    /// The same as a wall-clock time in the schedule's zone.
    pub local: String,
    /// The run started for it; `None` in a dry run.
    pub run: Option<RunId>,
    /// Whether this backfill created the run (false: the tick had run already).
    pub created: bool,
}

/// The schedules of an engine's store: see [`Engine::schedules`].
#[derive(Debug, Clone, Copy)]
pub struct Schedules<'e> {
    engine: &'e Engine,
}

impl Engine {
    /// The schedules of this engine's store: create, list, pause, resume, trigger, delete
    /// and backfill. Calling it also starts this engine's scheduler, which fires the due
    /// ticks of every schedule whose workflow is registered here (registering a workflow
    /// with a `schedule: { ... }` starts it too).
    pub fn schedules(&self) -> Schedules<'_> {
        self.ensure_scheduler();
        Schedules { engine: self }
    }
}

impl Schedules<'_> {
    /// Creates schedule `id` starting runs of `workflow` (its journaled name), or replaces
    /// the definition of an existing one (keeping what it did so far). The workflow must be
    /// registered with this engine and take no inputs or one `Tick`.
    pub async fn create(
        &self,
        id: &str,
        workflow: &str,
        schedule: Schedule,
    ) -> Result<ScheduleRow, ScheduleApiError> {
        CompiledSchedule::new(schedule.clone())?;
        let registered = self
            .engine
            .inner
            .registry
            .any(workflow)
            .ok_or_else(|| ScheduleApiError::NotRegistered(workflow.to_owned()))?;
        let inputs = registered.spec().inputs.len();
        if inputs > 1 {
            return Err(ScheduleApiError::NotSchedulable {
                workflow: workflow.to_owned(),
                inputs,
            });
        }
        let row = self
            .engine
            .inner
            .store
            .put_schedule(id, workflow, &schedule, self.engine.now())
            .await?;
        self.engine.wake_scheduler();
        Ok(row)
    }

    /// Every schedule with its next `count` fire times.
    pub async fn list(&self, count: usize) -> Result<Vec<ScheduleInfo>, ScheduleApiError> {
        let rows = self.engine.inner.store.schedules().await?;
        let now = self.engine.now();
        Ok(rows.into_iter().map(|row| info(row, now, count)).collect())
    }

    /// One schedule with its next `count` fire times.
    pub async fn get(&self, id: &str, count: usize) -> Result<ScheduleInfo, ScheduleApiError> {
        let row = self.row(id).await?;
        Ok(info(row, self.engine.now(), count))
    }

    /// Pauses a schedule: it fires nothing until resumed.
    pub async fn pause(&self, id: &str) -> Result<(), ScheduleApiError> {
        self.change(id, |_| ScheduleChange {
            state: None,
            paused: Some(true),
        })
        .await
    }

    /// Resumes a paused schedule. Ticks that passed while it was paused are neither run nor
    /// counted as missed: it goes on from now.
    pub async fn resume(&self, id: &str) -> Result<(), ScheduleApiError> {
        let now = self.engine.now();
        self.change(id, |row| {
            let mut state = row.state.clone();
            if row.paused {
                state.after = state.after.max(now);
            }
            ScheduleChange {
                state: Some(state),
                paused: Some(false),
            }
        })
        .await?;
        self.engine.wake_scheduler();
        Ok(())
    }

    /// Starts a run of the schedule now, as a tick scheduled now (outside the cron and
    /// the overlap policy). Returns the run.
    pub async fn trigger(&self, id: &str) -> Result<RunId, ScheduleApiError> {
        let row = self.row(id).await?;
        let (run, _, _) = self.engine.start_tick(&row, self.engine.now()).await?;
        Ok(run)
    }

    /// Deletes a schedule; the runs it started are kept. A schedule declared in a spec is
    /// recorded again when an engine registers the workflow anew: pause it to stop it for
    /// good.
    pub async fn delete(&self, id: &str) -> Result<(), ScheduleApiError> {
        if self.engine.inner.store.delete_schedule(id).await? {
            Ok(())
        } else {
            Err(ScheduleApiError::Unknown(id.to_owned()))
        }
    }

    /// The ticks of schedule `id` in `[from, to]`; unless `dry_run`, starts a run for each,
    /// keyed like the scheduler's, so a tick that already ran is not run again and running
    /// a backfill twice starts nothing the second time. Overlap and catch-up do not apply:
    /// a backfill is an operator's explicit request.
    pub async fn backfill(
        &self,
        id: &str,
        from: Timestamp,
        to: Timestamp,
        dry_run: bool,
    ) -> Result<Vec<BackfillTick>, ScheduleApiError> {
        let row = self.row(id).await?;
        let compiled = CompiledSchedule::new(row.schedule.clone())?;
        let ticks = compiled.between(from.saturating_sub(1), to, MAX_BACKFILL + 1);
        if ticks.len() > MAX_BACKFILL {
            return Err(ScheduleApiError::TooManyTicks);
        }
        let mut out = Vec::with_capacity(ticks.len());
        for scheduled in ticks {
            let local = compiled.local(scheduled);
            if dry_run {
                out.push(BackfillTick {
                    scheduled,
                    local,
                    run: None,
                    created: false,
                });
                continue;
            }
            let (run, _, created) = self.engine.start_tick(&row, scheduled).await?;
            out.push(BackfillTick {
                scheduled,
                local,
                run: Some(run),
                created,
            });
        }
        Ok(out)
    }

    async fn row(&self, id: &str) -> Result<ScheduleRow, ScheduleApiError> {
        self.engine
            .inner
            .store
            .schedules()
            .await?
            .into_iter()
            .find(|row| row.id == id)
            .ok_or_else(|| ScheduleApiError::Unknown(id.to_owned()))
    }

    /// Applies a change computed from the current row, retrying when another writer
    /// changed the row in between.
    async fn change(
        &self,
        id: &str,
        change: impl Fn(&ScheduleRow) -> ScheduleChange,
    ) -> Result<(), ScheduleApiError> {
        for _ in 0..16 {
            let row = self.row(id).await?;
            if self
                .engine
                .inner
                .store
                .update_schedule(id, row.version, change(&row))
                .await?
            {
                return Ok(());
            }
        }
        Err(ScheduleApiError::Contended(id.to_owned()))
    }
}

fn info(row: ScheduleRow, now: Timestamp, count: usize) -> ScheduleInfo {
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

impl Engine {
    /// Notes a registered workflow's declared schedule, recorded as a row by the scheduler.
    pub(super) fn declare_schedule(&self, workflow: &str, schedule: &Schedule) {
        lock(&self.inner.declared).push((workflow.to_owned(), schedule.clone()));
        self.wake_scheduler();
    }
}

//! `Engine::schedules()`: schedules created, listed, paused, resumed, triggered, deleted and
//! backfilled at run time. Each is a row in the engine's store, so it survives restarts and
//! every engine sharing the store sees it. The row operations are
//! [`crate::admin::schedules`], shared with the CLI.

use super::{lock, Engine};
use crate::admin::schedules::{self as rows, RowError, ScheduleInfo};
use crate::error::{RunError, RunId};
use crate::journal::Timestamp;
use crate::schedule::{CompiledSchedule, Schedule, ScheduleError};
use crate::store::{MissedTicks, ScheduleRow, StoreError};

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
    #[error("workflow `{workflow}` cannot be scheduled: it takes ({}); a scheduled workflow takes no input or one `Tick`", inputs.join(", "))]
    NotSchedulable {
        /// The workflow.
        workflow: String,
        /// The types of its inputs.
        inputs: Vec<String>,
    },
    /// A backfill range holds more ticks than one backfill starts.
    #[error(
        "the range holds more than {} ticks; backfill a shorter range",
        rows::MAX_BACKFILL
    )]
    TooManyTicks,
    /// The row kept changing under concurrent writers.
    #[error("schedule `{0}` is being changed by another process; try again")]
    Contended(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Starting a run failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl From<RowError> for ScheduleApiError {
    fn from(error: RowError) -> Self {
        match error {
            RowError::Unknown(id) => ScheduleApiError::Unknown(id),
            RowError::Invalid { error, .. } => ScheduleApiError::Invalid(error),
            RowError::TooManyTicks => ScheduleApiError::TooManyTicks,
            RowError::Contended(id) => ScheduleApiError::Contended(id),
            RowError::Store(error) => ScheduleApiError::Store(error),
        }
    }
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
    /// and backfill. Calling it inside a tokio runtime also starts this engine's scheduler,
    /// which fires the due ticks of every schedule whose workflow is registered here
    /// (registering a workflow with a `schedule: { ... }` inside a runtime starts it too;
    /// registered outside one, its schedule is recorded once the scheduler starts).
    pub fn schedules(&self) -> Schedules<'_> {
        self.ensure_scheduler();
        Schedules { engine: self }
    }

    /// Notes a registered workflow's declared schedule, recorded as a row by the scheduler.
    pub(super) fn declare_schedule(&self, workflow: &str, schedule: &Schedule) {
        lock(&self.inner.declared).push((workflow.to_owned(), schedule.clone()));
        self.wake_scheduler();
    }
}

impl Schedules<'_> {
    fn store(&self) -> &dyn crate::store::Store {
        &*self.engine.inner.store
    }

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
        let inputs = &registered.spec().inputs;
        let takes_tick = |ty: &str| {
            ty.rsplit("::")
                .next()
                .is_some_and(|last| last.trim() == "Tick")
        };
        if inputs.len() > 1 || inputs.first().is_some_and(|input| !takes_tick(&input.ty)) {
            return Err(ScheduleApiError::NotSchedulable {
                workflow: workflow.to_owned(),
                inputs: inputs.iter().map(|input| input.ty.clone()).collect(),
            });
        }
        let row = self
            .store()
            .put_schedule(id, workflow, &schedule, self.engine.now())
            .await?;
        self.engine.wake_scheduler();
        Ok(row)
    }

    /// Whether this engine has `workflow` registered, so that [`Schedules::trigger`] and
    /// [`Schedules::backfill`] can start its runs here.
    pub fn starts_here(&self, workflow: &str) -> bool {
        self.engine.inner.registry.any(workflow).is_some()
    }

    /// The records of the ticks schedule `id` missed (too old for its window, or left out
    /// by its `catchup`), newest first, at most `limit`. Each record is a run of
    /// consecutive ticks, written with the decision that missed them.
    pub async fn missed(
        &self,
        id: &str,
        limit: usize,
    ) -> Result<Vec<MissedTicks>, ScheduleApiError> {
        rows::get(self.store(), id).await?;
        Ok(self.store().missed_ticks(id, limit).await?)
    }

    /// Every schedule with its next `count` fire times.
    pub async fn list(&self, count: usize) -> Result<Vec<ScheduleInfo>, ScheduleApiError> {
        Ok(rows::list(self.store(), self.engine.now(), count).await?)
    }

    /// One schedule with its next `count` fire times.
    pub async fn get(&self, id: &str, count: usize) -> Result<ScheduleInfo, ScheduleApiError> {
        let row = rows::get(self.store(), id).await?;
        Ok(rows::info(row, self.engine.now(), count))
    }

    /// Pauses a schedule: it fires nothing until resumed.
    pub async fn pause(&self, id: &str) -> Result<(), ScheduleApiError> {
        Ok(rows::pause(self.store(), id).await?)
    }

    /// Resumes a paused schedule. Ticks that passed while it was paused are neither run nor
    /// counted as missed: it goes on from now.
    pub async fn resume(&self, id: &str) -> Result<(), ScheduleApiError> {
        rows::resume(self.store(), id, self.engine.now()).await?;
        self.engine.wake_scheduler();
        Ok(())
    }

    /// Starts a run of the schedule now, as a tick scheduled now (outside the cron and
    /// the overlap policy), and records it as the schedule's last run. Returns the run.
    pub async fn trigger(&self, id: &str) -> Result<RunId, ScheduleApiError> {
        let row = rows::get(self.store(), id).await?;
        let scheduled = self.engine.now();
        let (run, fired, _) = self.engine.start_tick(&row, scheduled).await?;
        rows::note_run(self.store(), id, run, scheduled, fired).await?;
        Ok(run)
    }

    /// Deletes a schedule; the runs it started are kept. A schedule declared in a spec is
    /// recorded again when an engine registers the workflow anew: pause it to stop it for
    /// good.
    pub async fn delete(&self, id: &str) -> Result<(), ScheduleApiError> {
        Ok(rows::delete(self.store(), id).await?)
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
        let row = rows::get(self.store(), id).await?;
        let ticks = rows::ticks_between(&row, from, to)?;
        let mut out = Vec::with_capacity(ticks.len());
        for (scheduled, local) in ticks {
            let (run, created) = if dry_run {
                (None, false)
            } else {
                let (run, _, created) = self.engine.start_tick(&row, scheduled).await?;
                (Some(run), created)
            };
            out.push(BackfillTick {
                scheduled,
                local,
                run,
                created,
            });
        }
        Ok(out)
    }
}

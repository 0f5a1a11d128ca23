//! The scheduler: the engine's background task that fires due ticks.
//!
//! It carries out what [`crate::schedule`] decides, in two steps per schedule, each a
//! compare-and-set of the schedule row's version, so any number of workers sharing a store
//! decide each tick once and start its run once:
//!
//! 1. **Decide.** From the row's state and the clock: which due ticks run, which are missed
//!    ([`catch_up`]), and what each does about runs still in flight ([`decide_overlap`]).
//!    The ticks to start are written to the state as `pending`, with the missed count.
//! 2. **Carry out.** Each pending tick's run is started with the tick's idempotency key
//!    (`schedule:<id>@<scheduled ms>`), so a worker that repeats a start another already
//!    made gets the same run; then `pending` is cleared and the runs recorded.
//!
//! A worker that crashes between the two leaves `pending` in the row: the next worker to
//! look carries it out. Missed ticks are recorded with the decision that won, in the same
//! write (a [`MissedTicks`] record: the range and its count, readable through
//! `Engine::schedules().missed()`), and counted once in `workflow_schedule_missed_total`;
//! each run's lag (fire time − scheduled time) is recorded once (by the start that created
//! it) in `workflow_schedule_lag_seconds`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map};

use super::{lock, Engine, StartOptions, FOREIGN_POLL};
use crate::clock::until;
use crate::error::RunId;
use crate::journal::Timestamp;
use crate::schedule::{
    catch_up, decide_overlap, fire_time, CompiledSchedule, Overlap, OverlapDecision, Schedule, Tick,
};
use crate::store::{MissedTicks, ScheduleChange, ScheduleRow, ScheduleState, StoreError};

/// Who cancels the previous run under `overlap: cancel_previous`, in its journal.
const CANCELLED_BY: &str = "schedule";

/// How many schedules fire at once in one pass.
const FIRING_AT_ONCE: usize = 64;

/// How often a schedule with a buffered tick looks whether the run in flight finished.
const BUFFERED_POLL_MS: u64 = 1_000;

/// The longest the scheduler sleeps when nothing is due and no other process writes.
const IDLE: Duration = Duration::from_secs(3600);

impl Engine {
    /// Starts the scheduler unless it runs (only inside a tokio runtime).
    pub(super) fn ensure_scheduler(&self) {
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let mut scheduler = lock(&self.inner.scheduler);
        if scheduler.is_some() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let notify = Arc::clone(&self.inner.schedule_notify);
        let handle = tokio::spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let engine = Engine { inner };
                let next = engine.fire_due().await;
                let mut pause = next.map_or(IDLE, |at| until(engine.now(), at));
                if engine.inner.store.shared() {
                    pause = pause.min(FOREIGN_POLL);
                }
                drop(engine);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = notify.notified() => {}
                }
            }
        });
        *scheduler = Some(handle.abort_handle());
    }

    /// Wakes the scheduler now (a schedule was created, resumed or changed).
    pub(super) fn wake_scheduler(&self) {
        self.ensure_scheduler();
        self.inner.schedule_notify.notify_one();
    }

    /// One pass over every schedule this engine can start runs for: fires what is due.
    /// Returns when the next tick fires, if any.
    pub(super) async fn fire_due(&self) -> Option<Timestamp> {
        if let Err(error) = self.sync_declared().await {
            tracing::warn!(%error, "could not record the schedules of registered workflows");
        }
        let rows = match self.inner.store.schedules().await {
            Ok(rows) => rows,
            Err(error) => {
                tracing::warn!(%error, "could not read the schedules");
                return None;
            }
        };
        let mut next: Option<Timestamp> = None;
        let limit = Arc::new(tokio::sync::Semaphore::new(FIRING_AT_ONCE));
        let mut firing = tokio::task::JoinSet::new();
        let mut fresh = Compiled::default();
        for row in rows {
            if row.paused || self.inner.registry.any(&row.workflow).is_none() {
                continue;
            }
            let Some(compiled) = self.compiled(&mut fresh, &row) else {
                continue;
            };
            let now = self.now();
            let due = !row.state.pending.is_empty()
                || row.state.buffered.is_some()
                || compiled
                    .next_after(row.state.after)
                    .is_some_and(|tick| tick <= now);
            if due {
                // Schedules fire concurrently (a bounded number at once), so the store
                // commits many schedules' writes together instead of one after another.
                let permit = Arc::clone(&limit).acquire_owned().await.ok();
                let engine = self.clone();
                let (row, compiled) = (row.clone(), Arc::clone(&compiled));
                firing.spawn(async move {
                    let _permit = permit;
                    if let Err(error) = engine.fire_one(&row, &compiled).await {
                        tracing::warn!(schedule = %row.id, %error, "a schedule could not fire");
                    }
                });
            }
            let after = row.state.after.max(now.saturating_sub(1));
            let upcoming = compiled
                .next_after(after)
                .map(|tick| fire_time(&row.id, tick, row.schedule.jitter));
            if let Some(at) = upcoming {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
            // A buffered tick starts as soon as the run in flight finishes: look again soon.
            if row.state.buffered.is_some() {
                let soon = self.now() + BUFFERED_POLL_MS;
                next = Some(next.map_or(soon, |n| n.min(soon)));
            }
        }
        // Only the definitions this pass met stay compiled (deleted or changed schedules'
        // go).
        *lock(&self.inner.compiled_schedules) = fresh;
        while firing.join_next().await.is_some() {}
        next
    }

    /// The compiled form of a row's schedule, from `fresh` (this pass's), else from the
    /// previous pass's cache, else compiled now: an idle pass parses no pattern, and one
    /// compiled pattern and zone serve every schedule with the same definition.
    fn compiled(&self, fresh: &mut Compiled, row: &ScheduleRow) -> Option<Arc<CompiledSchedule>> {
        if let Some(compiled) = fresh.get(&row.schedule) {
            return Some(compiled);
        }
        let known = lock(&self.inner.compiled_schedules).get(&row.schedule);
        let compiled = match known {
            Some(compiled) => compiled,
            None => match CompiledSchedule::new(row.schedule.clone()) {
                Ok(compiled) => Arc::new(compiled),
                Err(error) => {
                    tracing::warn!(schedule = %row.id, %error, "a stored schedule is not valid");
                    return None;
                }
            },
        };
        fresh.insert(&row.schedule, Arc::clone(&compiled));
        Some(compiled)
    }

    /// Records the schedule of every registered scheduled workflow (once per engine, and
    /// whenever its definition differs from the stored one).
    async fn sync_declared(&self) -> Result<(), StoreError> {
        let declared: Vec<(String, crate::schedule::Schedule)> = {
            let mut pending = lock(&self.inner.declared);
            std::mem::take(&mut *pending)
        };
        if declared.is_empty() {
            return Ok(());
        }
        let rows = self.inner.store.schedules().await?;
        for (workflow, schedule) in &declared {
            let current = rows.iter().find(|row| &row.id == workflow);
            if current.is_some_and(|row| &row.schedule == schedule && &row.workflow == workflow) {
                continue;
            }
            if let Err(error) = self
                .inner
                .store
                .put_schedule(workflow, workflow, schedule, self.now())
                .await
            {
                lock(&self.inner.declared).extend(declared.iter().cloned());
                return Err(error);
            }
        }
        Ok(())
    }

    /// Decides and carries out one schedule's due ticks.
    async fn fire_one(
        &self,
        row: &ScheduleRow,
        compiled: &CompiledSchedule,
    ) -> Result<(), crate::RunError> {
        let mut row = row.clone();
        // A worker that stopped between deciding and starting left ticks pending.
        if !row.state.pending.is_empty() {
            match self.carry_out(&row).await? {
                Some(carried) => row = carried,
                None => return Ok(()),
            }
        }
        let now = self.now();
        let decision = catch_up(compiled, &row.id, row.state.after, now);
        // Nothing due and nothing waiting: no run's status is read on an idle pass.
        if decision.last.is_none() && row.state.buffered.is_none() {
            return Ok(());
        }
        // Under `overlap: allow` runs in flight change nothing, so none is tracked or read
        // (a schedule switched from `allow` to another policy sees runs from its next tick).
        let policy = row.schedule.overlap;
        let active = if policy == Overlap::Allow {
            Vec::new()
        } else {
            self.unfinished(&row.state.active).await
        };
        let buffered_ready = row.state.buffered.filter(|_| active.is_empty());
        if decision.last.is_none() && buffered_ready.is_none() {
            return Ok(());
        }
        let mut state = ScheduleState {
            active,
            ..row.state.clone()
        };
        if let Some(tick) = buffered_ready {
            state.buffered = None;
            state.pending.push(tick);
        }
        // Overlap is decided against the runs in flight before this pass (and a buffered
        // tick started by it): the ticks one catch-up decides to run start together.
        let running = state.active.len() + state.pending.len();
        for &tick in &decision.run {
            match decide_overlap(policy, running, state.buffered.is_some()) {
                OverlapDecision::Start => state.pending.push(tick),
                OverlapDecision::Skip => state.skipped += 1,
                OverlapDecision::Buffer => state.buffered = Some(tick),
                OverlapDecision::CancelPreviousThenStart => {
                    state.cancel.append(&mut state.active);
                    state.pending.push(tick);
                }
            }
        }
        if let Some(last) = decision.last {
            state.after = last;
        }
        state.missed += decision.missed;
        if let Some((_, newest)) = decision.missed_range {
            state.last_missed = Some(newest);
        }
        let decided = self
            .inner
            .store
            .update_schedule(
                &row.id,
                row.version,
                ScheduleChange {
                    state: Some(state.clone()),
                    paused: None,
                    missed: decision.missed_range.map(|(first, last)| MissedTicks {
                        first,
                        last,
                        count: decision.missed,
                        recorded_at: now,
                    }),
                },
            )
            .await?;
        if !decided {
            // Another worker decided these ticks first; its decision stands.
            return Ok(());
        }
        if decision.missed > 0 {
            metrics::counter!("workflow_schedule_missed_total", "schedule" => row.id.clone())
                .increment(decision.missed);
            tracing::warn!(
                schedule = %row.id,
                missed = decision.missed,
                "ticks missed while no engine ran; recorded, not run"
            );
        }
        row.state = state;
        row.version += 1;
        if !row.state.pending.is_empty() || !row.state.cancel.is_empty() {
            self.carry_out(&row).await?;
        }
        Ok(())
    }

    /// Cancels what the decision cancels and starts the pending ticks' runs, then records
    /// them. Returns the row as written, or `None` when another worker changed it first.
    async fn carry_out(&self, row: &ScheduleRow) -> Result<Option<ScheduleRow>, crate::RunError> {
        for &run in &row.state.cancel {
            // A run that finished meanwhile needs no cancelling.
            let _ = self.cancel(run, CANCELLED_BY).await;
        }
        let mut state = row.state.clone();
        for &scheduled in &row.state.pending {
            let (run, fired, _) = self.start_tick(row, scheduled).await?;
            if row.schedule.overlap != Overlap::Allow {
                state.active.push(run);
            }
            state.last_run = Some(run);
            state.last_tick = Some(scheduled);
            state.last_fired = Some(fired);
        }
        state.pending.clear();
        state.cancel.clear();
        let written = self
            .inner
            .store
            .update_schedule(
                &row.id,
                row.version,
                ScheduleChange {
                    state: Some(state.clone()),
                    paused: None,
                    missed: None,
                },
            )
            .await?;
        Ok(written.then(|| ScheduleRow {
            state,
            version: row.version + 1,
            ..row.clone()
        }))
    }

    /// Starts the run of one tick, keyed by (schedule, scheduled time). Returns the run,
    /// when it fired, and whether this start created it.
    pub(super) async fn start_tick(
        &self,
        row: &ScheduleRow,
        scheduled: Timestamp,
    ) -> Result<(RunId, Timestamp, bool), crate::RunError> {
        let fired = self.now();
        let tick = Tick {
            schedule: row.id.clone(),
            scheduled,
            fired,
        };
        let input = self.tick_input(&row.workflow, &tick)?;
        let (run, created) = self
            .start_json(
                &row.workflow,
                input,
                StartOptions::key(tick.idempotency_key()),
            )
            .await?;
        if created {
            metrics::histogram!("workflow_schedule_lag_seconds", "schedule" => row.id.clone())
                .record(tick.lag_ms() as f64 / 1000.0);
            tracing::info!(schedule = %row.id, %run, scheduled, lag_ms = tick.lag_ms(), "tick fired");
        }
        Ok((run, fired, created))
    }

    /// The inputs of a scheduled workflow's run: none, or its one `Tick`.
    fn tick_input(
        &self,
        workflow: &str,
        tick: &Tick,
    ) -> Result<serde_json::Value, crate::RunError> {
        let registered = self
            .inner
            .registry
            .any(workflow)
            .ok_or_else(|| crate::RunError::NotRegistered(workflow.to_owned()))?;
        let mut fields = Map::new();
        match registered.spec().inputs.as_slice() {
            [] => {}
            [input] => {
                fields.insert(input.name.clone(), json!(tick));
            }
            _ => {
                return Err(crate::RunError::InvalidSpec(format!(
                    "workflow `{workflow}` takes more than one input, so a schedule cannot start it"
                )))
            }
        }
        Ok(serde_json::Value::Object(fields))
    }

    /// The runs of `runs` that have not finished, read in one store read.
    async fn unfinished(&self, runs: &[RunId]) -> Vec<RunId> {
        if runs.is_empty() {
            return Vec::new();
        }
        match self.inner.store.load_many(runs).await {
            Ok(loaded) => {
                let finished: std::collections::HashSet<RunId> = loaded
                    .iter()
                    .filter(|stored| stored.record.status.is_finished())
                    .map(|stored| stored.record.id)
                    .collect();
                let found: std::collections::HashSet<RunId> =
                    loaded.iter().map(|stored| stored.record.id).collect();
                // A run that is gone (purged) is not in flight either.
                runs.iter()
                    .copied()
                    .filter(|run| found.contains(run) && !finished.contains(run))
                    .collect()
            }
            // Unknown (a store error): keep them, so overlap errs on the side of waiting.
            Err(_) => runs.to_vec(),
        }
    }
}

/// Compiled schedules by definition: one compiled cron pattern and zone for every
/// schedule with the same definition.
#[derive(Debug, Default)]
pub(super) struct Compiled(HashMap<String, Vec<(Schedule, Arc<CompiledSchedule>)>>);

impl Compiled {
    /// The compiled form of `schedule`, if known.
    fn get(&self, schedule: &Schedule) -> Option<Arc<CompiledSchedule>> {
        self.0
            .get(schedule.cron.as_str())?
            .iter()
            .find(|(definition, _)| definition == schedule)
            .map(|(_, compiled)| Arc::clone(compiled))
    }

    /// Notes the compiled form of `schedule`.
    fn insert(&mut self, schedule: &Schedule, compiled: Arc<CompiledSchedule>) {
        self.0
            .entry(schedule.cron.clone())
            .or_default()
            .push((schedule.clone(), compiled));
    }
}

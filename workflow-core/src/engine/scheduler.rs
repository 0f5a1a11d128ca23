//! The scheduler: the engine's background task that fires due ticks.
//!
//! It carries out what [`crate::schedule`] decides, in two steps per schedule, each a
//! compare-and-set of the schedule row's version, so any number of workers sharing a store
//! decide each tick once and start its run once:
//!
//! 1. **Decide.** From the row's state and the clock: which due ticks run, which are missed
//!    ([`catch_up`]), and what each does about runs still in flight ([`decide_overlap`]).
//!    The ticks to start are written to the state as `pending`, with the missed count.
//!    A pass takes only the rows due by now (the store indexes each row's next fire time)
//!    and decides a batch of them in one transaction ([`Store::decide_schedules`]); rows
//!    another worker is deciding are left to it. A schedule whose policy waits on runs in
//!    flight (every policy but `allow`, while it has some) is decided alone, after reading
//!    them.
//! 2. **Carry out.** Each pending tick's run is started with the tick's idempotency key
//!    (`schedule:<id>@<scheduled ms>`), so a worker that repeats a start another already
//!    made gets the same run; the runs of one batch's ticks are created in one
//!    transaction ([`Store::create_runs`]). Then `pending` is cleared and the runs
//!    recorded, the rows of one batch in one transaction ([`Store::update_schedules`]).
//!
//! A worker that crashes between the two leaves `pending` in the row: once
//! [`PENDING_GRACE`] has passed, the next worker to look carries it out. Missed ticks are
//! recorded with the decision that won, in the same write (a [`MissedTicks`] record: the
//! range and its count, readable through `Engine::schedules().missed()`), and counted
//! once in `workflow_schedule_missed_total`; each run's lag (fire time − scheduled time) is
//! recorded once (by the start that created it) in `workflow_schedule_lag_seconds`.
//!
//! [`Store::decide_schedules`]: crate::store::Store::decide_schedules
//! [`Store::update_schedules`]: crate::store::Store::update_schedules
//! [`Store::create_runs`]: crate::store::Store::create_runs
//! [`PENDING_GRACE`]: crate::schedule::PENDING_GRACE

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::ticks::{record, CANCELLED_BY};
use super::{lock, Engine, FOREIGN_POLL};
use crate::clock::until;
use crate::error::RunId;
use crate::journal::Timestamp;
use crate::schedule::{
    catch_up, decide_overlap, next_fire_compiled, next_fire_pending, CompiledSchedule, Overlap,
    OverlapDecision, Schedule, Tick,
};
use crate::store::{
    DueDecision, DueRow, DueSchedules, MissedTicks, ScheduleChange, ScheduleRow, ScheduleState,
    ScheduleUpdate, StoreError,
};

/// How many schedules fire at once in one pass.
const FIRING_AT_ONCE: usize = 64;

/// How many due schedules one transaction decides.
const DECIDED_AT_ONCE: usize = 256;

/// How many decided batches are carried out at once.
const CARRIED_AT_ONCE: usize = 2;

/// The most compiled definitions kept between passes.
const COMPILED_KEPT: usize = 1_024;

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

    /// One pass over the due schedules this engine can start runs for: fires them, a
    /// batch at a time. Returns when the next tick fires, if any.
    pub(super) async fn fire_due(&self) -> Option<Timestamp> {
        if let Err(error) = self.sync_declared().await {
            tracing::warn!(%error, "could not record the schedules of registered workflows");
        }
        let workflows: Vec<String> = self
            .inner
            .registry
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        if workflows.is_empty() {
            return None;
        }
        // The next batch is decided while the one before is carried out (its rows are not
        // due again until their runs are recorded, or the pending grace passed).
        let mut carrying = tokio::task::JoinSet::new();
        loop {
            let now = self.now();
            let engine = self.clone();
            let due = DueSchedules {
                now,
                workflows: workflows.clone(),
                limit: DECIDED_AT_ONCE,
            };
            let decider = Arc::new(move |row: &ScheduleRow| engine.decide_due(row, now));
            let decided = self.inner.store.decide_schedules(due, decider).await;
            while carrying.len() >= CARRIED_AT_ONCE || (decided.is_err() && !carrying.is_empty()) {
                let _ = carrying.join_next().await;
            }
            let batch = match decided {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, "could not decide the due schedules");
                    return Some(now + BUFFERED_POLL_MS);
                }
            };
            let full = batch.rows.len() >= DECIDED_AT_ONCE;
            // A row left undecided (waiting on a run in flight) is looked at again soon.
            let waiting = batch.rows.iter().any(|due| !due.decided);
            let engine = self.clone();
            carrying.spawn(async move { engine.carry_out_batch(batch.rows).await });
            if !full {
                while carrying.join_next().await.is_some() {}
                let soon = waiting.then(|| self.now() + BUFFERED_POLL_MS);
                return match (batch.next, soon) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
    }

    /// What a due row does now, inside the store's deciding transaction: no I/O. A row
    /// whose policy waits on runs in flight is left for [`Engine::fire_one`] (`Later`,
    /// looked at again after [`BUFFERED_POLL_MS`]).
    fn decide_due(&self, row: &ScheduleRow, now: Timestamp) -> DueDecision {
        let Some(compiled) = self.compiled(row) else {
            return DueDecision::Later(now + IDLE.as_millis() as u64);
        };
        let policy = row.schedule.overlap;
        let state = &row.state;
        let waits_on_runs =
            !state.active.is_empty() || !state.pending.is_empty() || !state.cancel.is_empty();
        if policy != Overlap::Allow && waits_on_runs {
            return DueDecision::Later(now + BUFFERED_POLL_MS);
        }
        let decision = catch_up(&compiled, &row.id, state.after, now);
        // Under `overlap: allow` runs in flight change nothing, so none is tracked; for
        // the other policies there are none here.
        let mut state = ScheduleState {
            active: Vec::new(),
            ..state.clone()
        };
        if let Some(tick) = state.buffered.take() {
            state.pending.push(tick);
        }
        if decision.last.is_none() && state.pending.is_empty() && state.cancel.is_empty() {
            let again = next_fire_compiled(row, &compiled)
                .filter(|&at| at > now)
                .unwrap_or(now + BUFFERED_POLL_MS);
            return DueDecision::Later(again);
        }
        // Overlap is decided against the ticks already waiting to start: the ticks one
        // catch-up decides to run start together.
        let running = state.pending.len();
        for &tick in &decision.run {
            match decide_overlap(policy, running, state.buffered.is_some()) {
                OverlapDecision::Start => state.pending.push(tick),
                OverlapDecision::Skip => state.skipped += 1,
                OverlapDecision::Buffer => state.buffered = Some(tick),
                OverlapDecision::CancelPreviousThenStart => state.pending.push(tick),
            }
        }
        if let Some(last) = decision.last {
            state.after = last;
        }
        state.missed += decision.missed;
        if let Some((_, newest)) = decision.missed_range {
            state.last_missed = Some(newest);
        }
        let decided = ScheduleRow {
            state: state.clone(),
            ..row.clone()
        };
        let next_fire = if decided.state.pending.is_empty() && decided.state.cancel.is_empty() {
            next_fire_compiled(&decided, &compiled)
        } else {
            next_fire_pending(&decided, &compiled, now)
        };
        DueDecision::Change {
            change: ScheduleChange {
                state: Some(state),
                paused: None,
                missed: decision.missed_range.map(|(first, last)| MissedTicks {
                    first,
                    last,
                    count: decision.missed,
                    recorded_at: now,
                }),
            },
            next_fire,
        }
    }

    /// Carries out one decided batch: starts the pending ticks' runs, all created in one
    /// store transaction ([`Engine::start_batch`]), and records them in one write. The rows
    /// left undecided go through [`Engine::fire_one`], and the ticks of workflows whose
    /// starts are queued for admission start one by one, a bounded number of schedules at
    /// once.
    async fn carry_out_batch(&self, rows: Vec<DueRow>) {
        let limit = Arc::new(tokio::sync::Semaphore::new(FIRING_AT_ONCE));
        let mut firing = tokio::task::JoinSet::new();
        let mut batch = Vec::new();
        for due in rows {
            if let Some(missed) = due.missed.as_ref().filter(|m| m.count > 0) {
                metrics::counter!("workflow_schedule_missed_total", "schedule" => due.row.id.clone())
                    .increment(missed.count);
                tracing::warn!(
                    schedule = %due.row.id,
                    missed = missed.count,
                    "ticks missed while no engine ran; recorded, not run"
                );
            }
            let state = &due.row.state;
            if due.decided && state.pending.is_empty() && state.cancel.is_empty() {
                continue;
            }
            if due.decided && self.batches_ticks(&due.row.workflow) {
                batch.push(due.row);
                continue;
            }
            let permit = Arc::clone(&limit).acquire_owned().await.ok();
            let engine = self.clone();
            firing.spawn(async move {
                let _permit = permit;
                let row = due.row;
                if !due.decided {
                    let compiled = engine.compiled(&row)?;
                    if let Err(error) = engine.fire_one(&row, &compiled).await {
                        tracing::warn!(schedule = %row.id, %error, "a schedule could not fire");
                    }
                    return None;
                }
                match engine.start_pending(&row).await {
                    Ok(state) => Some((row, state)),
                    Err(error) => {
                        tracing::warn!(schedule = %row.id, %error, "a schedule could not fire");
                        None
                    }
                }
            });
        }
        let mut started = self.start_batch(batch).await;
        while let Some(joined) = firing.join_next().await {
            if let Ok(Some(row)) = joined {
                started.push(row);
            }
        }
        let mut updates = Vec::new();
        for (row, state) in started {
            let recorded = ScheduleRow {
                state: state.clone(),
                ..row.clone()
            };
            let next_fire = self
                .compiled(&row)
                .and_then(|compiled| next_fire_compiled(&recorded, &compiled));
            updates.push(ScheduleUpdate {
                id: row.id,
                version: row.version,
                change: ScheduleChange {
                    state: Some(state),
                    paused: None,
                    missed: None,
                },
                next_fire,
            });
        }
        if updates.is_empty() {
            return;
        }
        // A row another worker changed meanwhile keeps its own record: its runs are the
        // same (started under the ticks' keys).
        if let Err(error) = self.inner.store.update_schedules(updates).await {
            tracing::warn!(%error, "could not record the runs the schedules started");
        }
    }

    /// The compiled form of a row's schedule, from the engine's cache of definitions, else
    /// compiled now: an idle pass parses no pattern, and one compiled pattern and zone
    /// serve every schedule with the same definition.
    fn compiled(&self, row: &ScheduleRow) -> Option<Arc<CompiledSchedule>> {
        if let Some(compiled) = lock(&self.inner.compiled_schedules).get(&row.schedule) {
            return Some(compiled);
        }
        let compiled = match CompiledSchedule::new(row.schedule.clone()) {
            Ok(compiled) => Arc::new(compiled),
            Err(error) => {
                tracing::warn!(schedule = %row.id, %error, "a stored schedule is not valid");
                return None;
            }
        };
        let mut cache = lock(&self.inner.compiled_schedules);
        // Bounded: many distinct definitions start over rather than grow without end.
        if cache.len() >= COMPILED_KEPT {
            *cache = Compiled::default();
        }
        cache.insert(&row.schedule, Arc::clone(&compiled));
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
        let state = self.start_pending(row).await?;
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

    /// Cancels what the decision cancels and starts the pending ticks' runs. Returns the
    /// state that records them, not yet written.
    async fn start_pending(&self, row: &ScheduleRow) -> Result<ScheduleState, crate::RunError> {
        for &run in &row.state.cancel {
            // A run that finished meanwhile needs no cancelling.
            let _ = self.cancel(run, CANCELLED_BY).await;
        }
        let mut state = row.state.clone();
        for &scheduled in &row.state.pending {
            let (run, fired, _) = self.start_tick(row, scheduled).await?;
            let tick = Tick {
                schedule: row.id.clone(),
                scheduled,
                fired,
            };
            record(&mut state, row.schedule.overlap, run, &tick);
        }
        state.pending.clear();
        state.cancel.clear();
        Ok(state)
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

    /// How many definitions are compiled.
    fn len(&self) -> usize {
        self.0.values().map(Vec::len).sum()
    }

    /// Notes the compiled form of `schedule`.
    fn insert(&mut self, schedule: &Schedule, compiled: Arc<CompiledSchedule>) {
        self.0
            .entry(schedule.cron.clone())
            .or_default()
            .push((schedule.clone(), compiled));
    }
}

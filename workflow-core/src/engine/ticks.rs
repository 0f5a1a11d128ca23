//! Starting the runs of schedule ticks: one tick at a time ([`Engine::start_tick`]), or the
//! pending ticks of a decided batch of schedules with every run created in one store
//! transaction ([`Engine::start_batch`]).
//!
//! Each tick's run is started with the tick's idempotency key
//! (`schedule:<id>@<scheduled ms>`), so a start another worker already made answers the
//! same run, whichever way it was created.

use std::collections::HashSet;

use serde_json::{json, Map};

use super::plan::{Options, Prepared};
use super::{Engine, StartOptions};
use crate::error::RunId;
use crate::journal::Timestamp;
use crate::schedule::{Overlap, Tick};
use crate::store::{Created, NewRun, ScheduleRow, ScheduleState};

/// Who cancels the previous run under `overlap: cancel_previous`, in its journal.
pub(super) const CANCELLED_BY: &str = "schedule";

/// One tick's run, planned and waiting for the batch's creation.
struct Planned {
    /// The row's index in the batch.
    row: usize,
    tick: Tick,
    key: String,
    prepared: Prepared,
}

impl Engine {
    /// Whether the ticks of `workflow` may start in a batch: a worker starts them itself,
    /// unless its starts are queued for admission (they go one by one).
    pub(super) fn batches_ticks(&self, workflow: &str) -> bool {
        self.is_worker()
            && self
                .inner
                .registry
                .any(workflow)
                .is_some_and(|registered| !crate::store::gate::is_gated(registered.spec()))
    }

    /// Cancels what each row's decision cancels, then starts every pending tick of `rows`,
    /// creating all their runs in one store transaction ([`Store::create_runs`]), and
    /// launches the new ones. Returns each row that started with the state recording its
    /// runs, not yet written; a row that could not start is left out (its ticks stay
    /// pending, for the next worker to look once the grace passed).
    ///
    /// [`Store::create_runs`]: crate::store::Store::create_runs
    pub(super) async fn start_batch(
        &self,
        rows: Vec<ScheduleRow>,
    ) -> Vec<(ScheduleRow, ScheduleState)> {
        for row in &rows {
            for &run in &row.state.cancel {
                // A run that finished meanwhile needs no cancelling.
                let _ = self.cancel(run, CANCELLED_BY).await;
            }
        }
        let mut stored = HashSet::new();
        let mut failed = HashSet::new();
        for row in &rows {
            if !stored.insert(row.workflow.as_str()) {
                continue;
            }
            let Some(registered) = self.inner.registry.any(&row.workflow) else {
                continue;
            };
            if let Err(error) = registered.store_spec(self).await {
                tracing::warn!(workflow = %row.workflow, %error, "a schedule could not fire");
                failed.insert(row.workflow.as_str());
            }
        }
        let fired = self.now();
        let mut planned = Vec::new();
        let mut left_out = HashSet::new();
        for (index, row) in rows.iter().enumerate() {
            if failed.contains(row.workflow.as_str()) {
                left_out.insert(index);
                continue;
            }
            for &scheduled in &row.state.pending {
                let tick = Tick {
                    schedule: row.id.clone(),
                    scheduled,
                    fired,
                };
                match self.plan_tick(row, tick) {
                    Ok(tick) => planned.push(Planned { row: index, ..tick }),
                    Err(error) => {
                        tracing::warn!(schedule = %row.id, %error, "a schedule could not fire");
                        left_out.insert(index);
                    }
                }
            }
        }
        planned.retain(|tick| !left_out.contains(&tick.row));
        let sent = self.inner.lease.now_ms();
        let created = {
            let new: Vec<NewRun<'_>> = planned
                .iter()
                .map(|tick| tick.prepared.new_run(self, Some(&tick.key), None))
                .collect();
            self.inner.store.create_runs(&new).await
        };
        let created = match created {
            Ok(created) => created,
            Err(error) => {
                tracing::warn!(%error, ticks = planned.len(), "the schedules' runs could not start");
                return Vec::new();
            }
        };
        let mut states: Vec<Option<ScheduleState>> = rows
            .iter()
            .enumerate()
            .map(|(index, row)| (!left_out.contains(&index)).then(|| row.state.clone()))
            .collect();
        for (tick, created) in planned.into_iter().zip(created) {
            let row = &rows[tick.row];
            self.tick_started(row, &tick.tick, created);
            tick.prepared.launch(self, created, sent);
            if let Some(state) = &mut states[tick.row] {
                record(state, row.schedule.overlap, created.id(), &tick.tick);
            }
        }
        rows.into_iter()
            .zip(states)
            .filter_map(|(row, state)| {
                let mut state = state?;
                state.pending.clear();
                state.cancel.clear();
                Some((row, state))
            })
            .collect()
    }

    /// Plans the run of one tick of `row`.
    fn plan_tick(&self, row: &ScheduleRow, tick: Tick) -> Result<Planned, crate::RunError> {
        let registered = self
            .inner
            .registry
            .any(&row.workflow)
            .ok_or_else(|| crate::RunError::NotRegistered(row.workflow.clone()))?;
        let input = self.tick_input(&row.workflow, &tick)?;
        let key = tick.idempotency_key();
        let prepared = registered.prepare(
            self,
            input,
            &Options {
                idempotency_key: Some(&key),
                dry_run: false,
                deadline: None,
                initiator: None,
                parent: None,
                trace: None,
            },
        )?;
        Ok(Planned {
            row: 0,
            tick,
            key,
            prepared,
        })
    }

    /// Notes a tick's start: its lag once, by the start that created its run.
    fn tick_started(&self, row: &ScheduleRow, tick: &Tick, created: Created) {
        match created {
            Created::New { run, .. } => {
                metrics::histogram!("workflow_schedule_lag_seconds", "schedule" => row.id.clone())
                    .record(tick.lag_ms() as f64 / 1000.0);
                tracing::info!(schedule = %row.id, %run, scheduled = tick.scheduled, lag_ms = tick.lag_ms(), "tick fired");
            }
            Created::Existing(run) => {
                tracing::info!(workflow = %row.workflow, %run, key = %tick.idempotency_key(), "start deduplicated by idempotency key");
            }
        }
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
}

/// Records a started tick's run in its schedule's state.
pub(super) fn record(state: &mut ScheduleState, overlap: Overlap, run: RunId, tick: &Tick) {
    if overlap != Overlap::Allow {
        state.active.push(run);
    }
    state.last_run = Some(run);
    state.last_tick = Some(tick.scheduled);
    state.last_fired = Some(tick.fired);
}

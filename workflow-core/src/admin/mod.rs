//! Operations on runs from outside the engine that drives them, written once for the
//! engine, the CLI and the HTTP server: each admin operation is one store transaction, and
//! every rule comes from the run's [`Machine`].
//!
//! - [`retry_dead_letter`]: a failed run goes back to work from its failed step.
//! - [`cancel_parked`]: a parked run is cancelled.
//! - [`restart_parked`]: a parked run is replaced by a new run of the current spec.
//! - [`submit_decision`], [`submit_cancel`]: requests for a run another engine drives,
//!   left in its inbox for that engine to admit with its own authorizer.
//! - [`schedules`]: the schedule rows of a store (list, pause, resume, delete, trigger,
//!   backfill).
//! - [`task_page`]: a page of the open human tasks of a store, from its open-task index
//!   ([`loaded_task_page`] keeps the runs and specs it read).
//! - [`open_tasks`]: the open human tasks of every running run in a store, by replaying
//!   every one of them (what [`task_page`] avoids).
//!
//! Tools without the workflow's code read its spec from the store ([`stored_spec`]), where
//! every engine records the specs it registers.

pub mod schedules;

use std::collections::HashMap;

use workflow_spec::Spec;

use crate::error::{DecisionError, RunError, RunId};
use crate::journal::{Event, Timestamp, Value};
use crate::machine::Machine;
use crate::store::{
    Commit, DeadLetterChange, Message, NewRun, OpenTask, RunFilter, RunStatus, Store, StoreError,
    StoredRun, Submitted, TaskFilter,
};

/// An open or decided human task, as listed by the engine.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskInfo {
    /// The run.
    pub run: crate::error::RunId,
    /// The workflow.
    pub workflow: String,
    /// The human step's id.
    pub step: String,
    /// Who may decide now.
    pub assignee: String,
    /// What to show the approver.
    pub prompt: Option<String>,
    /// When it times out.
    pub deadline: Timestamp,
    /// Whether it was escalated.
    pub escalated: bool,
}

/// How long after the newest registration of a workflow another registration still counts
/// as current: versions registered side by side by one deploy.
pub const CURRENT_WINDOW_MS: u64 = 10 * 60 * 1000;

/// The spec recorded in the store for a fingerprint.
pub async fn stored_spec(store: &dyn Store, fingerprint: &str) -> Result<Option<Spec>, StoreError> {
    match store.spec(fingerprint).await? {
        Some(json) => serde_json::from_str(&json).map(Some).map_err(|e| {
            StoreError::Io(format!(
                "the spec recorded for fingerprint {fingerprint} does not decode: {e}"
            ))
        }),
        None => Ok(None),
    }
}

/// The fingerprints of `workflow` that engines registered most recently: the newest
/// registration and any registered within [`CURRENT_WINDOW_MS`] of it (versions deployed
/// side by side). What tools without the workflow's code take as its current versions.
pub async fn current_fingerprints(
    store: &dyn Store,
    workflow: &str,
) -> Result<Vec<String>, StoreError> {
    let specs = store.specs(workflow).await?;
    let Some(newest) = specs.first().map(|s| s.last_registered) else {
        return Ok(Vec::new());
    };
    Ok(specs
        .into_iter()
        .filter(|s| s.last_registered + CURRENT_WINDOW_MS >= newest)
        .map(|s| s.fingerprint)
        .collect())
}

async fn load(store: &dyn Store, run: RunId) -> Result<StoredRun, RunError> {
    store.load(run).await?.ok_or(RunError::UnknownRun(run))
}

/// From when an operator's retry of a failed run is no longer refused as too soon
/// ([`RunError::TooSoon`]): the latest `safe_after` of an interrupted external effect
/// since the run was last retried, read from its journal as the machine reads it. `None`
/// when the run may be retried at once.
///
/// ```
/// use workflow_core::admin::retry_safe_after;
/// use workflow_core::journal::Event;
/// use workflow_core::ErrorKind;
///
/// let failed = Event::AttemptFailed {
///     step: 0, attempt: 1, kind: ErrorKind::OutcomeUnknown, message: "interrupted".into(),
///     retry_after: None, safe_after: Some(5_000), at: 1_000,
/// };
/// assert_eq!(retry_safe_after(&[failed.clone()]), Some(5_000));
/// let retried = Event::Retried { by: "ana".into(), at: 6_000 };
/// assert_eq!(retry_safe_after(&[failed, retried]), None);
/// ```
pub fn retry_safe_after(events: &[Event]) -> Option<Timestamp> {
    let mut safe = None;
    for event in events {
        match event {
            Event::AttemptFailed {
                safe_after: Some(at),
                ..
            } => safe = Some(safe.map_or(*at, |s: Timestamp| s.max(*at))),
            Event::Retried { .. } => safe = None,
            _ => {}
        }
    }
    safe
}

/// Sends a failed run back to work from its failed step (the steps whose compensation ran
/// start again; other outputs are reused): `Retried` is journaled, the dead letter removed
/// and the run marked running, in one transaction. The run must have failed, and have
/// started under one of the `current` fingerprints (else it would be parked at once).
/// Nobody owns the run afterwards: an engine with the workflow registered takes it up.
///
/// A run that failed because an interrupted external effect's outcome is unknown is
/// refused with [`RunError::TooSoon`] until its previous owner can no longer be inside the
/// effect and no request it sent can still be applied by a service that checks the
/// request's `valid_until` (its lease ended, plus the self-fencing margin and twice the
/// clock-skew bound: [`retry_safe_after`]), unless `insist`.
pub async fn retry_dead_letter(
    store: &dyn Store,
    run: RunId,
    by: &str,
    now: Timestamp,
    spec: &Spec,
    current: &[&str],
    insist: bool,
) -> Result<(), RunError> {
    let stored = load(store, run).await?;
    let record = &stored.record;
    if record.status != RunStatus::Failed {
        return Err(RunError::NotFailed(run));
    }
    if !current.contains(&record.fingerprint.as_str()) {
        return Err(RunError::SpecChanged {
            run,
            workflow: record.workflow.clone(),
            recorded: record.fingerprint.clone(),
            current: current.join(", "),
        });
    }
    let retried = Machine::replay(spec, &stored.events).retry(run, by, now, insist)?;
    let note = format!("retried by {by}");
    store
        .commit(Commit {
            status: Some((RunStatus::Running, Some(&note))),
            dead_letter: DeadLetterChange::Remove,
            ..Commit::events(run, stored.events.len() as u64, &[retried], now)
        })
        .await?;
    Ok(())
}

/// Cancels a parked run (nobody drives it, so nothing compensates): `Cancelled` is
/// journaled and the run marked cancelled in one transaction.
pub async fn cancel_parked(
    store: &dyn Store,
    run: RunId,
    by: &str,
    now: Timestamp,
) -> Result<(), RunError> {
    let stored = load(store, run).await?;
    if stored.record.status != RunStatus::Parked {
        return Err(RunError::NotParked(run));
    }
    let cancelled = Event::Cancelled {
        by: by.to_owned(),
        inbox: None,
        at: now,
    };
    let note = format!("cancelled by {by}");
    store
        .commit(Commit {
            status: Some((RunStatus::Cancelled, Some(&note))),
            ..Commit::events(run, stored.events.len() as u64, &[cancelled], now)
        })
        .await?;
    Ok(())
}

/// Restarts a parked run under the spec with `fingerprint`: a new run with the same
/// inputs, created with the idempotency key `restart-of-run-N` (so restarting twice makes
/// one run), while the parked run is marked cancelled with a note, in one transaction.
/// Nobody owns the new run: an engine with the workflow registered takes it up.
pub async fn restart_parked(
    store: &dyn Store,
    run: RunId,
    by: &str,
    now: Timestamp,
    fingerprint: &str,
    seed: u64,
) -> Result<RunId, RunError> {
    let stored = load(store, run).await?;
    let record = &stored.record;
    let key = format!("restart-of-{run}");
    if record.status != RunStatus::Parked {
        // Restarted before: the same key names the new run.
        if let Some(existing) = restarted(store, &record.workflow, &key).await? {
            return Ok(existing);
        }
        return Err(RunError::NotParked(run));
    }
    let Some(Event::RunStarted {
        input,
        dry_run,
        trace_id,
        parent_span,
        ..
    }) = stored.events.first()
    else {
        return Err(RunError::Decode {
            run,
            step: "<input>".into(),
            message: "the journal does not start with the run's inputs".into(),
        });
    };
    let started = Event::RunStarted {
        workflow: record.workflow.clone(),
        fingerprint: fingerprint.to_owned(),
        input: input.clone(),
        seed,
        // The new run continues the parked run's trace.
        trace_id: crate::trace::otel_trace_id(trace_id)
            .unwrap_or_else(|| crate::trace::generate(seed)),
        parent_span: parent_span.clone(),
        dry_run: *dry_run,
        deadline: None,
        at: now,
    };
    let note = format!("restarted by {by} as the run with key `{key}`");
    // The restarted run keeps its initiator, so `self_approval: false` still holds.
    let initiated = stored.events.iter().find_map(|event| match event {
        Event::Initiated { by, .. } => Some(Event::Initiated {
            by: by.clone(),
            at: now,
        }),
        _ => None,
    });
    let events: Vec<Event> = std::iter::once(started).chain(initiated).collect();
    let spec = match store.spec(fingerprint).await {
        Ok(Some(json)) => serde_json::from_str::<workflow_spec::Spec>(&json).ok(),
        _ => None,
    };
    // The new run is found by the same search values, read from its input by its spec.
    let search = spec
        .as_ref()
        .map(|spec| crate::search::values_from_input(&spec.search, input))
        .unwrap_or_default();
    let new = NewRun {
        workflow: &record.workflow,
        fingerprint,
        idempotency_key: Some(&key),
        events: &events,
        parent: record.parent,
        owner: None,
        supersedes: Some((run, &note)),
        at: now,
        search: &search,
    };
    // A run of a limited workflow is admitted under its keys like any other start.
    let gate = spec
        .as_ref()
        .and_then(|spec| crate::store::gate::StartGate::from_json(spec, input));
    let created = match &gate {
        Some(gate) => store.create_gated(new, gate.gate()).await?,
        None => store.create_run(new).await?,
    };
    Ok(created.id())
}

async fn restarted(
    store: &dyn Store,
    workflow: &str,
    key: &str,
) -> Result<Option<RunId>, StoreError> {
    let runs = store
        .runs(RunFilter {
            workflow: Some(workflow.to_owned()),
            ..RunFilter::default()
        })
        .await?;
    Ok(runs
        .into_iter()
        .find(|r| r.idempotency_key.as_deref() == Some(key))
        .map(|r| r.id))
}

/// Leaves a decision in the inbox of a run another engine drives, after checking with the
/// machine everything but the approver (the engine that owns the run admits the approver
/// with its authorizer when it takes the decision in, and journals a refusal otherwise).
/// A decision for a human step whose type the caller cannot check is checked then too.
/// `via` (how it was made: `link`) is journaled with it.
#[allow(clippy::too_many_arguments)]
pub async fn submit_decision(
    store: &dyn Store,
    run: RunId,
    spec: &Spec,
    step: &str,
    by: &str,
    decision: Value,
    via: Option<&str>,
    now: Timestamp,
) -> Result<Submitted, DecisionError> {
    let stored = store
        .load(run)
        .await?
        .ok_or(DecisionError::UnknownRun(run))?;
    let machine = Machine::replay(spec, &stored.events);
    if stored.record.status == RunStatus::Parked {
        return Err(DecisionError::Finished(run));
    }
    machine.admit(run, step, by, now, None)?;
    let message = Message::Decision {
        step: step.to_owned(),
        by: by.to_owned(),
        decision,
        via: via.map(str::to_owned),
    };
    store
        .submit(run, &message, None, now)
        .await
        .map_err(|error| match error {
            StoreError::Finished(run) => DecisionError::Finished(run),
            StoreError::UnknownRun(run) => DecisionError::UnknownRun(run),
            other => DecisionError::Store(other),
        })
}

/// Leaves a delegation of human step `step` to `to` in the run's inbox, once the run's
/// machine finds nothing against it (the authorizer is left to the engine that drives
/// the run, which admits `by` and journals the delegation or a refusal).
pub async fn submit_delegation(
    store: &dyn Store,
    run: RunId,
    spec: &Spec,
    step: &str,
    by: &str,
    to: &str,
    now: Timestamp,
) -> Result<Submitted, DecisionError> {
    let stored = store
        .load(run)
        .await?
        .ok_or(DecisionError::UnknownRun(run))?;
    if stored.record.status == RunStatus::Parked {
        return Err(DecisionError::Finished(run));
    }
    Machine::replay(spec, &stored.events).delegate(run, step, by, to, now, None)?;
    let message = Message::Delegate {
        step: step.to_owned(),
        by: by.to_owned(),
        to: to.trim().to_owned(),
    };
    store
        .submit(run, &message, None, now)
        .await
        .map_err(|error| match error {
            StoreError::Finished(run) => DecisionError::Finished(run),
            StoreError::UnknownRun(run) => DecisionError::UnknownRun(run),
            other => DecisionError::Store(other),
        })
}

/// Leaves a cancellation in the inbox of a running run: the engine that drives it stops
/// scheduling and compensates.
pub async fn submit_cancel(
    store: &dyn Store,
    run: RunId,
    by: &str,
    now: Timestamp,
) -> Result<Submitted, RunError> {
    let message = Message::Cancel { by: by.to_owned() };
    store
        .submit(run, &message, None, now)
        .await
        .map_err(|error| match error {
            StoreError::Finished(run) => RunError::Finished(run),
            StoreError::UnknownRun(run) => RunError::UnknownRun(run),
            other => RunError::Store(other),
        })
}

/// One page of the store's open tasks (`filter` as [`Store::open_tasks`] takes it,
/// soonest deadline first), read from its open-task index, each with what its run's
/// machine says of it: only the runs on the page are loaded (in one read,
/// [`Store::load_many`]) and replayed, on the spec recorded for them (each read once).
/// Returns the index rows of the page (for its cursor) and the tasks; a row whose run or
/// spec cannot be found, or whose machine has the task closed, is left out of the tasks.
pub async fn task_page(
    store: &dyn Store,
    filter: TaskFilter,
) -> Result<(Vec<OpenTask>, Vec<TaskInfo>), StoreError> {
    let page = loaded_task_page(store, filter).await?;
    Ok((page.rows, page.tasks))
}

/// A page of open tasks with what was read to make it: the runs and their specs, for
/// whoever shows more of each task (an inbox card) without reading them again.
#[derive(Debug, Clone, Default)]
pub struct TaskPage {
    /// The index rows of the page, soonest deadline first.
    pub rows: Vec<OpenTask>,
    /// The tasks their runs' machines have open, in the rows' order.
    pub tasks: Vec<TaskInfo>,
    /// The running runs of the page, by id.
    pub runs: HashMap<RunId, StoredRun>,
    /// The specs of those runs, by fingerprint.
    pub specs: HashMap<String, Spec>,
}

/// [`task_page`], keeping the runs and specs it read.
pub async fn loaded_task_page(
    store: &dyn Store,
    filter: TaskFilter,
) -> Result<TaskPage, StoreError> {
    let rows = store.open_tasks(filter).await?;
    let mut ids: Vec<RunId> = rows.iter().map(|row| row.run).collect();
    let mut seen = std::collections::HashSet::new();
    ids.retain(|run| seen.insert(*run));
    let mut specs: HashMap<String, Spec> = HashMap::new();
    let mut absent: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut open: HashMap<(RunId, usize), TaskInfo> = HashMap::new();
    let mut runs = HashMap::new();
    for stored in store.load_many(&ids).await? {
        if stored.record.status != RunStatus::Running {
            continue;
        }
        let fingerprint = &stored.record.fingerprint;
        if !specs.contains_key(fingerprint) && !absent.contains(fingerprint) {
            match stored_spec(store, fingerprint).await? {
                Some(spec) => specs.insert(fingerprint.clone(), spec),
                None => {
                    absent.insert(fingerprint.clone());
                    None
                }
            };
        }
        let Some(spec) = specs.get(fingerprint) else {
            continue;
        };
        for task in tasks_of(spec, &stored) {
            if let Some(step) = spec.step_index(&task.step) {
                open.insert((stored.record.id, step), task);
            }
        }
        runs.insert(stored.record.id, stored);
    }
    let tasks = rows
        .iter()
        .filter_map(|row| open.remove(&(row.run, row.step)))
        .collect();
    Ok(TaskPage {
        rows,
        tasks,
        runs,
        specs,
    })
}

/// The open human tasks of every running run in the store, oldest run first, from each
/// run's journal replayed on the spec recorded for it. Runs whose spec the store does not
/// hold are left out.
pub async fn open_tasks(store: &dyn Store) -> Result<Vec<TaskInfo>, StoreError> {
    let mut runs = store
        .runs(RunFilter {
            status: Some(RunStatus::Running),
            ..RunFilter::default()
        })
        .await?;
    runs.reverse();
    let mut specs: HashMap<String, Option<Spec>> = HashMap::new();
    let mut tasks = Vec::new();
    for record in runs {
        if !specs.contains_key(&record.fingerprint) {
            let spec = stored_spec(store, &record.fingerprint).await?;
            specs.insert(record.fingerprint.clone(), spec);
        }
        let Some(Some(spec)) = specs.get(&record.fingerprint) else {
            continue;
        };
        let Some(stored) = store.load(record.id).await? else {
            continue;
        };
        tasks.extend(tasks_of(spec, &stored));
    }
    Ok(tasks)
}

/// The open human tasks of one run.
pub fn tasks_of(spec: &Spec, stored: &StoredRun) -> Vec<TaskInfo> {
    let machine = Machine::replay(spec, &stored.events);
    // The prompt the person was asked, as journaled when the task opened.
    let asked = |step: usize| {
        stored.events.iter().rev().find_map(|event| match event {
            Event::TaskOpened {
                step: s, prompt, ..
            } if *s == step => Some(prompt.clone()),
            _ => None,
        })
    };
    machine
        .open_tasks()
        .map(|(step, assignee, deadline, escalated, prompt)| TaskInfo {
            run: stored.record.id,
            workflow: stored.record.workflow.clone(),
            step: spec.steps[step].id.clone(),
            assignee: assignee.to_owned(),
            prompt: asked(step).unwrap_or_else(|| prompt.map(str::to_owned)),
            deadline,
            escalated,
        })
        .collect()
}

//! `workflow runs list | show | cancel | restart`: runs as the store lists them, one run
//! explained from its journal (replayed through the same state machine the engine uses,
//! when the store has the run's spec), and the operator's cancel and restart, which are
//! the engine's own operations ([`workflow_core::admin`]).

use serde_json::{json, Value};
use workflow_core::admin;
use workflow_core::machine::{Machine, StepState};
use workflow_core::spec::Spec;
use workflow_core::store::{RunFilter, RunRecord, RunStatus, Store, StoredRun};
use workflow_core::RunId;
use workflow_spec::render::{mermaid_with_states, StepMark};
use workflow_spec::StepKind;

use crate::cli::{OperatorArgs, RunsListArgs, RunsShowArgs};
use crate::error::{CliError, Result};
use crate::store::Specs;
use crate::text::{now_ms, rfc3339, short, table, timestamp};

mod report;
use report::Report;

/// Runs `workflow runs list`.
pub async fn list(store: &dyn Store, args: &RunsListArgs, json: bool) -> Result<String> {
    let filter = RunFilter {
        workflow: args.workflow.clone(),
        status: args.status.map(Into::into),
        before: args.after,
        limit: Some(args.limit.saturating_add(1)),
        search: args.conditions.clone(),
    };
    let mut runs = store.runs(filter).await?;
    let more = runs.len() > args.limit;
    runs.truncate(args.limit);
    // The cursor of the next page: the oldest run of this one, when more runs exist.
    let next = runs.last().filter(|_| more).map(|run| run.id);
    if json {
        let runs: Vec<Value> = runs.iter().map(record_json).collect();
        let page = json!({
            "runs": runs,
            "more": more,
            "next": next.map(|run| run.to_string()),
        });
        return Ok(format!("{page:#}\n"));
    }
    if runs.is_empty() {
        return Ok("no runs\n".to_owned());
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            vec![
                run.id.to_string(),
                run.workflow.clone(),
                run.status.as_str().to_owned(),
                timestamp(run.created_at),
                timestamp(run.updated_at),
                run.note.as_deref().map_or(String::new(), |n| short(n, 80)),
            ]
        })
        .collect();
    let mut out = table(
        &["RUN", "WORKFLOW", "STATUS", "STARTED", "UPDATED", "NOTE"],
        &rows,
    );
    if let Some(next) = next {
        out.push_str(&format!(
            "more runs: the next page with --after {next} (or a larger --limit)\n"
        ));
    }
    Ok(out)
}

/// A run's row as JSON.
pub fn record_json(run: &RunRecord) -> Value {
    json!({
        "run": run.id.to_string(),
        "id": run.id.0,
        "workflow": run.workflow,
        "status": run.status.as_str(),
        "fingerprint": run.fingerprint,
        "idempotency_key": run.idempotency_key,
        "note": run.note,
        "created_at": run.created_at,
        "created": rfc3339(run.created_at),
        "updated_at": run.updated_at,
        "updated": rfc3339(run.updated_at),
    })
}

/// Loads a run, or fails with `unknown run run-7`.
pub async fn load(store: &dyn Store, run: RunId) -> Result<StoredRun> {
    store
        .load(run)
        .await?
        .ok_or_else(|| CliError::new(format!("unknown run {run}")))
}

/// Runs `workflow runs show`.
pub async fn show(store: &dyn Store, args: &RunsShowArgs, json: bool) -> Result<String> {
    let stored = load(store, args.run).await?;
    let mut specs = Specs::default();
    // Engines record a spec before they start a run under it: a run whose spec cannot be
    // found is a damaged store, not a run to explain without its step names.
    let spec = specs
        .get(store, &stored.record.fingerprint)
        .await?
        .cloned()
        .ok_or_else(|| {
            CliError::new(format!(
                "{} was started under spec {}, which the store does not hold: the store is \
                 damaged (`workflow check` lists what)",
                args.run, stored.record.fingerprint
            ))
        })?;
    if args.diagram {
        return Ok(diagram(&stored, &spec, json));
    }
    // What it waits for (a slot, a token, its turn): best effort, as the store says now.
    let waits = store
        .flow_of(args.run)
        .await
        .map(|flow| workflow_core::store::limits::describe(&flow, Some(&spec)))
        .unwrap_or_default();
    let report = Report::new(&stored, Some(&spec), now_ms()).with_waits(waits);
    Ok(if json {
        format!("{:#}\n", report.json())
    } else {
        report.text()
    })
}

/// The run's state drawn on its Mermaid diagram.
fn diagram(stored: &StoredRun, spec: &Spec, json: bool) -> String {
    let machine = Machine::replay(spec, &stored.events);
    let marks: Vec<StepMark> = machine.states().iter().map(mark).collect();
    let drawn = mermaid_with_states(spec, &marks);
    if !json {
        return drawn;
    }
    let states: serde_json::Map<String, Value> = spec
        .steps
        .iter()
        .zip(&marks)
        .map(|(step, mark)| (step.id.clone(), Value::from(mark.as_str())))
        .collect();
    format!(
        "{:#}\n",
        json!({
            "run": stored.record.id.to_string(),
            "workflow": stored.record.workflow,
            "status": stored.record.status.as_str(),
            "states": states,
            "diagram": drawn,
        })
    )
}

/// How the diagram colours a step state (the machine's [`StepState::mark`]).
pub fn mark(state: &StepState) -> StepMark {
    state.mark()
}

/// Runs `workflow runs cancel`: a parked run is cancelled at once
/// ([`admin::cancel_parked`]); a running one gets a cancellation in its inbox
/// ([`admin::submit_cancel`]) for the engine that drives it.
pub async fn cancel(store: &dyn Store, args: &OperatorArgs, json: bool) -> Result<String> {
    let run = args.run;
    let who = crate::dead::operator(args.who.as_deref());
    let record = load(store, run).await?.record;
    let now = now_ms();
    let (status, text) = match record.status {
        RunStatus::Parked => {
            admin::cancel_parked(store, run, &who, now)
                .await
                .map_err(|e| CliError::new(e.to_string()))?;
            (
                "cancelled",
                format!("{run} ({}) cancelled by {who}.\n", record.workflow),
            )
        }
        RunStatus::Running => {
            let inbox = admin::submit_cancel(store, run, &who, now)
                .await
                .map_err(|e| CliError::new(e.to_string()))?
                .id();
            (
                "submitted",
                format!(
                    "cancellation of {run} by {who} submitted (inbox message {inbox}); the engine \
                     that drives it stops scheduling and compensates.\n"
                ),
            )
        }
        status => {
            return Err(CliError::new(format!(
                "{run} is already finished ({})",
                status.as_str()
            )))
        }
    };
    Ok(if json {
        format!(
            "{:#}\n",
            json!({ "run": run.to_string(), "by": who, "status": status })
        )
    } else {
        text
    })
}

/// Runs `workflow runs restart`: [`admin::restart_parked`] under the newest registered
/// spec of the run's workflow.
pub async fn restart(store: &dyn Store, args: &OperatorArgs, json: bool) -> Result<String> {
    let run = args.run;
    let who = crate::dead::operator(args.who.as_deref());
    let record = load(store, run).await?.record;
    if record.status != RunStatus::Parked {
        return Err(CliError::new(format!(
            "{run} is {}, not parked: only parked runs are restarted",
            record.status.as_str()
        )));
    }
    let newest = store
        .specs(&record.workflow)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| {
            CliError::new(format!(
                "no engine registered `{}` in this store: nothing to restart onto",
                record.workflow
            ))
        })?;
    if newest.fingerprint == record.fingerprint {
        return Err(CliError::new(format!(
            "{run} already runs on the newest registered spec of `{}` ({}): cancel it instead",
            record.workflow, newest.fingerprint
        )));
    }
    let now = now_ms();
    let new = admin::restart_parked(store, run, &who, now, &newest.fingerprint, now)
        .await
        .map_err(|e| CliError::new(e.to_string()))?;
    Ok(if json {
        format!(
            "{:#}\n",
            json!({
                "run": run.to_string(),
                "restarted_as": new.to_string(),
                "fingerprint": newest.fingerprint,
                "by": who,
            })
        )
    } else {
        format!(
            "{run} restarted by {who} as {new} under spec {}; an engine with `{}` registered \
             takes it up.\n",
            newest.fingerprint, record.workflow
        )
    })
}

/// A decision for people: `approved ("fine")`, `rejected`, or its JSON.
pub fn decision_text(decision: &Value) -> String {
    match decision.get("approved").and_then(Value::as_bool) {
        Some(approved) => {
            let verdict = if approved { "approved" } else { "rejected" };
            match decision.get("comment").and_then(Value::as_str) {
                Some(comment) => format!("{verdict} ({:?})", short(comment, 100)),
                None => verdict.to_owned(),
            }
        }
        None => short(&decision.to_string(), 120),
    }
}

/// Whether a step's decision type is the default `Approval`.
pub fn is_approval(spec: &Spec, step: usize) -> bool {
    spec.steps.get(step).is_some_and(|step| {
        matches!(step.kind, StepKind::Human(_))
            && (step.output == "Approval" || step.output.ends_with("::Approval"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_read_as_verdicts() {
        assert_eq!(
            decision_text(&json!({"approved": true, "by": "a", "comment": "fine"})),
            "approved (\"fine\")"
        );
        assert_eq!(
            decision_text(&json!({"approved": false, "by": "a", "comment": null})),
            "rejected"
        );
        assert_eq!(decision_text(&json!({"tier": 2})), "{\"tier\":2}");
    }

    #[test]
    fn states_map_to_marks() {
        assert_eq!(mark(&StepState::Pending), StepMark::Pending);
        assert_eq!(
            mark(&StepState::RetryWait {
                attempt: 1,
                until: 0
            }),
            StepMark::Running
        );
        assert_eq!(mark(&StepState::Succeeded), StepMark::Done);
    }
}

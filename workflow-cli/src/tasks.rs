//! `workflow tasks`: the open human tasks of running runs, and deciding them.
//!
//! A decision is checked by the run's machine exactly as the engine checks one (the task
//! must be open, not past its deadline, not decided before), then left in the run's inbox.
//! The engine that drives the run takes it in, admits the approver with its own authorizer
//! and journals the decision, or a refusal that `workflow runs show` lists. A running
//! engine takes it in within a second; a stopped one when it resumes. `--wait` waits for
//! that outcome.

use std::time::Duration;

use serde_json::{json, Value};
use workflow_core::admin;
use workflow_core::journal::Event;
use workflow_core::spec::Spec;
use workflow_core::store::{Store, TaskFilter};
use workflow_core::{DecisionError, RunId};

use crate::cli::TaskRef;
use crate::error::{CliError, Result};
use crate::runs::{decision_text, is_approval, load};
use crate::store::Specs;
use crate::text::{duration, now_ms, relative, rfc3339, short, table, timestamp};

/// How often `--wait` looks at the journal.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// Runs `workflow tasks list`: the store's open-task index, soonest deadline first, each
/// task as its run's machine has it (only the runs with open tasks are read).
pub async fn list(store: &dyn Store, json: bool) -> Result<String> {
    let (_, tasks) = admin::task_page(store, TaskFilter::default()).await?;

    let now = now_ms();
    if json {
        let tasks: Vec<Value> = tasks
            .iter()
            .map(|task| {
                json!({
                    "task": format!("{}/{}", task.run, task.step),
                    "run": task.run.to_string(),
                    "workflow": task.workflow,
                    "step": task.step,
                    "assignee": task.assignee,
                    "deadline_at": task.deadline,
                    "deadline": rfc3339(task.deadline),
                    "overdue": task.deadline <= now,
                    "escalated": task.escalated,
                    "prompt": task.prompt,
                })
            })
            .collect();
        return Ok(format!("{:#}\n", Value::Array(tasks)));
    }
    if tasks.is_empty() {
        return Ok("no open tasks\n".to_owned());
    }
    let rows: Vec<Vec<String>> = tasks
        .iter()
        .map(|task| {
            let due = if task.deadline <= now {
                format!(
                    "{} (overdue by {})",
                    timestamp(task.deadline),
                    duration(now - task.deadline)
                )
            } else {
                format!(
                    "{} ({})",
                    timestamp(task.deadline),
                    relative(task.deadline, now)
                )
            };
            let assignee = if task.escalated {
                format!("{} (escalated)", task.assignee)
            } else {
                task.assignee.clone()
            };
            vec![
                format!("{}/{}", task.run, task.step),
                task.workflow.clone(),
                assignee,
                due,
                task.prompt
                    .as_deref()
                    .map_or(String::new(), |p| short(p, 80)),
            ]
        })
        .collect();
    Ok(table(
        &["TASK", "WORKFLOW", "ASSIGNEE", "DEADLINE", "PROMPT"],
        &rows,
    ))
}

/// What to decide.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// `tasks approve` / `tasks reject`: an `Approval`.
    Approval {
        /// Approved or rejected.
        approved: bool,
        /// The comment.
        comment: Option<String>,
    },
    /// `tasks decide`: a decision of any type, as JSON.
    Json(Value),
}

/// Runs `workflow tasks approve | reject | decide`.
pub async fn decide(
    store: &dyn Store,
    task: &TaskRef,
    who: &str,
    verdict: &Verdict,
    wait: Option<u64>,
    json: bool,
) -> Result<String> {
    let who = who.trim();
    if who.is_empty() {
        return Err(CliError::new("--as needs a name: who decides"));
    }
    let stored = load(store, task.run).await?;
    let mut specs = Specs::default();
    let spec = specs
        .get(store, &stored.record.fingerprint)
        .await?
        .ok_or_else(|| {
            CliError::new(format!(
                "cannot check task {task}: the store has no spec recorded for {} \
                 (fingerprint {}); decide it through the engine",
                task.run, stored.record.fingerprint
            ))
        })?;
    let step = human_step(spec, task, &stored.record.workflow)?;
    let decision = decision(spec, step, task, who, verdict)?;
    let now = now_ms();
    let submitted = admin::submit_decision(
        store,
        task.run,
        spec,
        &task.step,
        who,
        decision.clone(),
        None,
        now,
    )
    .await
    .map_err(|error| refusal(task, &error))?;
    let inbox = submitted.id();
    let outcome = match wait {
        Some(seconds) => Some(wait_for_outcome(store, task.run, inbox, seconds).await?),
        None => None,
    };
    let status = match &outcome {
        None => "submitted",
        Some(Event::TaskDecided { .. }) => "decided",
        Some(_) => "refused",
    };
    let refused = match &outcome {
        Some(Event::MessageRefused { code, reason, .. }) => Some((code.clone(), reason.clone())),
        _ => None,
    };
    let out = if json {
        format!(
            "{:#}\n",
            json!({
                "task": task.to_string(),
                "run": task.run.to_string(),
                "step": task.step,
                "by": who,
                "decision": decision,
                "inbox": inbox,
                "at": now,
                "status": status,
                "refused": refused.as_ref().map(|(code, reason)| json!({ "code": code, "reason": reason })),
            })
        )
    } else {
        let mut out = format!(
            "{task}: {} by {who} submitted (inbox message {inbox}).\n",
            decision_text(&decision)
        );
        match &outcome {
            None => out.push_str(&format!(
                "The engine that drives {} admits it with its authorizer and journals the \
                 outcome (`workflow runs show {}`); a running engine takes it in within a \
                 second, a stopped one when it resumes.\n",
                task.run, task.run
            )),
            Some(Event::TaskDecided { .. }) => out.push_str("Admitted: the task is decided.\n"),
            Some(_) => {}
        }
        out
    };
    match refused {
        Some((code, reason)) => Err(CliError::new(format!(
            "the engine refused the decision for {task} ({code}): {reason}"
        ))),
        None => Ok(out),
    }
}

/// The index of the human step a task names, or why it is not one.
fn human_step(spec: &Spec, task: &TaskRef, workflow: &str) -> Result<usize> {
    let run = task.run;
    let Some(step) = spec.step_index(&task.step) else {
        let humans: Vec<String> = spec
            .steps
            .iter()
            .filter(|s| s.is_human())
            .map(|s| format!("`{}`", s.id))
            .collect();
        return Err(CliError::new(format!(
            "{run} ({workflow}) has no step `{}`; its human steps: {}",
            task.step,
            if humans.is_empty() {
                "none".to_owned()
            } else {
                humans.join(", ")
            }
        )));
    };
    if !spec.steps[step].is_human() {
        return Err(CliError::new(format!(
            "`{}` of {run} is an action step, not a human task",
            task.step
        )));
    }
    Ok(step)
}

/// The machine's refusal, said for the command line.
fn refusal(task: &TaskRef, error: &DecisionError) -> CliError {
    match error {
        DecisionError::AlreadyDecided { by, .. } => CliError::new(format!(
            "task {task} was already decided by {by}; the first decision stands"
        )),
        DecisionError::Expired { .. } => CliError::new(format!(
            "task {task} is past its deadline; the engine applies its on_timeout"
        )),
        DecisionError::Finished(run) => CliError::new(format!(
            "{run} is not running (finished or parked); task `{}` cannot be decided",
            task.step
        )),
        DecisionError::UnknownTask { run, step } => CliError::new(format!(
            "{run} has no open task `{step}` (not opened yet, or skipped)"
        )),
        other => CliError::new(other.to_string()),
    }
}

/// The decision to submit: an `Approval` for `approve` / `reject`, the given JSON for
/// `decide` (the engine checks it against the step's type when it takes it in).
fn decision(
    spec: &Spec,
    step: usize,
    task: &TaskRef,
    who: &str,
    verdict: &Verdict,
) -> Result<Value> {
    match verdict {
        Verdict::Approval { approved, comment } => {
            if !is_approval(spec, step) {
                let output = &spec.steps[step].output;
                return Err(CliError::new(format!(
                    "task {task} is decided with a `{output}`, not an Approval; \
                     use `workflow tasks decide {task} --as {who} --decision JSON`"
                )));
            }
            Ok(json!({ "approved": approved, "by": who, "comment": comment }))
        }
        Verdict::Json(value) => Ok(value.clone()),
    }
}

/// Waits until the run's journal records what became of inbox message `inbox`.
async fn wait_for_outcome(
    store: &dyn Store,
    run: RunId,
    inbox: u64,
    seconds: u64,
) -> Result<Event> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        let stored = store
            .load(run)
            .await?
            .ok_or_else(|| CliError::new(format!("unknown run {run}")))?;
        if let Some(event) = stored.events.into_iter().find(|e| e.inbox() == Some(inbox)) {
            return Ok(event);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(CliError::new(format!(
                "no engine took the decision in within {seconds} s; it stays in the inbox of {run} \
                 until the engine that drives it does"
            )));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_spec::parse::parse_str;

    fn spec() -> Spec {
        parse_str(
            r#"workflow T() {
                step a -> () { action: f() }
                human review -> Approval {
                    assignee: "mods",
                    depends_on: [a],
                    timeout: 1h,
                    on_timeout: escalate("leads"),
                }
            }"#,
        )
        .spec
        .expect("a valid spec")
    }

    fn task(step: &str) -> TaskRef {
        TaskRef {
            run: RunId(7),
            step: step.to_owned(),
        }
    }

    #[test]
    fn a_task_must_name_a_human_step() {
        let spec = spec();
        assert_eq!(human_step(&spec, &task("review"), "T").expect("human"), 1);
        let error = human_step(&spec, &task("nope"), "T").expect_err("unknown");
        assert!(
            error.message.contains("its human steps: `review`"),
            "{error:?}"
        );
        let error = human_step(&spec, &task("a"), "T").expect_err("an action");
        assert!(error.message.contains("is an action step"), "{error:?}");
    }

    #[test]
    fn approvals_are_built_for_approval_steps_and_json_is_passed_on() {
        let spec = spec();
        let approve = Verdict::Approval {
            approved: true,
            comment: Some("fine".to_owned()),
        };
        assert_eq!(
            decision(&spec, 1, &task("review"), "ana@mods", &approve).expect("built"),
            json!({"approved": true, "by": "ana@mods", "comment": "fine"})
        );
        let given = json!({"approved": false, "extra": 1});
        assert_eq!(
            decision(
                &spec,
                1,
                &task("review"),
                "ana@mods",
                &Verdict::Json(given.clone())
            )
            .expect("passed on"),
            given
        );
        let tiered = parse_str(
            r#"workflow T() { human pick -> Tier { assignee: "a", timeout: 1h, on_timeout: abort } }"#,
        )
        .spec
        .expect("a valid spec");
        let error =
            decision(&tiered, 0, &task("pick"), "a", &approve).expect_err("not an Approval");
        assert!(error.message.contains("not an Approval"), "{error:?}");
    }
}

//! `workflow tasks`: the open human tasks of running runs, and deciding them.
//!
//! A decision is checked against the run's journal exactly as the engine checks one: the
//! task must be open (its step `Waiting` after replay), not past its deadline, not decided
//! before, and the approver must be admitted by
//! [`workflow_core::engine::default_authorizer`]. It is then appended
//! as `TaskDecided` at the journal's next sequence number; if another writer (a running
//! engine) took that number first, the journal is reloaded and checked again. A running
//! engine takes the decision in within a second (it polls shared stores while a task is
//! open); a stopped one sees it when it resumes.

use serde_json::{json, Value};
use workflow_core::engine::default_authorizer;
use workflow_core::journal::{Event, Timestamp};
use workflow_core::machine::{Machine, StepState};
use workflow_core::store::{RunFilter, RunRecord, RunStatus, SqliteStore, Store, StoreError};
use workflow_core::{ErrorKind, Spec};
use workflow_spec::StepKind;

use crate::cli::TaskRef;
use crate::error::{CliError, Result};
use crate::runs::{decision_text, is_approval, load};
use crate::store::{step_name, Specs};
use crate::text::{duration, now_ms, relative, rfc3339, short, table, timestamp};

/// How many runs a scan handles before it reports progress.
const PROGRESS_ABOVE: usize = 300;
/// How often a long scan reports progress, in runs.
const PROGRESS_EVERY: usize = 250;
/// How many times a decision is re-checked after losing a race to another writer.
const CONFLICT_RETRIES: usize = 20;

/// An open human task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTask {
    /// The run's row.
    pub run: RunRecord,
    /// The step's id (`#N` when the store has no spec for the run).
    pub step: String,
    /// Who may decide now.
    pub assignee: String,
    /// When the task times out.
    pub deadline: Timestamp,
    /// Whether it was escalated.
    pub escalated: bool,
    /// What to show the approver.
    pub prompt: Option<String>,
}

/// The open tasks of one run: from the replayed machine when the spec is known, else
/// from the journal alone (opened or escalated, and neither decided nor expired since).
pub fn open_tasks(run: &RunRecord, spec: Option<&Spec>, events: &[Event]) -> Vec<OpenTask> {
    let prompt_of = |step: usize| {
        let journaled = events.iter().rev().find_map(|event| match event {
            Event::TaskOpened {
                step: s, prompt, ..
            } if *s == step => Some(prompt.clone()),
            _ => None,
        });
        journaled.flatten().or_else(|| {
            spec.and_then(|spec| match &spec.steps.get(step)?.kind {
                StepKind::Human(human) => human.prompt.clone(),
                StepKind::Action(_) | StepKind::Child(_) | StepKind::Event(_) => None,
            })
        })
    };
    let task = |step: usize, assignee: &str, deadline: Timestamp, escalated: bool| OpenTask {
        run: run.clone(),
        step: step_name(spec, step),
        assignee: assignee.to_owned(),
        deadline,
        escalated,
        prompt: prompt_of(step),
    };
    if let Some(spec) = spec {
        let machine = Machine::replay(spec, events);
        return machine
            .states()
            .iter()
            .enumerate()
            .filter_map(|(step, state)| match state {
                StepState::Waiting {
                    assignee,
                    deadline,
                    escalated,
                } => Some(task(step, assignee, *deadline, *escalated)),
                _ => None,
            })
            .collect();
    }
    // Without the spec: the journal's last word on each step.
    let mut open: Vec<(usize, String, Timestamp, bool)> = Vec::new();
    for event in events {
        match event {
            Event::TaskOpened {
                step,
                assignee,
                deadline,
                ..
            } => {
                open.retain(|(s, ..)| s != step);
                open.push((*step, assignee.clone(), *deadline, false));
            }
            Event::TaskEscalated {
                step, to, deadline, ..
            } => {
                open.retain(|(s, ..)| s != step);
                open.push((*step, to.clone(), *deadline, true));
            }
            Event::TaskDecided { step, .. } | Event::TaskExpired { step, .. } => {
                open.retain(|(s, ..)| s != step);
            }
            _ => {}
        }
    }
    open.sort_by_key(|(step, ..)| *step);
    open.iter()
        .map(|(step, assignee, deadline, escalated)| task(*step, assignee, *deadline, *escalated))
        .collect()
}

/// Runs `workflow tasks list`.
pub async fn list(store: &SqliteStore, json: bool) -> Result<String> {
    let mut runs = store
        .runs(RunFilter {
            status: Some(RunStatus::Running),
            ..RunFilter::default()
        })
        .await?;
    // Oldest run first: the longest waiting task on top.
    runs.reverse();
    let total = runs.len();
    let progress = total > PROGRESS_ABOVE;
    if progress {
        eprintln!("scanning {total} running runs for open tasks...");
    }
    let mut specs = Specs::default();
    let mut tasks = Vec::new();
    for (done, run) in runs.iter().enumerate() {
        if progress && done > 0 && done % PROGRESS_EVERY == 0 {
            eprintln!("  {done}/{total} runs scanned, {} open tasks", tasks.len());
        }
        let Some(stored) = store.load(run.id).await? else {
            continue; // removed meanwhile
        };
        let spec = specs.get(store, &run.fingerprint).await?;
        tasks.extend(open_tasks(&stored.record, spec, &stored.events));
    }
    if progress {
        eprintln!("  {total}/{total} runs scanned, {} open tasks", tasks.len());
    }

    let now = now_ms();
    if json {
        let tasks: Vec<Value> = tasks
            .iter()
            .map(|task| {
                json!({
                    "task": format!("{}/{}", task.run.id, task.step),
                    "run": task.run.id.to_string(),
                    "workflow": task.run.workflow,
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
                format!("{}/{}", task.run.id, task.step),
                task.run.workflow.clone(),
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
    store: &SqliteStore,
    task: &TaskRef,
    who: &str,
    verdict: &Verdict,
    json: bool,
) -> Result<String> {
    let who = who.trim();
    if who.is_empty() {
        return Err(CliError::new("--as needs a name: who decides"));
    }
    let mut specs = Specs::default();
    for _ in 0..CONFLICT_RETRIES {
        let stored = load(store, task.run).await?;
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
        let now = now_ms();
        let checked = check(&stored.record, spec, &stored.events, task, who, now)?;
        let decision = decision(spec, checked.step, task, who, verdict)?;
        let event = Event::TaskDecided {
            step: checked.step,
            by: who.to_owned(),
            decision: decision.clone(),
            at: now,
        };
        let seq = stored.events.len() as u64;
        match store.append(task.run, seq, &event).await {
            Ok(()) => {
                return Ok(if json {
                    format!(
                        "{:#}\n",
                        json!({
                            "task": task.to_string(),
                            "run": task.run.to_string(),
                            "step": task.step,
                            "by": who,
                            "decision": decision,
                            "at": now,
                            "seq": seq,
                        })
                    )
                } else {
                    format!(
                        "{}: {} by {who} (assigned to {}).\n\
                         A running engine takes the decision in within a second; a stopped one \
                         when it resumes.\n",
                        task,
                        decision_text(&decision),
                        checked.assignee
                    )
                });
            }
            // A running engine wrote first: look again.
            Err(StoreError::Conflict { .. }) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(CliError::new(format!(
        "{} keeps changing under us; try again",
        task.run
    )))
}

/// A task that may be decided now.
#[derive(Debug)]
struct Checked {
    step: usize,
    assignee: String,
}

/// The engine's rules for a decision, applied to a journal.
fn check(
    record: &RunRecord,
    spec: &Spec,
    events: &[Event],
    task: &TaskRef,
    who: &str,
    now: Timestamp,
) -> Result<Checked> {
    let run = record.id;
    let Some(step) = spec.step_index(&task.step) else {
        let humans: Vec<String> = spec
            .steps
            .iter()
            .filter(|s| s.is_human())
            .map(|s| format!("`{}`", s.id))
            .collect();
        return Err(CliError::new(format!(
            "{run} ({}) has no step `{}`; its human steps: {}",
            record.workflow,
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
    let machine = Machine::replay(spec, events);
    let state = &machine.states()[step];
    let decided_by = events.iter().rev().find_map(|event| match event {
        Event::TaskDecided { step: s, by, .. } if *s == step => Some(by.as_str()),
        _ => None,
    });
    match (state, decided_by) {
        (StepState::Succeeded, Some(by)) => {
            return Err(CliError::new(format!(
                "task {task} was already decided by {by}; the first decision stands"
            )))
        }
        (
            StepState::Failed {
                kind: ErrorKind::Timeout,
                ..
            },
            _,
        ) => {
            return Err(CliError::new(format!(
                "task {task} expired before a decision arrived"
            )))
        }
        _ => {}
    }
    match record.status {
        RunStatus::Running => {}
        RunStatus::Parked => {
            return Err(CliError::new(format!(
                "{run} is parked (its spec changed since it started); restart or cancel it first"
            )))
        }
        status => {
            return Err(CliError::new(format!(
                "{run} is finished ({}); task `{}` cannot be decided",
                status.as_str(),
                task.step
            )))
        }
    }
    let StepState::Waiting {
        assignee, deadline, ..
    } = state
    else {
        return Err(CliError::new(format!(
            "{run} has no open task `{}` (the step is {})",
            task.step,
            state.name()
        )));
    };
    if now >= *deadline {
        return Err(CliError::new(format!(
            "task {task} is past its deadline ({}, {} ago); the engine applies its on_timeout",
            timestamp(*deadline),
            duration(now - deadline)
        )));
    }
    if !default_authorizer(assignee, who) {
        return Err(CliError::new(format!(
            "{who} may not decide task {task} assigned to {assignee} \
             (the assignee itself, or name@{assignee}, may)"
        )));
    }
    Ok(Checked {
        step,
        assignee: assignee.clone(),
    })
}

/// The decision to journal, shaped as the engine shapes it: `by` is the approver.
fn decision(
    spec: &Spec,
    step: usize,
    task: &TaskRef,
    who: &str,
    verdict: &Verdict,
) -> Result<Value> {
    let approval = is_approval(spec, step);
    let output = &spec.steps[step].output;
    match verdict {
        Verdict::Approval { approved, comment } => {
            if !approval {
                return Err(CliError::new(format!(
                    "task {task} is decided with a `{output}`, not an Approval; \
                     use `workflow tasks decide {task} --as {who} --decision JSON`"
                )));
            }
            Ok(json!({ "approved": approved, "by": who, "comment": comment }))
        }
        Verdict::Json(value) => {
            let mut value = value.clone();
            if approval {
                let shaped = value.get("approved").is_some_and(Value::is_boolean)
                    && value
                        .get("comment")
                        .is_none_or(|c| c.is_null() || c.is_string());
                if !shaped {
                    return Err(CliError::new(format!(
                        "task {task} is decided with an Approval: \
                         {{\"approved\": true|false, \"comment\": \"...\"}} \
                         (or use `tasks approve` / `tasks reject`)"
                    )));
                }
                value["by"] = Value::from(who);
                if value.get("comment").is_none() {
                    value["comment"] = Value::Null;
                }
            } else if let Some(by) = value.get_mut("by") {
                *by = Value::from(who);
            }
            Ok(value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_core::RunId;
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

    fn record(status: RunStatus) -> RunRecord {
        RunRecord {
            id: RunId(7),
            workflow: "T".to_owned(),
            fingerprint: "f".to_owned(),
            status,
            idempotency_key: None,
            note: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    /// A journal up to the review opening, due at `deadline`.
    fn opened(deadline: Timestamp) -> Vec<Event> {
        vec![
            Event::RunStarted {
                workflow: "T".to_owned(),
                fingerprint: "f".to_owned(),
                input: json!({}),
                seed: 1,
                trace_id: "t".to_owned(),
                dry_run: false,
                deadline: None,
                at: 0,
            },
            Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at: 1,
            },
            Event::StepSucceeded {
                step: 0,
                output: Value::Null,
                at: 2,
            },
            Event::TaskOpened {
                step: 1,
                assignee: "mods".to_owned(),
                prompt: Some("ok?".to_owned()),
                deadline,
                at: 3,
            },
        ]
    }

    fn task() -> TaskRef {
        TaskRef {
            run: RunId(7),
            step: "review".to_owned(),
        }
    }

    fn refused(status: RunStatus, events: &[Event], who: &str, now: Timestamp) -> String {
        check(&record(status), &spec(), events, &task(), who, now)
            .expect_err("refused")
            .message
    }

    #[test]
    fn an_open_task_is_decided_by_a_member_before_its_deadline() {
        let events = opened(1000);
        let checked = check(
            &record(RunStatus::Running),
            &spec(),
            &events,
            &task(),
            "ana@mods",
            999,
        )
        .expect("admitted");
        assert_eq!((checked.step, checked.assignee.as_str()), (1, "mods"));
        let running = RunStatus::Running;
        assert!(refused(running, &events, "ana@mods", 1000).contains("past its deadline"));
        assert!(refused(running, &events, "eve@other", 10).contains("eve@other may not decide"));
        assert!(refused(running, &events, "@mods", 10).contains("may not decide"));
        assert!(refused(RunStatus::Parked, &events, "mods", 10).contains("is parked"));
        assert!(refused(RunStatus::Cancelled, &events, "mods", 10).contains("is finished"));
    }

    #[test]
    fn decided_expired_escalated_and_unopened_tasks() {
        let running = RunStatus::Running;
        let mut decided = opened(1000);
        decided.push(Event::TaskDecided {
            step: 1,
            by: "ana@mods".to_owned(),
            decision: json!({"approved": true, "by": "ana@mods", "comment": null}),
            at: 5,
        });
        assert!(refused(running, &decided, "bob@mods", 10).contains("already decided by ana@mods"));
        assert!(refused(RunStatus::Completed, &decided, "bob@mods", 10)
            .contains("already decided by ana@mods"));

        let mut expired = opened(1000);
        expired.push(Event::TaskExpired { step: 1, at: 1000 });
        assert!(refused(running, &expired, "ana@mods", 1001).contains("expired"));

        let mut escalated = opened(1000);
        escalated.push(Event::TaskEscalated {
            step: 1,
            to: "leads".to_owned(),
            deadline: 5000,
            at: 1000,
        });
        assert!(refused(running, &escalated, "ana@mods", 1001).contains("assigned to leads"));
        let checked = check(
            &record(running),
            &spec(),
            &escalated,
            &task(),
            "bob@leads",
            1001,
        )
        .expect("the new assignee decides");
        assert_eq!(checked.assignee, "leads");

        let unopened = &opened(1000)[..3];
        assert!(refused(running, unopened, "ana@mods", 10).contains("no open task `review`"));
    }

    #[test]
    fn decisions_are_shaped_as_the_engine_shapes_them() {
        let spec = spec();
        let approve = Verdict::Approval {
            approved: true,
            comment: Some("fine".to_owned()),
        };
        assert_eq!(
            decision(&spec, 1, &task(), "ana@mods", &approve).expect("shaped"),
            json!({"approved": true, "by": "ana@mods", "comment": "fine"})
        );
        let json = Verdict::Json(json!({"approved": false, "by": "me"}));
        assert_eq!(
            decision(&spec, 1, &task(), "ana@mods", &json).expect("shaped"),
            json!({"approved": false, "by": "ana@mods", "comment": null})
        );
        let wrong = Verdict::Json(json!({"approved": "yes"}));
        assert!(decision(&spec, 1, &task(), "ana@mods", &wrong).is_err());
    }

    #[test]
    fn open_tasks_come_from_the_machine_or_from_the_journal_alone() {
        let events = opened(1000);
        let run = record(RunStatus::Running);
        let with_spec = open_tasks(&run, Some(&spec()), &events);
        let without = open_tasks(&run, None, &events);
        assert_eq!(with_spec.len(), 1);
        assert_eq!(with_spec[0].step, "review");
        assert_eq!(with_spec[0].prompt.as_deref(), Some("ok?"));
        assert_eq!(without.len(), 1);
        assert_eq!(without[0].step, "#1");
        assert_eq!(
            (without[0].assignee.as_str(), without[0].deadline),
            ("mods", 1000)
        );
        let mut decided = events;
        decided.push(Event::TaskDecided {
            step: 1,
            by: "mods".to_owned(),
            decision: json!({"approved": true}),
            at: 5,
        });
        assert!(open_tasks(&run, None, &decided).is_empty());
        assert!(open_tasks(&run, Some(&spec()), &decided).is_empty());
    }
}

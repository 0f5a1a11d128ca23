//! One task's card: its title, prompt, deadline, what happens at the deadline, the
//! approvals so far, its context (payloads when shown) and its decision form. Drawn on the
//! inbox's pages and on a run's page.

use maud::{html, Markup};
use serde_json::Value;
use workflow_core::journal::Event;
use workflow_core::spec::{OnTimeout, Spec, StepKind};
use workflow_core::{DecisionError, TaskInfo};

use crate::auth::Identity;
use crate::html::{time, words};
use crate::present::present;
use crate::view::REDACTED;
use crate::App;

/// One task: prompt, context (payloads if `show`), deadline and escalation, and its
/// decision form.
#[allow(clippy::too_many_arguments)] // one card, drawn from what the page loaded
pub(super) fn task_card(
    app: &App,
    who: &Identity,
    task: &TaskInfo,
    spec: &Spec,
    events: &[Event],
    show: bool,
    link_run: bool,
) -> Markup {
    let index = spec.step_index(&task.step);
    let id = format!("task-{}-{}", task.run, task.step);
    let now = app.engine.now();
    let presented = present(spec, events, &task.step, show);
    let heading = presented
        .title
        .clone()
        .unwrap_or_else(|| format!("{} for {}", words(&task.step), task.assignee));
    let assignee = if task.escalated {
        format!("{} (escalated)", task.assignee)
    } else {
        task.assignee.clone()
    };
    html! {
        section class="task" id=(id) {
            h2 class="title" { (heading) }
            p class="meta" { (task.workflow) " · " (task.run) " · due " (time(now, task.deadline)) }
            p class="prompt" { (task.prompt.as_deref().unwrap_or("(no prompt)")) }
            table {
                @if link_run {
                    tr { th { "Run" } td { a href={ (app.base) "/inbox/runs/" (task.run) } { (task.run) } } }
                }
                tr { th { "Assigned to" } td { (assignee) } }
                @if let Some(since) = index.and_then(|step| opened_at(events, step)) {
                    tr { th { "Waiting since" } td { (time(now, since)) } }
                }
                tr { th { "Deadline" } td class="deadline" { (time(now, task.deadline)) } }
                tr { th { "At the deadline" } td { (on_timeout(spec, index, task.escalated)) } }
                (presented.quorum_row(&format!("{id}-approvals")))
            }
            @if !presented.shown.is_empty() {
                table class="shown" { (presented.shown_rows()) }
            }
            (context(spec, index, events, show))
            (decision_form(app, who, task, spec, index, events))
        }
    }
}

/// When the task of step `step` was last opened or escalated.
fn opened_at(events: &[Event], step: usize) -> Option<u64> {
    events.iter().rev().find_map(|event| match event {
        Event::TaskOpened { step: s, at, .. } | Event::TaskEscalated { step: s, at, .. }
            if *s == step =>
        {
            Some(*at)
        }
        _ => None,
    })
}

fn on_timeout(spec: &Spec, index: Option<usize>, escalated: bool) -> String {
    let human = index
        .and_then(|i| spec.steps.get(i))
        .and_then(|step| match &step.kind {
            StepKind::Human(human) => Some(human),
            _ => None,
        });
    match human.map(|h| &h.on_timeout) {
        Some(OnTimeout::Escalate(to)) if !escalated => format!("escalates to {to}"),
        Some(OnTimeout::Escalate(_)) => "expires (escalated once already)".to_owned(),
        Some(OnTimeout::Abort) => "expires: the step fails".to_owned(),
        Some(OnTimeout::Approve) => "approved automatically".to_owned(),
        Some(OnTimeout::Reject) => "rejected automatically".to_owned(),
        None => "unknown".to_owned(),
    }
}

/// The run's inputs and the outputs of the steps the task depends on.
fn context(spec: &Spec, index: Option<usize>, events: &[Event], shown: bool) -> Markup {
    let deps = index
        .and_then(|i| spec.steps.get(i))
        .map_or(&[][..], |step| step.deps.as_slice());
    html! {
        details open {
            summary { "Context" }
            table {
                @if let Some(Event::RunStarted { input, .. }) = events.first() {
                    (context_row("inputs", Some(input), shown))
                }
                @for dep in deps {
                    @let output = events.iter().rev().find_map(|event| match event {
                        Event::StepSucceeded { step, output, .. } if step == dep => Some(output),
                        _ => None,
                    });
                    (context_row(spec.steps.get(*dep).map_or("?", |s| s.id.as_str()), output, shown))
                }
            }
        }
    }
}

/// One payload of the context: its fields if shown, redacted otherwise.
fn context_row(name: &str, value: Option<&Value>, shown: bool) -> Markup {
    html! {
        tr {
            th { (name) }
            td {
                @match value {
                    Some(value) if shown => (crate::html::value(value)),
                    Some(_) => pre { (REDACTED) },
                    None => "(no output)",
                }
            }
        }
    }
}

fn is_approval(spec: &Spec, index: Option<usize>) -> bool {
    index
        .and_then(|i| spec.steps.get(i))
        .is_some_and(|step| step.output == "Approval" || step.output.ends_with("::Approval"))
}

/// Why `who` may not act on the task, in words, or `None` if they may decide (and so
/// delegate) it now: the machine's admission, with the engine's authorizer.
fn not_yours(
    app: &App,
    who: &Identity,
    task: &TaskInfo,
    spec: &Spec,
    events: &[Event],
) -> Option<String> {
    let error = app
        .machine_admits(spec, events, task.run, &task.step, who.name())
        .err()?;
    Some(match error {
        DecisionError::AlreadyApproved { .. } => {
            "You approved this already; the rest of its approvals are for others.".to_owned()
        }
        DecisionError::SelfApproval { .. } => {
            "You started this run; someone else decides this task.".to_owned()
        }
        DecisionError::Expired { .. } => "This task is past its deadline.".to_owned(),
        _ => "You may not decide this task.".to_owned(),
    })
}

/// The task's forms, one per action, so Enter in a field submits only its own: the
/// decision (Approve and Reject, a decision form's fields, or JSON) and the delegation.
/// Each asks once before it records anything (`confirm=ask`). Someone the machine would
/// refuse sees why instead of buttons.
fn decision_form(
    app: &App,
    who: &Identity,
    task: &TaskInfo,
    spec: &Spec,
    index: Option<usize>,
    events: &[Event],
) -> Markup {
    if let Some(why) = not_yours(app, who, task, spec, events) {
        return html! { p class="meta not-yours" { (why) } };
    }
    let action = format!("{}/inbox/runs/{}/tasks/{}", app.base, task.run, task.step);
    let csrf = app.csrf.token(who);
    html! {
        form method="post" action=(action) class="decide" {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="confirm" value="ask";
            @if let Some(fields) = app.engine.decision_form(&task.workflow, &task.step) {
                (crate::form::render(&fields))
                button type="submit" name="verdict" value="form" class="approve" { "Decide" }
            } @else if is_approval(spec, index) {
                label { "Comment" textarea name="comment" {} }
                button type="submit" name="verdict" value="approve" class="approve" { "Approve" }
                button type="submit" name="verdict" value="reject" class="reject" { "Reject" }
            } @else {
                label { "Decision (JSON)" textarea name="decision" {} }
                button type="submit" name="verdict" value="decide" class="approve" { "Decide" }
            }
        }
        form method="post" action=(action) class="delegate" {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="confirm" value="ask";
            input type="hidden" name="verdict" value="delegate";
            label { "Delegate to " input name="to" maxlength="256" required; }
            button type="submit" class="delegate" { "Delegate" }
        }
    }
}

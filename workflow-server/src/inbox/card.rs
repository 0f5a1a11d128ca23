//! One task's card: its title, prompt, deadline, what happens at the deadline, the
//! approvals so far, its context (payloads when shown) and its decision form. Drawn on the
//! inbox's pages and on a run's page.

use serde_json::Value;
use workflow_core::journal::Event;
use workflow_core::spec::{OnTimeout, Spec, StepKind};
use workflow_core::{DecisionError, TaskInfo};

use crate::auth::Identity;
use crate::html::{escape, words, Html};
use crate::present::present;
use crate::view::REDACTED;
use crate::App;

/// One task: prompt, context (payloads if `show`), deadline and escalation, and its
/// decision form.
#[allow(clippy::too_many_arguments)] // one card, drawn from what the page loaded
pub(super) fn task_card(
    app: &App,
    who: &Identity,
    body: &mut Html,
    task: &TaskInfo,
    spec: &Spec,
    events: &[Event],
    show: bool,
    link_run: bool,
) {
    let index = spec.step_index(&task.step);
    let id = format!("task-{}-{}", task.run, task.step);
    let now = app.engine.now();
    let presented = present(spec, events, &task.step, show);
    let heading = presented
        .title
        .clone()
        .unwrap_or_else(|| format!("{} for {}", words(&task.step), task.assignee));
    body.raw(&format!("<section class=\"task\" id=\"{}\">", escape(&id)))
        .raw("<h2 class=\"title\">")
        .text(&heading)
        .raw("</h2><p class=\"meta\">")
        .text(&format!("{} · {} · due ", task.workflow, task.run))
        .time(now, task.deadline)
        .raw("</p><p class=\"prompt\">")
        .text(task.prompt.as_deref().unwrap_or("(no prompt)"))
        .raw("</p><table>");
    if link_run {
        body.raw("<tr><th>Run</th><td>")
            .link(
                &format!("{}/inbox/runs/{}", app.base, task.run),
                &task.run.to_string(),
            )
            .raw("</td></tr>");
    }
    let assignee = if task.escalated {
        format!("{} (escalated)", task.assignee)
    } else {
        task.assignee.clone()
    };
    body.raw("<tr><th>Assigned to</th>")
        .element("td", &assignee)
        .raw("</tr>");
    if let Some(since) = index.and_then(|step| opened_at(events, step)) {
        body.raw("<tr><th>Waiting since</th><td>")
            .time(now, since)
            .raw("</td></tr>");
    }
    body.raw("<tr><th>Deadline</th><td class=\"deadline\">")
        .time(now, task.deadline)
        .raw("</td></tr><tr><th>At the deadline</th>")
        .element("td", &on_timeout(spec, index, task.escalated))
        .raw("</tr>");
    presented.quorum_row(body, &format!("{id}-approvals"));
    body.raw("</table>");
    if !presented.shown.is_empty() {
        body.raw("<table class=\"shown\">");
        presented.shown_rows(body);
        body.raw("</table>");
    }
    context(body, spec, index, events, show);
    decision_form(app, who, body, task, spec, index, events);
    body.raw("</section>");
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
fn context(body: &mut Html, spec: &Spec, index: Option<usize>, events: &[Event], shown: bool) {
    body.raw("<details open><summary>Context</summary><table>");
    if let Some(Event::RunStarted { input, .. }) = events.first() {
        context_row(body, "inputs", Some(input), shown);
    }
    let deps = index
        .and_then(|i| spec.steps.get(i))
        .map_or(&[][..], |step| step.deps.as_slice());
    for dep in deps {
        let output = events.iter().rev().find_map(|event| match event {
            Event::StepSucceeded { step, output, .. } if step == dep => Some(output),
            _ => None,
        });
        let name = spec.steps.get(*dep).map_or("?", |s| s.id.as_str());
        context_row(body, name, output, shown);
    }
    body.raw("</table></details>");
}

/// One payload of the context: its fields if shown, redacted otherwise.
fn context_row(body: &mut Html, name: &str, value: Option<&Value>, shown: bool) {
    body.raw("<tr>").element("th", name).raw("<td>");
    match value {
        Some(value) if shown => body.value(value),
        Some(_) => body.raw("<pre>").text(REDACTED).raw("</pre>"),
        None => body.text("(no output)"),
    };
    body.raw("</td></tr>");
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
    body: &mut Html,
    task: &TaskInfo,
    spec: &Spec,
    index: Option<usize>,
    events: &[Event],
) {
    if let Some(why) = not_yours(app, who, task, spec, events) {
        body.raw("<p class=\"meta not-yours\">")
            .text(&why)
            .raw("</p>");
        return;
    }
    let action = escape(&format!(
        "{}/inbox/runs/{}/tasks/{}",
        app.base, task.run, task.step
    ));
    let csrf = app.csrf.token(who);
    body.raw(&format!(
        "<form method=\"post\" action=\"{action}\" class=\"decide\">"
    ))
    .hidden("csrf", &csrf)
    .hidden("confirm", "ask");
    if let Some(fields) = app.engine.decision_form(&task.workflow, &task.step) {
        crate::form::render(body, &fields);
        body.raw(
            "<button type=\"submit\" name=\"verdict\" value=\"form\" class=\"approve\">Decide</button>",
        );
    } else if is_approval(spec, index) {
        body.raw("<label>Comment<textarea name=\"comment\"></textarea></label>")
            .raw("<button type=\"submit\" name=\"verdict\" value=\"approve\" class=\"approve\">Approve</button>")
            .raw("<button type=\"submit\" name=\"verdict\" value=\"reject\" class=\"reject\">Reject</button>");
    } else {
        body.raw("<label>Decision (JSON)<textarea name=\"decision\"></textarea></label>")
            .raw("<button type=\"submit\" name=\"verdict\" value=\"decide\" class=\"approve\">Decide</button>");
    }
    body.raw("</form>");
    body.raw(&format!(
        "<form method=\"post\" action=\"{action}\" class=\"delegate\">"
    ))
    .hidden("csrf", &csrf)
    .hidden("confirm", "ask")
    .hidden("verdict", "delegate")
    .raw("<label>Delegate to <input name=\"to\" maxlength=\"256\" required></label>")
    .raw("<button type=\"submit\" class=\"delegate\">Delegate</button>")
    .raw("</form>");
}

//! The one question a decision asks before it is recorded ("Approve refund 4200 for Ada?"),
//! without JavaScript: a card's form posts `confirm=ask`, and the answer is this page,
//! which shows what would be recorded and posts the same fields again without it.

use axum::http::StatusCode;
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use maud::html;
use workflow_core::admin;

use crate::access::Seen;
use crate::error::ApiError;
use crate::form::PREFIX;
use crate::html::{page, words};
use crate::permissions::{Action, Caller};
use crate::present::present;
use crate::App;

/// The question for `verdict` on a task titled `title` (or named by its step).
fn question(verdict: &str, title: &str, to: Option<&str>) -> String {
    match verdict {
        "approve" => format!("Approve {title}?"),
        "reject" => format!("Reject {title}?"),
        "delegate" => format!("Hand {title} to {}?", to.unwrap_or("nobody")),
        _ => format!("Record this decision on {title}?"),
    }
}

/// The answer button's words and class (`reject` looks different from `approve`).
fn answer(verdict: &str) -> (&'static str, &'static str) {
    match verdict {
        "approve" => ("Yes, approve", "approve"),
        "reject" => ("Yes, reject", "reject"),
        "delegate" => ("Yes, hand it on", "delegate"),
        _ => ("Yes, record it", "approve"),
    }
}

/// A title as it reads inside a sentence: its first letter in lower case unless the
/// first word is an acronym or a name (`Refund 4200 for Ada` → `refund 4200 for Ada`).
fn in_sentence(title: &str) -> String {
    let mut words = title.split(' ');
    let first = words.next().unwrap_or("");
    let lower = first.chars().skip(1).all(|c| !c.is_uppercase());
    if !lower {
        return title.to_owned();
    }
    let mut chars = title.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The confirmation page of `verdict` on `step` of the run `seen`, with the fields as
/// `posted`; 404 `unknown_task` when the task is not open.
pub(super) async fn page_for(
    app: &App,
    caller: &Caller,
    seen: &Seen,
    step: &str,
    verdict: &str,
    posted: &[(String, String)],
) -> Result<Response, ApiError> {
    let store = &**app.engine.store();
    let record = &seen.stored.record;
    let run = record.id;
    let spec = admin::stored_spec(store, &record.fingerprint).await?;
    let task = spec.as_ref().and_then(|spec| {
        admin::tasks_of(spec, &seen.stored)
            .into_iter()
            .find(|task| task.step == step)
    });
    let (Some(spec), Some(task)) = (spec, task) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_task",
            format!("{run} has no open task `{step}`"),
        ));
    };
    let show = app.show_payloads
        && app
            .allows(
                caller,
                Action::ViewPayloads,
                &record.workflow,
                seen.approver,
            )
            .await?;
    let presented = present(&spec, &seen.stored.events, step, show);
    let title = match &presented.title {
        Some(title) => in_sentence(title),
        None => format!("“{}” of {run}", words(step)),
    };
    let get = |name: &str| {
        posted
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let question = question(verdict, &title, get("to").map(str::trim));
    // What this answer records, as posted (the person's own words, escaped).
    let recorded: Vec<(String, &str)> = posted
        .iter()
        .filter_map(|(key, value)| {
            let label = match key.as_str() {
                "comment" if !value.trim().is_empty() => "Comment".to_owned(),
                "to" if verdict == "delegate" => "Hand to".to_owned(),
                "decision" if verdict == "decide" => "Decision".to_owned(),
                field => match field.strip_prefix(PREFIX) {
                    Some(name) if verdict == "form" => words(name),
                    _ => return None,
                },
            };
            Some((label, value.as_str()))
        })
        .collect();
    let action = format!("{}/inbox/runs/{run}/tasks/{step}", app.base);
    let (label, class) = answer(verdict);
    let body = html! {
        p class="meta" id="what" { (task.workflow) " · " (run) " · assigned to " (task.assignee) }
        table id="recorded" {
            (presented.shown_rows())
            (presented.quorum_row("approvals"))
            @for (label, value) in &recorded {
                tr { th { (label) } td { (value) } }
            }
        }
        form method="post" action=(action) id="confirm" {
            @for (key, value) in posted {
                @if key != "confirm" {
                    input type="hidden" name=(key) value=(value);
                }
            }
            button type="submit" class=(class) id="yes" { (label) }
            " "
            a href={ (app.base) "/inbox/runs/" (run) } { "No, go back" }
        }
    };
    let html = page(&question, Some(caller.identity().name()), &app.base, body);
    Ok(HtmlBody(html).into_response())
}

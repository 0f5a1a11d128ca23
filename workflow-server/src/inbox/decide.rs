//! `POST /inbox/runs/{run}/tasks/{step}`: a decision (or a delegation) from a task's form.

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use workflow_core::{admin, Approval};

use super::{confirm, fail, PageCaller, PageError, MAX_FORM};
use crate::api::{check_comment, decide_as, delegate_as};
use crate::error::ApiError;
use crate::permissions::Action;
use crate::view::parse_run;
use crate::Shared;

/// `text` for a URL's query: letters, digits, `-`, `_`, `.` as they are, the rest
/// percent-encoded.
fn query_text(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The inputs of a task's form, as posted: the fixed ones by name, a decision form's
/// fields (`field.NAME`) kept as posted.
#[derive(Debug)]
struct DecisionForm {
    csrf: String,
    verdict: String,
    comment: Option<String>,
    decision: Option<String>,
    to: Option<String>,
    /// `ask`: show what would be recorded and ask once before recording it (the cards'
    /// forms send it; the confirmation's form does not).
    confirm: Option<String>,
    posted: Vec<(String, String)>,
}

impl DecisionForm {
    fn from_pairs(posted: Vec<(String, String)>) -> Self {
        let get = |name: &str| {
            posted
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        };
        DecisionForm {
            csrf: get("csrf").unwrap_or_default(),
            verdict: get("verdict").unwrap_or_default(),
            comment: get("comment"),
            decision: get("decision"),
            to: get("to"),
            confirm: get("confirm"),
            posted,
        }
    }
}

/// The verdicts a form may post.
const VERDICTS: [&str; 5] = ["approve", "reject", "form", "decide", "delegate"];

pub(super) async fn decide(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path((run, step)): Path<(String, String)>,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = fail(&app, who);
    let run = parse_run(&run).map_err(&fail)?;
    let form = form.map(|Form(pairs)| DecisionForm::from_pairs(pairs));
    let form = form.map_err(|rejection| {
        fail(if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_FORM)
        } else {
            ApiError::bad_request(rejection.body_text())
        })
    })?;
    if !app.csrf.verify(who, &form.csrf) {
        return Err(fail(ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf",
            "the form's CSRF token is missing or not yours; reload the page and try again",
        )));
    }
    // Load, then check permission, then validate: a run the caller may not see answers
    // exactly as a missing one, whatever the step or the form says.
    let seen = app
        .permitted_run(&caller, run, Action::Decide)
        .await
        .map_err(&fail)?;
    check_comment(form.comment.as_deref()).map_err(&fail)?;
    if !VERDICTS.contains(&form.verdict.as_str()) {
        return Err(fail(ApiError::bad_request(format!(
            "unknown verdict `{}`",
            form.verdict
        ))));
    }
    if form.confirm.as_deref() == Some("ask") {
        return confirm::page_for(&app, &caller, &seen, &step, &form.verdict, &form.posted)
            .await
            .map_err(&fail);
    }
    let comment = form.comment.filter(|c| !c.trim().is_empty());
    if form.verdict == "delegate" {
        let to = form.to.unwrap_or_default();
        delegate_as(&app, &caller, &seen, &step, &to)
            .await
            .map_err(&fail)?;
        let target = format!("{}/inbox/runs/{run}", app.base);
        return Ok(Redirect::to(&target).into_response());
    }
    let decision = match form.verdict.as_str() {
        "approve" | "reject" => {
            let approval = if form.verdict == "approve" {
                Approval::approve(comment)
            } else {
                Approval::reject(comment)
            };
            serde_json::to_value(approval)
                .map_err(|e| fail(ApiError::bad_request(e.to_string())))?
        }
        "form" => {
            let open = seen.spec.as_ref().is_some_and(|spec| {
                admin::tasks_of(spec, &seen.stored)
                    .iter()
                    .any(|task| task.step == step)
            });
            let fields = open
                .then(|| {
                    app.engine
                        .decision_form(&seen.stored.record.workflow, &step)
                })
                .flatten()
                .ok_or_else(|| {
                    fail(ApiError::new(
                        StatusCode::NOT_FOUND,
                        "unknown_task",
                        format!("{run} has no open task `{step}` with a form"),
                    ))
                })?;
            crate::form::read(&fields, &form.posted).map_err(&fail)?
        }
        _ => serde_json::from_str(form.decision.as_deref().unwrap_or("")).map_err(|e| {
            fail(ApiError::invalid_payload(format!(
                "the decision is not JSON: {e}"
            )))
        })?,
    };
    decide_as(&app, &caller, &seen, &step, decision)
        .await
        .map_err(&fail)?;
    let target = format!(
        "{}/inbox/runs/{run}?decided={}",
        app.base,
        query_text(&step)
    );
    Ok(Redirect::to(&target).into_response())
}

//! A run's cancel, retry and restart from its console page: `GET` asks, saying what will
//! happen, and its form posts the person's CSRF token back to the same path, which asks the
//! policy again and carries the change out through the engine, as the API does (each
//! journaled with who did it).

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html as HtmlBody, IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use workflow_core::journal::Event;
use workflow_core::StartOptions;

use super::runs::status_badge;
use super::{check_csrf, failing, first, MAX_FORM};
use crate::error::ApiError;
use crate::inbox::{PageCaller, PageError};
use crate::permissions::{Action, Caller};
use crate::view::parse_run;
use crate::Shared;

/// What a confirmation asks and does.
#[derive(Debug, Clone, Copy)]
enum Change {
    Cancel,
    Retry,
    /// A new run of the same workflow with the same inputs.
    Restart,
}

impl Change {
    fn action(self) -> Action {
        match self {
            Change::Cancel => Action::Cancel,
            Change::Retry => Action::Retry,
            Change::Restart => Action::Start,
        }
    }
}

async fn ask(
    app: Shared,
    caller: Caller,
    run: String,
    change: Change,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let run = parse_run(&run).map_err(&fail)?;
    let seen = app
        .permitted_run(&caller, run, change.action())
        .await
        .map_err(&fail)?;
    let record = &seen.stored.record;
    let (title, what, yes, path) = match change {
        Change::Cancel => (
            format!("Cancel {run} of {}?", record.workflow),
            "It stops where it is: no new step starts, and the compensations of its finished steps run.",
            "Yes, cancel it",
            "cancel",
        ),
        Change::Retry => (
            format!("Retry {run} of {}?", record.workflow),
            "It runs again from its failed steps; the steps that succeeded keep their outputs.",
            "Yes, retry it",
            "retry",
        ),
        Change::Restart => (
            format!("Restart {run} of {}?", record.workflow),
            "A new run of the workflow starts with the same inputs, from its first step; this run stays as it is.",
            "Yes, start a new run",
            "restart",
        ),
    };
    let base = &app.base;
    let body = html! {
        p id="what" { (what) }
        p class="meta" { "Status now: " (status_badge(record.status)) }
        form method="post" action={ (base) "/console/runs/" (run) "/" (path) } id="confirm" {
            input type="hidden" name="csrf" value=(app.csrf.token(who));
            button type="submit" id="yes" class="reject" { (yes) }
            " "
            a href={ (base) "/console/runs/" (run) } { "No, go back" }
        }
    };
    let html = crate::html::shell(&title, Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

async fn act(
    app: Shared,
    caller: Caller,
    run: String,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
    change: Change,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let run = parse_run(&run).map_err(&fail)?;
    let Form(pairs) = form.map_err(|rejection| {
        fail(if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_FORM)
        } else {
            ApiError::bad_request(rejection.body_text())
        })
    })?;
    check_csrf(&app, who, first(&pairs, "csrf")).map_err(&fail)?;
    let seen = app
        .permitted_run(&caller, run, change.action())
        .await
        .map_err(&fail)?;
    let done = match change {
        Change::Cancel => {
            app.engine
                .cancel(run, who.name())
                .await
                .map_err(|e| fail(e.into()))?;
            "cancelled"
        }
        Change::Retry => {
            app.engine
                .retry_dead_letter(run, who.name())
                .await
                .map_err(|e| fail(e.into()))?;
            "retried"
        }
        Change::Restart => {
            let input = match seen.stored.events.first() {
                Some(Event::RunStarted { input, .. }) => input.clone(),
                _ => {
                    return Err(fail(ApiError::new(
                        StatusCode::CONFLICT,
                        "no_inputs",
                        format!("{run}'s journal does not begin with its inputs"),
                    )))
                }
            };
            let workflow = &seen.stored.record.workflow;
            let options = StartOptions {
                initiator: Some(who.name().to_owned()),
                ..StartOptions::default()
            };
            let started = if app.enqueue_starts {
                app.engine.enqueue_json(workflow, input, options).await
            } else {
                app.engine.start_json(workflow, input, options).await
            };
            let (new, _) = started.map_err(|e| fail(e.into()))?;
            tracing::info!(%run, %new, by = %who, "run restarted from the console");
            return Ok(
                Redirect::to(&format!("{}/console/runs/{new}?done=restarted", app.base))
                    .into_response(),
            );
        }
    };
    tracing::info!(%run, by = %who, done, "run changed from the console");
    Ok(Redirect::to(&format!("{}/console/runs/{run}?done={done}", app.base)).into_response())
}

pub(super) async fn ask_cancel(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
) -> Result<Response, PageError> {
    ask(app, caller, run, Change::Cancel).await
}

pub(super) async fn ask_retry(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
) -> Result<Response, PageError> {
    ask(app, caller, run, Change::Retry).await
}

pub(super) async fn ask_restart(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
) -> Result<Response, PageError> {
    ask(app, caller, run, Change::Restart).await
}

pub(super) async fn restart(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Result<Response, PageError> {
    act(app, caller, run, form, Change::Restart).await
}

pub(super) async fn cancel(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Result<Response, PageError> {
    act(app, caller, run, form, Change::Cancel).await
}

pub(super) async fn retry(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Result<Response, PageError> {
    act(app, caller, run, form, Change::Retry).await
}

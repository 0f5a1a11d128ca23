//! The approval inbox, server-rendered HTML under `/inbox` (no JavaScript):
//!
//! - `GET /inbox`: the signed-in person's open tasks (those the engine's authorizer admits
//!   them for), each with its prompt, run context (inputs and upstream outputs, redacted
//!   unless payloads are shown), deadline and what happens then (escalation target), and
//!   a form to approve or reject with a comment.
//! - `GET /inbox/runs/{run}`: the run's diagram with its state, its steps, timeline and
//!   audit trail, and the forms of its tasks the person may decide. Only people the
//!   permission policy lets view the run may see it; to anyone else it is a 404, as a run
//!   that does not exist.
//! - `POST /inbox/runs/{run}/tasks/{step}`: a decision. The form's CSRF token must be the
//!   signed-in person's (403 `csrf` otherwise), and a browser's request must come from this
//!   server's origin (403 `cross_site`); the engine decides the rest. Answers 303 to the
//!   run page.
//!
//! Without an identity every page is a 401. The permission policy is the API's.

mod card;
mod confirm;
mod decide;
mod run_page;

use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::html;
use serde::Deserialize;
use workflow_core::store::{RunFilter, RunStatus};

use crate::auth::Identity;
use crate::error::ApiError;
use crate::html::page;
use crate::permissions::{Action, Caller};
use crate::{App, Shared};

/// The largest decision form accepted, in bytes (413 `body_too_large` past it).
pub const MAX_FORM: usize = 32 * 1024;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/inbox", get(inbox))
        .route("/inbox/", get(inbox))
        .route("/inbox/runs/{run}", get(run_page::run_page))
        .route(
            "/inbox/runs/{run}/tasks/{step}",
            post(decide::decide).layer(DefaultBodyLimit::max(MAX_FORM)),
        )
}

/// An error shown as a page, with the status of the API's error.
#[derive(Debug)]
pub(crate) struct PageError {
    pub(crate) error: ApiError,
    pub(crate) who: Option<Identity>,
    pub(crate) base: String,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let title = match self.error.status {
            StatusCode::UNAUTHORIZED => "Sign in first",
            StatusCode::FORBIDDEN => "Forbidden",
            StatusCode::NOT_FOUND => "Not found",
            StatusCode::CONFLICT => "Too late",
            _ => "Error",
        };
        let body = html! {
            p class="error" id="error" {
                (self.error.status.as_u16()) " " (self.error.code) ": " (self.error.message)
            }
        };
        let html = page(
            title,
            self.who.as_ref().map(Identity::name),
            &self.base,
            body,
        );
        (self.error.status, HtmlBody(html)).into_response()
    }
}

/// The caller of an inbox request ([`crate::access::caller`]), or an error page.
#[derive(Debug, Clone)]
pub(crate) struct PageCaller(pub(crate) Caller);

impl FromRequestParts<Shared> for PageCaller {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, PageError> {
        crate::access::caller(parts, app)
            .map(PageCaller)
            .map_err(|error| PageError {
                error,
                who: None,
                base: app.base.clone(),
            })
    }
}

pub(crate) fn fail(app: &App, who: &Identity) -> impl Fn(ApiError) -> PageError {
    let who = who.clone();
    let base = app.base.clone();
    move |error| PageError {
        error,
        who: Some(who.clone()),
        base: base.clone(),
    }
}

/// The tasks one inbox page shows.
pub const PAGE: usize = 20;

#[derive(Debug, Deserialize)]
struct InboxQuery {
    page: Option<usize>,
}

async fn inbox(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    query: Result<Query<InboxQuery>, QueryRejection>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = fail(&app, who);
    let requested = query.ok().and_then(|Query(q)| q.page).unwrap_or(1);
    // `?where=customer_id:c-42` (repeated: all of them): only tasks of runs found by it.
    let conditions: Vec<String> = pairs
        .map(|Query(pairs)| pairs)
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, value)| key == "where" && !value.trim().is_empty())
        .map(|(_, value)| value)
        .collect();
    // From the open-task index, soonest deadline first: what is due next is on the first
    // page, and only this page's runs are read (in one store read).
    let scope = crate::tasks::scope(&app, &caller, None)
        .await
        .map_err(&fail)?;
    let runs = if conditions.is_empty() {
        None
    } else {
        // Filtered: the caller's open tasks of the running runs found by the values, the
        // runs handed to the index query.
        let search = conditions
            .iter()
            .map(|text| workflow_core::search::parse_condition(text, ':'))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|message| fail(ApiError::bad_request(message)))?;
        let found = app
            .engine
            .runs(RunFilter {
                status: Some(RunStatus::Running),
                search,
                ..RunFilter::default()
            })
            .await
            .map_err(|e| fail(e.into()))?;
        // A search reads the runs' inputs: only runs whose payloads the person may see
        // are found by it.
        let mut ids = Vec::with_capacity(found.len());
        for run in found {
            if app
                .allows(&caller, Action::ViewPayloads, &run.workflow, true)
                .await
                .map_err(&fail)?
            {
                ids.push(run.id);
            }
        }
        Some(ids)
    };
    let total = match &runs {
        None => scope.total,
        Some(runs) => crate::tasks::count_of(&app, &scope, runs.clone())
            .await
            .map_err(&fail)?,
    };
    let total = usize::try_from(total).unwrap_or(usize::MAX);
    let pages = total.div_ceil(PAGE).max(1);
    let number = requested.clamp(1, pages);
    let listed = crate::tasks::page(&app, &scope, runs, None, (number - 1) * PAGE, PAGE)
        .await
        .map_err(&fail)?;
    let filter_query: String = conditions
        .iter()
        .map(|text| format!("&where={}", query_escape(text)))
        .collect();
    let mut payloads = crate::tasks::Payloads::default();
    let mut cards = Vec::with_capacity(listed.tasks.len());
    for task in &listed.tasks {
        let stored = listed.runs.get(&task.run);
        let spec = stored.and_then(|stored| listed.specs.get(&stored.record.fingerprint));
        let (Some(stored), Some(spec)) = (stored, spec) else {
            continue;
        };
        let show = payloads
            .shown(&app, &caller, &task.workflow)
            .await
            .map_err(&fail)?;
        cards.push(card::task_card(
            &app,
            who,
            task,
            spec,
            &stored.events,
            show,
            true,
        ));
    }
    let base = &app.base;
    let body = html! {
        form method="get" action={ (base) "/inbox" } id="filter" {
            label { "Find runs by " input name="where" placeholder="customer_id:c-42" value=(conditions.join(" ")); }
            " "
            button { "Filter" }
        }
        @if listed.tasks.is_empty() {
            p id="empty" { "No open tasks for you." }
        } @else {
            p class="meta" id="count" {
                (total) " open task" (if total == 1 { "" } else { "s" }) ", soonest deadline first"
            }
        }
        @for card in cards {
            (card)
        }
        @if pages > 1 {
            nav class="pages" id="pages" {
                @if number > 1 {
                    a href={ (base) "/inbox?page=" (number - 1) (filter_query) } { "← Sooner" }
                }
                " Page " (number) " of " (pages) " "
                @if number < pages {
                    a href={ (base) "/inbox?page=" (number + 1) (filter_query) } { "Later →" }
                }
            }
        }
    };
    let html = page("Your tasks", Some(who.name()), &app.base, body);
    Ok(HtmlBody(html).into_response())
}

/// `text` for a URL's query: everything but unreserved characters percent-encoded.
pub(crate) fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

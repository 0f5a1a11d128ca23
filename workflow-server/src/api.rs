//! The JSON API, under `/api`. Every request needs an identity from the authenticator
//! (401 `unauthenticated` without one); the identity is who decides, cancels and retries.
//! Every route asks the server's [`Permissions`](crate::Permissions) policy: a run the
//! caller may not view is a 404 `unknown_run`, an action it may not take on a run it may
//! view a 403 `forbidden`, and lists hold only the runs, tasks and dead letters it may view.
//! A state change signed in by an ambient credential (a trusted header) must be sent as
//! `content-type: application/json` (415 `json_required`) and not from another site (403
//! `cross_site`).
//!
//! | Method and path | Does |
//! |---|---|
//! | `GET /api/runs?status=&workflow=&before=&limit=` | runs, newest first, paged |
//! | `POST /api/runs` | starts a run: `{"workflow", "input", "idempotency_key"?}`, in the trace of a valid `traceparent` header |
//! | `GET /api/runs/{run}` | the run: steps, attempts, timeline, audit ([`RunDetail`]) |
//! | `GET /api/runs/{run}/diagram.svg` | its diagram with each step's state |
//! | `POST /api/runs/{run}/cancel` | cancels it |
//! | `POST /api/runs/{run}/events/{step}` | sends an event: `{"event_id", "payload"}` |
//! | `GET /api/tasks?workflow=&after=&limit=` | the open tasks the caller may decide, soonest deadline first, paged |
//! | `POST /api/runs/{run}/tasks/{step}` | decides: `{"approved", "comment"?}` or `{"decision"}` |
//! | `GET /api/dead-letters` | failed runs |
//! | `POST /api/dead-letters/{run}/retry` | retries one |
//!
//! Errors are `{"error": {"code", "message"}}`; the guide's front-door chapter (`workflow::guide::front_door`) lists every
//! code.
//!
//! [`RunDetail`]: crate::RunDetail

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use workflow_core::machine::Machine;
use workflow_core::store::{RunFilter, RunRecord, RunStatus};
use workflow_core::{Approval, RunId, StartOptions, TaskInfo};

use crate::access::Seen;
use crate::error::ApiError;
use crate::intake::{check_event_id, same_start, scoped_key, traceparent};
use crate::json::Json;
use crate::permissions::{Action, Caller};
use crate::view::{self, parse_run};
use crate::{ApiCaller, App, Shared};

/// The most runs one page lists.
pub const MAX_PAGE: usize = 500;

/// How many pages of the store one `GET /api/runs` reads at most to fill its page with runs
/// the caller may see.
pub const SCANNED_PAGES: usize = 20;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/runs", get(list_runs).post(start))
        .route("/api/runs/{run}", get(run_detail))
        .route("/api/runs/{run}/diagram.svg", get(diagram))
        .route("/api/runs/{run}/cancel", post(cancel))
        .route("/api/runs/{run}/events/{step}", post(send_event))
        .route("/api/runs/{run}/tasks/{step}", post(decide))
        .route("/api/runs/{run}/tasks/{step}/delegate", post(delegate))
        .route("/api/tasks", get(tasks))
        .route("/api/dead-letters", get(dead_letters))
        .route("/api/dead-letters/{run}/retry", post(retry))
}

/// A run's row as the API shows it (a failed run's note redacted without `payloads`).
pub(crate) fn record_json(record: &RunRecord, payloads: bool) -> Value {
    json!({
        "run": record.id.to_string(),
        "workflow": record.workflow,
        "status": record.status.as_str(),
        "note": crate::view::visible_note(record, payloads),
        "idempotency_key": record.idempotency_key,
        "parent": record.parent.map(|p| p.to_string()),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    })
}

/// A task as the API shows it.
pub(crate) fn task_json(task: &TaskInfo) -> Value {
    json!({
        "run": task.run.to_string(),
        "workflow": task.workflow,
        "step": task.step,
        "assignee": task.assignee,
        "prompt": task.prompt,
        "deadline": task.deadline,
        "escalated": task.escalated,
    })
}

#[derive(Debug, Deserialize)]
struct RunsQuery {
    status: Option<String>,
    workflow: Option<String>,
    before: Option<String>,
    limit: Option<usize>,
}

async fn list_runs(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    query: Result<Query<RunsQuery>, QueryRejection>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|r| ApiError::bad_request(r.body_text()))?;
    let Query(pairs) = pairs.map_err(|r| ApiError::bad_request(r.body_text()))?;
    // `where=customer_id:c-42`, repeated for runs with all of them.
    let search = pairs
        .iter()
        .filter(|(key, _)| key == "where")
        .map(|(_, text)| {
            workflow_core::search::parse_condition(text, ':').map_err(ApiError::bad_request)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let status = match query.status.as_deref() {
        None | Some("") => None,
        Some(text) => Some(RunStatus::parse(text).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown status `{text}`; one of running, completed, failed, cancelled, parked"
            ))
        })?),
    };
    let before = match query.before.as_deref() {
        None | Some("") => None,
        Some(text) => Some(
            text.parse::<RunId>()
                .map_err(|_| ApiError::bad_request(format!("`{text}` is not a run id")))?,
        ),
    };
    let limit = query.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let workflow = query.workflow.filter(|w| !w.is_empty());
    // Fill the page with runs the caller may see, reading the store a page at a time, up
    // to SCANNED_PAGES pages; then `next_before` says where to go on.
    let mut runs = Vec::new();
    let mut cursor = before;
    let mut next = None;
    for scanned in 1..=SCANNED_PAGES {
        let page = app
            .engine
            .runs(RunFilter {
                workflow: workflow.clone(),
                status,
                before: cursor,
                limit: Some(limit),
                search: search.clone(),
            })
            .await?;
        let full = page.len() == limit;
        let last = page.last().map(|r| r.id);
        for record in app.visible_records(&caller, page).await? {
            if runs.len() == limit {
                break;
            }
            let payloads = app.entitled(&caller, &record.workflow).await?;
            // A search reads the runs' inputs: it finds only runs whose payloads the
            // caller may see, so it confirms nothing about the others.
            if !search.is_empty() && !payloads {
                continue;
            }
            runs.push((record, payloads));
        }
        if runs.len() == limit {
            next = runs.last().map(|(r, _): &(RunRecord, bool)| r.id);
            break;
        }
        if !full {
            break;
        }
        cursor = last;
        if scanned == SCANNED_PAGES {
            next = last;
        }
    }
    let next = next.map(|id| id.to_string());
    Ok(Json(json!({
        "runs": runs
            .iter()
            .map(|(record, payloads)| record_json(record, *payloads))
            .collect::<Vec<_>>(),
        "next_before": next,
    })))
}

#[derive(Debug, Deserialize)]
struct StartBody {
    workflow: String,
    #[serde(default)]
    input: Value,
    idempotency_key: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

async fn start(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    headers: HeaderMap,
    Json(start): Json<StartBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    app.require(&caller, Action::Start, &start.workflow, false)
        .await?;
    if let Some(key) = &start.idempotency_key {
        check_event_id(key, "idempotency_key_too_long")?;
    }
    let options = StartOptions {
        idempotency_key: start
            .idempotency_key
            .as_deref()
            .map(|key| scoped_key("api", &start.workflow, key)),
        dry_run: start.dry_run,
        deadline: None,
        initiator: Some(caller.identity().name().to_owned()),
        traceparent: traceparent(&headers),
    };
    let (run, created) = if app.enqueue_starts {
        app.engine
            .enqueue_json(&start.workflow, start.input.clone(), options)
            .await?
    } else {
        app.engine
            .start_json(&start.workflow, start.input.clone(), options)
            .await?
    };
    if let (false, Some(key)) = (created, &start.idempotency_key) {
        same_start(&app.engine, run, key, &start.input).await?;
    }
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({ "run": run.to_string(), "created": created })),
    ))
}

async fn run_detail(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(run): Path<String>,
) -> Result<Json<view::RunDetail>, ApiError> {
    let run = parse_run(&run)?;
    Ok(Json(app.view_run(&caller, run).await?.detail))
}

async fn diagram(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(run): Path<String>,
) -> Result<Response, ApiError> {
    let run = parse_run(&run)?;
    let loaded = app.view_run(&caller, run).await?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], loaded.svg()).into_response())
}

async fn cancel(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(run): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let run = parse_run(&run)?;
    app.permitted_run(&caller, run, Action::Cancel).await?;
    let who = caller.identity();
    app.engine.cancel(run, who.name()).await?;
    Ok(Json(
        json!({ "run": run.to_string(), "cancelled_by": who.name() }),
    ))
}

#[derive(Debug, Deserialize)]
struct EventBody {
    event_id: String,
    #[serde(default)]
    payload: Value,
}

async fn send_event(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path((run, step)): Path<(String, String)>,
    event: Result<Json<EventBody>, ApiError>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let run = parse_run(&run)?;
    // Load, then check permission, then validate: a run the caller may not see answers
    // as a missing one, whatever the body holds.
    app.permitted_run(&caller, run, Action::SendEvent).await?;
    let Json(event) = event?;
    check_event_id(&event.event_id, "event_id_too_long")?;
    app.engine
        .send_event(run, &step, &event.event_id, event.payload)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "run": run.to_string(), "step": step, "event_id": event.event_id })),
    ))
}

/// Decides a task of `seen` (a run `caller` may decide on, checked by the caller of
/// this) as `caller`: what the run's machine refuses now (403 `not_admitted`, 409
/// `already_approved`, …) is answered before anything is written; the engine that drives
/// the run decides the rest (and asks the machine again).
pub(crate) async fn decide_as(
    app: &App,
    caller: &Caller,
    seen: &Seen,
    step: &str,
    decision: Value,
) -> Result<(), ApiError> {
    let size = decision.to_string().len();
    if size > MAX_DECISION {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "decision_too_large",
            format!("the decision is {size} bytes of JSON; at most {MAX_DECISION} are accepted"),
        ));
    }
    let run = seen.stored.record.id;
    let who = caller.identity().name();
    if let Some(spec) = &seen.spec {
        app.machine_admits(spec, &seen.stored.events, run, step, who)?;
    }
    app.engine.decide(run, step, who, decision).await?;
    Ok(())
}

/// The longest decision comment accepted, in bytes (413 `comment_too_long` past it).
pub const MAX_COMMENT: usize = 4096;

/// The longest decision (as JSON) accepted, in bytes (413 `decision_too_large` past it).
pub const MAX_DECISION: usize = 16 * 1024;

/// 413 `comment_too_long` past [`MAX_COMMENT`].
pub(crate) fn check_comment(comment: Option<&str>) -> Result<(), ApiError> {
    match comment {
        Some(comment) if comment.len() > MAX_COMMENT => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "comment_too_long",
            format!(
                "the comment is {} bytes long; at most {MAX_COMMENT} are accepted",
                comment.len()
            ),
        )),
        _ => Ok(()),
    }
}

#[derive(Debug, Deserialize)]
struct DecideBody {
    approved: Option<bool>,
    comment: Option<String>,
    decision: Option<Value>,
}

async fn decide(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path((run, step)): Path<(String, String)>,
    decision: Result<Json<DecideBody>, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let run = parse_run(&run)?;
    let seen = app.permitted_run(&caller, run, Action::Decide).await?;
    let Json(decision) = decision?;
    check_comment(decision.comment.as_deref())?;
    let value = match (decision.decision, decision.approved) {
        (Some(value), None) => value,
        (None, Some(approved)) => {
            let approval = if approved {
                Approval::approve(decision.comment)
            } else {
                Approval::reject(decision.comment)
            };
            serde_json::to_value(approval)
                .map_err(|error| ApiError::bad_request(error.to_string()))?
        }
        _ => {
            return Err(ApiError::bad_request(
                "give either `approved` (with an optional `comment`) or `decision`",
            ))
        }
    };
    decide_as(&app, &caller, &seen, &step, value).await?;
    Ok(Json(
        json!({ "run": run.to_string(), "step": step, "by": caller.identity().name() }),
    ))
}

/// The default and the largest page of `GET /api/tasks`.
pub const TASK_PAGE: (usize, usize) = (100, 500);

#[derive(Debug, Deserialize)]
struct TasksQuery {
    workflow: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

/// Hands a task of `seen` (a run `caller` may decide on, checked by the caller of this)
/// to another person or group: what the run's machine refuses now (the four-eyes rules
/// included) is answered before anything is written; the rest is the engine's call.
pub(crate) async fn delegate_as(
    app: &App,
    caller: &Caller,
    seen: &Seen,
    step: &str,
    to: &str,
) -> Result<(), ApiError> {
    if to.len() > workflow_core::machine::MAX_DELEGATE {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "identity_too_long",
            format!(
                "the delegate's name is {} bytes long; at most {} are accepted",
                to.len(),
                workflow_core::machine::MAX_DELEGATE
            ),
        ));
    }
    let run = seen.stored.record.id;
    let who = caller.identity().name();
    if let Some(spec) = &seen.spec {
        let authorize = |assignee: &str, by: &str| app.engine.authorizes(assignee, by);
        Machine::replay(spec, &seen.stored.events).delegate(
            run,
            step,
            who,
            to,
            app.engine.now(),
            Some(&authorize),
        )?;
    }
    app.engine.delegate(run, step, who, to).await?;
    Ok(())
}

#[derive(Debug, Deserialize)]
struct DelegateBody {
    to: String,
}

async fn delegate(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path((run, step)): Path<(String, String)>,
    body: Result<Json<DelegateBody>, ApiError>,
) -> Result<Json<Value>, ApiError> {
    let run = parse_run(&run)?;
    let seen = app.permitted_run(&caller, run, Action::Decide).await?;
    let Json(body) = body?;
    delegate_as(&app, &caller, &seen, &step, &body.to).await?;
    Ok(Json(json!({
        "run": run.to_string(),
        "step": step,
        "by": caller.identity().name(),
        "to": body.to.trim(),
    })))
}

async fn tasks(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    query: Result<Query<TasksQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|r| ApiError::bad_request(r.body_text()))?;
    let after = query
        .after
        .as_deref()
        .map(crate::tasks::parse_cursor)
        .transpose()?;
    let limit = query.limit.unwrap_or(TASK_PAGE.0).clamp(1, TASK_PAGE.1);
    let scope = crate::tasks::scope(&app, &caller, query.workflow.as_deref()).await?;
    let page = crate::tasks::page(&app, &scope, None, after, 0, limit).await?;
    // The page read its runs and specs once; each workflow's payload permission is asked
    // once.
    let mut payloads = crate::tasks::Payloads::default();
    let mut listed = Vec::with_capacity(page.tasks.len());
    for task in &page.tasks {
        let mut value = task_json(task);
        let stored = page.runs.get(&task.run);
        let spec = stored.and_then(|stored| page.specs.get(&stored.record.fingerprint));
        if let (Some(stored), Some(spec), Some(object)) = (stored, spec, value.as_object_mut()) {
            let shown = payloads.shown(&app, &caller, &task.workflow).await?;
            crate::present::present(spec, &stored.events, &task.step, shown).extend(object);
        }
        listed.push(value);
    }
    Ok(Json(json!({
        "tasks": listed,
        "total": scope.total,
        "next": page.next.map(crate::tasks::cursor_text),
    })))
}

async fn dead_letters(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let mut letters = Vec::new();
    let mut specs = crate::access::SpecCache::default();
    for letter in app.engine.dead_letters().await? {
        if app
            .allows(&caller, Action::View, &letter.workflow, false)
            .await?
        {
            letters.push(letter);
            continue;
        }
        let Some(stored) = app.engine.store().load(letter.run).await? else {
            continue;
        };
        let spec = specs.get(&app, &stored.record.fingerprint).await?;
        if app.may_view(&caller, &letter.workflow, spec).await? {
            letters.push(letter);
        }
    }
    let mut shown = Vec::with_capacity(letters.len());
    for letter in &letters {
        let mut value = serde_json::to_value(letter).unwrap_or(Value::Null);
        let payloads = app.entitled(&caller, &letter.workflow).await?;
        if let Some(object) = value.as_object_mut() {
            object.insert("run".into(), Value::from(letter.run.to_string()));
            if !payloads {
                // The error's message may quote a payload ("card 4111… declined").
                object.insert("message".into(), Value::from(crate::view::REDACTED));
                object.insert(
                    "redacted".into(),
                    Value::from(crate::view::redaction_reason(false)),
                );
            }
        }
        shown.push(value);
    }
    let letters = shown;
    Ok(Json(json!({ "dead_letters": letters })))
}

async fn retry(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(run): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let run = parse_run(&run)?;
    app.permitted_run(&caller, run, Action::Retry).await?;
    let who = caller.identity();
    app.engine.retry_dead_letter(run, who.name()).await?;
    Ok(Json(
        json!({ "run": run.to_string(), "retried_by": who.name() }),
    ))
}

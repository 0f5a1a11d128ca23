//! Schedules over the JSON API, under `/api/schedules`: list them with their next fire
//! times, create, pause, resume, trigger now, backfill a range (a dry run lists the ticks
//! first), delete, and read the ticks they missed.
//!
//! Every route asks the server's one policy about the schedule's workflow: seeing a
//! schedule is [`Action::View`] (a viewer), changing it [`Action::Schedule`] (an operator).
//! A schedule of a workflow the caller may not see answers exactly as one that does not
//! exist (404 `unknown_schedule`); a change refused on one it may see is 403 `forbidden`.
//! State changes must be sent as JSON and from the same site, as on every API route.
//!
//! | Method and path | Does |
//! |---|---|
//! | `GET /api/schedules` | the schedules the caller may see, each with its next fire times |
//! | `POST /api/schedules` | creates one (or replaces its definition): `{"id", "workflow", "cron", ...}` |
//! | `GET /api/schedules/{id}` | one schedule |
//! | `DELETE /api/schedules/{id}` | deletes it (its runs are kept) |
//! | `POST /api/schedules/{id}/pause` | pauses it |
//! | `POST /api/schedules/{id}/resume` | resumes it from now |
//! | `POST /api/schedules/{id}/trigger` | starts a run now |
//! | `POST /api/schedules/{id}/backfill` | `{"from", "to", "dry_run"}`: the ticks of a range |
//! | `GET /api/schedules/{id}/missed` | the ticks it missed, newest first |
//!
//! The server's engine starts runs for the workflows registered with it; for others
//! (`workflow serve` has no workflow code) a trigger or backfill leaves its ticks in the
//! schedule's row, and the next engine with the workflow starts each under its tick's key
//! (202 Accepted).

use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use workflow_core::admin::schedules::{self as rows, RowError, ScheduleInfo};
use workflow_core::journal::rfc3339;
use workflow_core::schedule::{Catchup, DstGap, Overlap, Schedule};
use workflow_core::store::{MissedTicks, ScheduleRow};
use workflow_core::ScheduleApiError;

use crate::error::ApiError;
use crate::json::Json;
use crate::permissions::{Action, Caller};
use crate::{ApiCaller, App, Shared};

/// How many next fire times a schedule is listed with (`?next=` up to [`MAX_NEXT`]).
pub const DEFAULT_NEXT: usize = 3;

/// The most next fire times one answer lists.
pub const MAX_NEXT: usize = 50;

/// The most missed-tick records one answer lists.
pub const MAX_MISSED: usize = 1000;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/api/schedules", get(list).post(create))
        .route("/api/schedules/{id}", get(one).delete(delete))
        .route("/api/schedules/{id}/pause", post(pause))
        .route("/api/schedules/{id}/resume", post(resume))
        .route("/api/schedules/{id}/trigger", post(trigger))
        .route("/api/schedules/{id}/backfill", post(backfill))
        .route("/api/schedules/{id}/missed", get(missed))
}

/// 404 `unknown_schedule`: no such schedule, or one the caller may not see.
fn unknown_schedule(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_schedule",
        format!("no schedule `{id}`"),
    )
}

impl From<RowError> for ApiError {
    fn from(error: RowError) -> Self {
        ScheduleApiError::from(error).into()
    }
}

impl From<ScheduleApiError> for ApiError {
    fn from(error: ScheduleApiError) -> Self {
        use StatusCode as S;
        let error = match error {
            ScheduleApiError::Run(run) => return run.into(),
            ScheduleApiError::Unknown(id) => return unknown_schedule(&id),
            other => other,
        };
        let (status, code) = match &error {
            ScheduleApiError::Invalid(_) => (S::UNPROCESSABLE_ENTITY, "invalid_schedule"),
            ScheduleApiError::NotRegistered(_) => (S::NOT_FOUND, "unknown_workflow"),
            ScheduleApiError::NotSchedulable { .. } => (S::UNPROCESSABLE_ENTITY, "not_schedulable"),
            ScheduleApiError::TooManyTicks => (S::BAD_REQUEST, "too_many_ticks"),
            ScheduleApiError::Contended(_) => (S::CONFLICT, "contended"),
            ScheduleApiError::Store(_) => (S::SERVICE_UNAVAILABLE, "store"),
            _ => (S::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, error.to_string())
    }
}

impl App {
    /// Schedule `id`, if `caller` may see it (a viewer of its workflow); 404
    /// `unknown_schedule` otherwise, as for one that does not exist.
    pub(crate) async fn visible_schedule(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<ScheduleRow, ApiError> {
        let row = match rows::get(&**self.engine.store(), id).await {
            Ok(row) => row,
            Err(RowError::Unknown(_)) => return Err(unknown_schedule(id)),
            Err(error) => return Err(error.into()),
        };
        if self
            .allows(caller, Action::View, &row.workflow, false)
            .await?
        {
            Ok(row)
        } else {
            Err(unknown_schedule(id))
        }
    }

    /// Schedule `id`, if `caller` may see it (404 otherwise) and change it (403
    /// `forbidden` otherwise).
    pub(crate) async fn changeable_schedule(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<ScheduleRow, ApiError> {
        let row = self.visible_schedule(caller, id).await?;
        self.require(caller, Action::Schedule, &row.workflow, false)
            .await?;
        Ok(row)
    }

    /// Whether this server's engine can start runs of `workflow`.
    pub(crate) fn runs_here(&self, workflow: &str) -> bool {
        self.engine.schedules().starts_here(workflow)
    }
}

/// A schedule as the API shows it.
pub(crate) fn info_json(info: &ScheduleInfo, now: u64) -> Value {
    let row = &info.row;
    let state = &row.state;
    let schedule = &row.schedule;
    json!({
        "id": row.id,
        "workflow": row.workflow,
        "cron": schedule.cron,
        "tz": schedule.tz,
        "overlap": schedule.overlap.as_str(),
        "catchup": schedule.catchup.to_string(),
        "window_s": schedule.window.as_secs(),
        "dst_gap": schedule.dst_gap.as_str(),
        "jitter_s": schedule.jitter.map(|j| j.as_secs()),
        "paused": row.paused,
        "next": info.next_local,
        "next_ms": info.next,
        "last_run": state.last_run.map(|run| run.to_string()),
        "last_tick": state.last_tick.map(rfc3339),
        "last_tick_ms": state.last_tick,
        "last_fired_ms": state.last_fired,
        "last_lag_ms": state.last_fired.zip(state.last_tick).map(|(f, t)| f.saturating_sub(t)),
        "missed": state.missed,
        "last_missed": state.last_missed.map(rfc3339),
        "skipped": state.skipped,
        "pending": state.pending.len(),
        "created_at": row.created_at,
        "now_ms": now,
    })
}

#[derive(Debug, Deserialize)]
struct NextQuery {
    next: Option<usize>,
}

fn next_count(query: Result<Query<NextQuery>, QueryRejection>) -> Result<usize, ApiError> {
    let Query(query) = query.map_err(|r| ApiError::bad_request(r.body_text()))?;
    Ok(query.next.unwrap_or(DEFAULT_NEXT).min(MAX_NEXT))
}

async fn list(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    query: Result<Query<NextQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let now = app.engine.now();
    let count = next_count(query)?;
    let mut shown = Vec::new();
    for info in rows::list(&**app.engine.store(), now, count).await? {
        if app
            .allows(&caller, Action::View, &info.row.workflow, false)
            .await?
        {
            shown.push(info_json(&info, now));
        }
    }
    Ok(Json(json!({ "schedules": shown })))
}

async fn one(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<String>,
    query: Result<Query<NextQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let count = next_count(query)?;
    let row = app.visible_schedule(&caller, &id).await?;
    let now = app.engine.now();
    Ok(Json(info_json(&rows::info(row, now, count), now)))
}

/// A schedule to create: the keys of `schedule: { ... }`, spelled as in a spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    id: String,
    workflow: String,
    cron: String,
    tz: Option<String>,
    overlap: Option<String>,
    catchup: Option<String>,
    window: Option<String>,
    dst_gap: Option<String>,
    jitter: Option<String>,
}

/// The longest schedule id accepted, in bytes.
pub const MAX_ID: usize = 256;

fn invalid(message: String) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_schedule",
        message,
    )
}

/// A span as a spec writes it: `90s`, `15m`, `6h`, `2d`.
fn span(key: &str, text: &str) -> Result<Duration, ApiError> {
    let text = text.trim();
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &text[digits.len()..];
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    match digits.parse::<u64>() {
        Ok(n) if factor > 0 => Ok(Duration::from_secs(n.saturating_mul(factor))),
        _ => Err(invalid(format!(
            "`{key}` is `{text}`: write a number and a unit, such as `90s`, `15m`, `6h` or `2d`"
        ))),
    }
}

fn catchup(text: &str) -> Result<Catchup, ApiError> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    match compact.as_str() {
        "latest" => return Ok(Catchup::Latest),
        "none" => return Ok(Catchup::None),
        _ => {}
    }
    compact
        .strip_prefix("all(max:")
        .and_then(|rest| rest.strip_suffix(')'))
        .and_then(|n| n.parse().ok())
        .map(|max| Catchup::All { max })
        .ok_or_else(|| {
            invalid(format!(
                "`catchup` is `{text}`: one of `latest`, `all(max: N)`, `none`"
            ))
        })
}

impl CreateBody {
    fn schedule(&self) -> Result<Schedule, ApiError> {
        let mut schedule = Schedule::new(self.cron.clone());
        if let Some(tz) = &self.tz {
            schedule.tz = tz.clone();
        }
        if let Some(text) = &self.overlap {
            schedule.overlap = Overlap::parse(text).ok_or_else(|| {
                invalid(format!(
                    "`overlap` is `{text}`: one of {}",
                    Overlap::CHOICES.join(", ")
                ))
            })?;
        }
        if let Some(text) = &self.catchup {
            schedule.catchup = catchup(text)?;
        }
        if let Some(text) = &self.window {
            schedule.window = span("window", text)?;
        }
        if let Some(text) = &self.dst_gap {
            schedule.dst_gap = match text.as_str() {
                "next_valid" => DstGap::NextValid,
                "skip" => DstGap::Skip,
                _ => {
                    return Err(invalid(format!(
                        "`dst_gap` is `{text}`: one of next_valid, skip"
                    )))
                }
            };
        }
        if let Some(text) = &self.jitter {
            schedule.jitter = Some(span("jitter", text)?);
        }
        schedule
            .validate()
            .map_err(|error| invalid(error.to_string()))?;
        Ok(schedule)
    }
}

async fn create(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Json(body): Json<CreateBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    app.require(&caller, Action::Schedule, &body.workflow, false)
        .await?;
    if body.id.is_empty() || body.id.len() > MAX_ID || body.id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "a schedule id is 1 to {MAX_ID} bytes without control characters"
        )));
    }
    let schedule = body.schedule()?;
    let store = &**app.engine.store();
    let existing = match rows::get(store, &body.id).await {
        Ok(row) => Some(row),
        Err(RowError::Unknown(_)) => None,
        Err(error) => return Err(error.into()),
    };
    if let Some(existing) = &existing {
        if existing.workflow != body.workflow {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "schedule_exists",
                format!(
                    "schedule `{}` exists and starts another workflow; delete it first or choose another id",
                    body.id
                ),
            ));
        }
    }
    let row = app
        .engine
        .schedules()
        .create(&body.id, &body.workflow, schedule)
        .await?;
    let now = app.engine.now();
    let status = if existing.is_some() {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        Json(info_json(&rows::info(row, now, DEFAULT_NEXT), now)),
    ))
}

fn done(id: &str, what: &str, caller: &Caller) -> Json<Value> {
    Json(json!({ "schedule": id, "done": what, "by": caller.identity().name() }))
}

async fn pause(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    app.changeable_schedule(&caller, &id).await?;
    app.engine.schedules().pause(&id).await?;
    tracing::info!(schedule = %id, by = %caller.identity(), "schedule paused");
    Ok(done(&id, "paused", &caller))
}

async fn resume(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    app.changeable_schedule(&caller, &id).await?;
    app.engine.schedules().resume(&id).await?;
    tracing::info!(schedule = %id, by = %caller.identity(), "schedule resumed");
    Ok(done(&id, "resumed", &caller))
}

async fn delete(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    app.changeable_schedule(&caller, &id).await?;
    app.engine.schedules().delete(&id).await?;
    tracing::info!(schedule = %id, by = %caller.identity(), "schedule deleted");
    Ok(done(&id, "deleted", &caller))
}

async fn trigger(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<String>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let row = app.changeable_schedule(&caller, &id).await?;
    let now = app.engine.now();
    if !app.runs_here(&row.workflow) {
        rows::request_ticks(&**app.engine.store(), &id, &[now]).await?;
        return Ok((
            StatusCode::ACCEPTED,
            Json(json!({ "schedule": id, "run": null, "requested": [now] })),
        ));
    }
    let run = app.engine.schedules().trigger(&id).await?;
    tracing::info!(schedule = %id, %run, by = %caller.identity(), "schedule triggered");
    Ok((
        StatusCode::CREATED,
        Json(json!({ "schedule": id, "run": run.to_string(), "scheduled_ms": now })),
    ))
}

/// A backfill: `from` and `to` as RFC 3339 times (or ms since the epoch), both included.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackfillBody {
    from: Value,
    to: Value,
    #[serde(default)]
    dry_run: bool,
}

fn instant(key: &str, value: &Value) -> Result<u64, ApiError> {
    let parsed = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(text) => rows::parse_instant(text),
        _ => None,
    };
    parsed.ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{key}` is {value}: give an RFC 3339 time such as \"2026-01-05T09:00:00Z\" or ms since the epoch"
        ))
    })
}

async fn backfill(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<String>,
    Json(body): Json<BackfillBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let row = app.changeable_schedule(&caller, &id).await?;
    let from = instant("from", &body.from)?;
    let to = instant("to", &body.to)?;
    if to < from {
        return Err(ApiError::bad_request("`to` is before `from`"));
    }
    let tick_json = |scheduled: u64, local: &str, run: Option<String>, created: bool| json!({ "scheduled_ms": scheduled, "scheduled": local, "run": run, "created": created });
    if body.dry_run || !app.runs_here(&row.workflow) {
        let ticks = rows::ticks_between(&row, from, to)?;
        if !body.dry_run {
            let times: Vec<u64> = ticks.iter().map(|(at, _)| *at).collect();
            rows::request_ticks(&**app.engine.store(), &id, &times).await?;
            tracing::info!(schedule = %id, ticks = times.len(), by = %caller.identity(), "backfill requested");
        }
        let list: Vec<Value> = ticks
            .iter()
            .map(|(at, local)| tick_json(*at, local.as_str(), None, false))
            .collect();
        let status = if body.dry_run {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        };
        return Ok((
            status,
            Json(json!({ "schedule": id, "dry_run": body.dry_run, "ticks": list })),
        ));
    }
    let ticks = app
        .engine
        .schedules()
        .backfill(&id, from, to, false)
        .await?;
    tracing::info!(schedule = %id, ticks = ticks.len(), by = %caller.identity(), "backfill started");
    let list: Vec<Value> = ticks
        .iter()
        .map(|tick| {
            tick_json(
                tick.scheduled,
                tick.local.as_str(),
                tick.run.map(|run| run.to_string()),
                tick.created,
            )
        })
        .collect();
    Ok((
        StatusCode::OK,
        Json(json!({ "schedule": id, "dry_run": false, "ticks": list })),
    ))
}

/// A record of missed ticks as the API shows it.
pub(crate) fn missed_json(missed: &MissedTicks) -> Value {
    json!({
        "first_ms": missed.first,
        "first": rfc3339(missed.first),
        "last_ms": missed.last,
        "last": rfc3339(missed.last),
        "count": missed.count,
        "recorded_at": missed.recorded_at,
    })
}

#[derive(Debug, Deserialize)]
struct MissedQuery {
    limit: Option<usize>,
}

async fn missed(
    State(app): State<Shared>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<String>,
    query: Result<Query<MissedQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) = query.map_err(|r| ApiError::bad_request(r.body_text()))?;
    app.visible_schedule(&caller, &id).await?;
    let limit = query.limit.unwrap_or(100).clamp(1, MAX_MISSED);
    let records = app.engine.schedules().missed(&id, limit).await?;
    Ok(Json(json!({
        "schedule": id,
        "missed": records.iter().map(missed_json).collect::<Vec<_>>(),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_catchups_read_as_a_spec_writes_them() {
        assert_eq!(span("window", "6h").unwrap(), Duration::from_secs(21_600));
        assert_eq!(span("jitter", "90s").unwrap(), Duration::from_secs(90));
        assert_eq!(span("window", "2d").unwrap(), Duration::from_secs(172_800));
        for bad in ["6", "h", "6 hours", "-1h", "1.5h", ""] {
            let error = span("window", bad).unwrap_err();
            assert_eq!(error.code, "invalid_schedule", "{bad}");
        }
        assert_eq!(catchup("latest").unwrap(), Catchup::Latest);
        assert_eq!(catchup("all(max: 3)").unwrap(), Catchup::All { max: 3 });
        assert_eq!(catchup("none").unwrap(), Catchup::None);
        assert!(catchup("all").is_err());
        assert!(catchup("all(max: x)").is_err());
    }
}

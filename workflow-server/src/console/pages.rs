//! The console's dead letters and schedules.

use std::collections::BTreeMap;

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html as HtmlBody, IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use workflow_core::admin::schedules as rows;
use workflow_core::store::DeadLetter;

use super::runs::time;
use super::{check_csrf, failing, first, parse_time, MAX_FORM};
use crate::error::ApiError;
use crate::inbox::{query_escape, PageCaller, PageError};
use crate::permissions::Action;
use crate::view::REDACTED;
use crate::Shared;

/// The runs a group of dead letters links to, newest first.
const GROUP_RUNS: usize = 10;

pub(super) async fn dead_letters(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let mut specs = crate::access::SpecCache::default();
    // Grouped by workflow, step and error kind; each group newest first.
    let mut groups: BTreeMap<(String, String, String), Vec<DeadLetter>> = BTreeMap::new();
    for letter in app
        .engine
        .dead_letters()
        .await
        .map_err(|e| fail(e.into()))?
    {
        let visible = if app
            .allows(&caller, Action::View, &letter.workflow, false)
            .await
            .map_err(&fail)?
        {
            true
        } else {
            match app
                .engine
                .store()
                .load(letter.run)
                .await
                .map_err(|e| fail(e.into()))?
            {
                Some(stored) => {
                    let spec = specs
                        .get(&app, &stored.record.fingerprint)
                        .await
                        .map_err(&fail)?;
                    app.may_view(&caller, &letter.workflow, spec)
                        .await
                        .map_err(&fail)?
                }
                None => false,
            }
        };
        if visible {
            let key = (
                letter.workflow.clone(),
                letter.step.clone(),
                letter.kind.to_string(),
            );
            groups.entry(key).or_default().push(letter);
        }
    }
    let mut shown = Vec::with_capacity(groups.len());
    for ((workflow, step, kind), mut letters) in groups {
        letters.sort_by_key(|letter| std::cmp::Reverse(letter.at));
        let entitled = app.entitled(&caller, &workflow).await.map_err(&fail)?;
        let retry = app
            .allows(&caller, Action::Retry, &workflow, false)
            .await
            .map_err(&fail)?;
        shown.push((workflow, step, kind, letters, entitled, retry));
    }
    let base = &app.base;
    let total: usize = shown.iter().map(|g| g.3.len()).sum();
    let body = html! {
        @if shown.is_empty() {
            p id="empty" { "No dead letters." }
        } @else {
            p class="meta" id="count" { (total) " failed runs in " (shown.len()) " groups, by workflow, step and error kind." }
            table id="dead-letters" {
                thead { tr { th scope="col" { "Workflow" } th scope="col" { "Step" } th scope="col" { "Error kind" } th scope="col" { "Runs" } th scope="col" { "Latest" } th scope="col" { "Latest message" } th scope="col" { "Action" } } }
                tbody {
                    @for (workflow, step, kind, letters, entitled, retry) in &shown {
                        tr {
                            td { (workflow) }
                            td { (if step.is_empty() { "(the run)" } else { step.as_str() }) }
                            td { code { (kind) } }
                            td {
                                (letters.len()) ": "
                                @for letter in letters.iter().take(GROUP_RUNS) {
                                    a href={ (base) "/console/runs/" (letter.run) } { (letter.run) } " "
                                }
                                @if letters.len() > GROUP_RUNS { "…" }
                            }
                            td { (time(letters[0].at)) }
                            td class="message" { (if *entitled { letters[0].message.as_str() } else { REDACTED }) }
                            td {
                                @if *retry {
                                    form method="get" action={ (base) "/console/runs/bulk" } class="inline" {
                                        input type="hidden" name="action" value="retry";
                                        @for letter in letters.iter().take(super::BULK_MAX) {
                                            input type="hidden" name="run" value=(letter.run);
                                        }
                                        button type="submit" { "Retry these " (letters.len().min(super::BULK_MAX)) "…" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    let html = crate::html::shell("Dead letters", Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

/// How many next fire times the schedules page shows.
const NEXT: usize = 3;

pub(super) async fn schedules(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let now = app.engine.now();
    let mut shown = Vec::new();
    for info in rows::list(&**app.engine.store(), now, NEXT)
        .await
        .map_err(|e| fail(e.into()))?
    {
        let workflow = &info.row.workflow;
        if !app
            .allows(&caller, Action::View, workflow, false)
            .await
            .map_err(&fail)?
        {
            continue;
        }
        let change = app
            .allows(&caller, Action::Schedule, workflow, false)
            .await
            .map_err(&fail)?;
        shown.push((info, change));
    }
    let base = &app.base;
    let csrf = app.csrf.token(who);
    let body = html! {
        @if shown.is_empty() {
            p id="empty" { "No schedules you may see." }
        } @else {
            table id="schedules" {
                thead { tr {
                    th scope="col" { "Schedule" } th scope="col" { "Workflow" } th scope="col" { "When" }
                    th scope="col" { "Next fires (its zone)" } th scope="col" { "Last run" } th scope="col" { "Lag" }
                    th scope="col" { "Missed" } th scope="col" { "Actions" }
                } }
                tbody {
                    @for (info, change) in &shown {
                        @let row = &info.row;
                        @let state = &row.state;
                        tr id={ "schedule-" (row.id) } {
                            td { (row.id) }
                            td { (row.workflow) }
                            td { code { (row.schedule.cron) } " " (row.schedule.tz) }
                            td {
                                @if row.paused {
                                    span class="state cs-skipped" { "‖ paused" }
                                } @else {
                                    ul class="plain" { @for next in &info.next_local { li { (next) } } }
                                }
                            }
                            td {
                                @if let Some(run) = state.last_run {
                                    a href={ (base) "/console/runs/" (run) } { (run) }
                                    @if let Some(fired) = state.last_fired { " " (time(fired)) }
                                } @else { "none yet" }
                            }
                            td {
                                @if let (Some(fired), Some(tick)) = (state.last_fired, state.last_tick) {
                                    (super::states::duration(fired.saturating_sub(tick)))
                                }
                            }
                            td {
                                (state.missed)
                                @if let Some(last) = state.last_missed { ", last " (time(last)) }
                            }
                            td {
                                @if *change {
                                    @for (what, label) in [(if row.paused { "resume" } else { "pause" }, if row.paused { "Resume" } else { "Pause" }), ("trigger", "Trigger now")] {
                                        form method="post" action={ (base) "/console/schedules/" (query_escape(&row.id)) "/" (what) } class="inline" {
                                            input type="hidden" name="csrf" value=(csrf);
                                            button type="submit" { (label) }
                                        }
                                    }
                                    a href={ (base) "/console/schedules/" (query_escape(&row.id)) "/backfill" } { "Backfill…" }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    let html = crate::html::shell("Schedules", Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

/// `POST /console/schedules/{id}/{pause|resume|trigger}`, as the API's routes of the same
/// names; answers 303 to the schedules page.
pub(super) async fn change_schedule(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path((id, change)): Path<(String, String)>,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let Form(pairs) = form.map_err(|rejection| {
        fail(if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_FORM)
        } else {
            ApiError::bad_request(rejection.body_text())
        })
    })?;
    check_csrf(&app, who, first(&pairs, "csrf")).map_err(&fail)?;
    if !["pause", "resume", "trigger"].contains(&change.as_str()) {
        return Err(fail(ApiError::not_found(format!(
            "no schedule change `{change}`; one of pause, resume, trigger"
        ))));
    }
    let row = app.changeable_schedule(&caller, &id).await.map_err(&fail)?;
    let schedules = app.engine.schedules();
    match change.as_str() {
        "pause" => schedules.pause(&id).await.map_err(|e| fail(e.into()))?,
        "resume" => schedules.resume(&id).await.map_err(|e| fail(e.into()))?,
        _ if app.runs_here(&row.workflow) => {
            schedules.trigger(&id).await.map_err(|e| fail(e.into()))?;
        }
        _ => {
            rows::request_ticks(&**app.engine.store(), &id, &[app.engine.now()])
                .await
                .map_err(|e| fail(e.into()))?;
        }
    }
    tracing::info!(schedule = %id, by = %who, change, "schedule changed from the console");
    Ok(Redirect::to(&format!("{}/console/schedules", app.base)).into_response())
}

/// The most ticks a backfill's dry run lists (it counts them all).
const LISTED_TICKS: usize = 100;

/// A backfill's range from a query's or a form's `from` and `to` (UTC; a date alone is
/// its whole day), or `None` when neither is given; 400 `bad_request` otherwise.
fn range(pairs: &[(String, String)]) -> Result<Option<(u64, u64)>, ApiError> {
    let text = |name| first(pairs, name).map(str::trim).filter(|t| !t.is_empty());
    match (text("from"), text("to")) {
        (None, None) => Ok(None),
        (Some(from), Some(to)) => {
            let (from, to) = (parse_time(from, false)?, parse_time(to, true)?);
            if to < from {
                return Err(ApiError::bad_request("`to` is before `from`"));
            }
            Ok(Some((from, to)))
        }
        _ => Err(ApiError::bad_request(
            "a backfill needs both `from` and `to`",
        )),
    }
}

/// `GET /console/schedules/{id}/backfill?from=&to=`: the dry run of a backfill, the ticks
/// it would start, and the form that starts them (without a range, the form for one).
pub(super) async fn backfill_preview(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(id): Path<String>,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let Query(pairs) = pairs.map_err(|r| fail(ApiError::bad_request(r.body_text())))?;
    let row = app.changeable_schedule(&caller, &id).await.map_err(&fail)?;
    let range = range(&pairs).map_err(&fail)?;
    let ticks = match range {
        Some((from, to)) => Some(rows::ticks_between(&row, from, to).map_err(|e| fail(e.into()))?),
        None => None,
    };
    let base = &app.base;
    let path = format!("{base}/console/schedules/{}/backfill", query_escape(&id));
    let from = first(&pairs, "from").unwrap_or("");
    let to = first(&pairs, "to").unwrap_or("");
    let title = match &ticks {
        Some(ticks) => format!(
            "Backfill {} tick{} of {id}?",
            ticks.len(),
            if ticks.len() == 1 { "" } else { "s" }
        ),
        None => format!("Backfill {id}"),
    };
    let body = html! {
        p class="meta" { "Schedule " b { (row.id) } " starts " (row.workflow) " at " code { (row.schedule.cron) } " in " (row.schedule.tz) "." }
        form method="get" action=(path) id="range" {
            label { "From (UTC) " input name="from" placeholder="2026-07-18" value=(from) required; }
            " "
            label { "to " input name="to" placeholder="2026-07-18T23:59" value=(to) required; }
            " "
            button type="submit" { "Show the ticks" }
        }
        @if let Some(ticks) = &ticks {
            @if ticks.is_empty() {
                p id="empty" { "No tick of this schedule falls in that range." }
            } @else {
                p id="dry-run" { "A dry run: nothing started yet. Each tick starts one run under its tick's key, so a tick that ran already does not run again." }
                table id="ticks" {
                    thead { tr { th scope="col" { "Tick (UTC)" } th scope="col" { "In its zone" } } }
                    tbody {
                        @for (at, local) in ticks.iter().take(LISTED_TICKS) {
                            tr { td { (time(*at)) } td { (local) } }
                        }
                    }
                }
                @if ticks.len() > LISTED_TICKS { p class="meta" { "… and " (ticks.len() - LISTED_TICKS) " more." } }
                form method="post" action=(path) id="confirm" {
                    input type="hidden" name="csrf" value=(app.csrf.token(who));
                    input type="hidden" name="from" value=(from);
                    input type="hidden" name="to" value=(to);
                    button type="submit" id="yes" { "Yes, start " (ticks.len()) " run" (if ticks.len() == 1 { "" } else { "s" }) }
                    " "
                    a href={ (base) "/console/schedules" } { "No, go back" }
                }
            }
        }
    };
    let html = crate::html::shell(&title, Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

/// `POST /console/schedules/{id}/backfill`: starts the ticks of the range, as the API's
/// backfill does (on an engine without the workflow, leaves them for one that has it).
pub(super) async fn backfill(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(id): Path<String>,
    form: Result<Form<Vec<(String, String)>>, FormRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let Form(pairs) = form.map_err(|rejection| {
        fail(if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(MAX_FORM)
        } else {
            ApiError::bad_request(rejection.body_text())
        })
    })?;
    check_csrf(&app, who, first(&pairs, "csrf")).map_err(&fail)?;
    let row = app.changeable_schedule(&caller, &id).await.map_err(&fail)?;
    let Some((from, to)) = range(&pairs).map_err(&fail)? else {
        return Err(fail(ApiError::bad_request(
            "a backfill needs both `from` and `to`",
        )));
    };
    let started: Vec<(u64, String, Option<workflow_core::RunId>)> = if app.runs_here(&row.workflow)
    {
        app.engine
            .schedules()
            .backfill(&id, from, to, false)
            .await
            .map_err(|e| fail(e.into()))?
            .into_iter()
            .map(|tick| (tick.scheduled, tick.local, tick.run))
            .collect()
    } else {
        let ticks = rows::ticks_between(&row, from, to).map_err(|e| fail(e.into()))?;
        let times: Vec<u64> = ticks.iter().map(|(at, _)| *at).collect();
        rows::request_ticks(&**app.engine.store(), &id, &times)
            .await
            .map_err(|e| fail(e.into()))?;
        ticks
            .into_iter()
            .map(|(at, local)| (at, local, None))
            .collect()
    };
    tracing::info!(schedule = %id, ticks = started.len(), by = %who, "backfill from the console");
    let base = &app.base;
    let title = format!(
        "Backfilled {} tick{} of {id}",
        started.len(),
        if started.len() == 1 { "" } else { "s" }
    );
    let body = html! {
        table id="ticks" {
            thead { tr { th scope="col" { "Tick (UTC)" } th scope="col" { "In its zone" } th scope="col" { "Run" } } }
            tbody {
                @for (at, local, run) in started.iter().take(LISTED_TICKS) {
                    tr {
                        td { (time(*at)) }
                        td { (local) }
                        td {
                            @match run {
                                Some(run) => a href={ (base) "/console/runs/" (run) } { (run) },
                                None => "left for a worker with the workflow",
                            }
                        }
                    }
                }
            }
        }
        p { a href={ (base) "/console/schedules" } { "Back to the schedules" } }
    };
    let html = crate::html::shell(&title, Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

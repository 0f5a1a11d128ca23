//! The console's dead letters and schedules.

use std::collections::BTreeMap;

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html as HtmlBody, IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use workflow_core::admin::schedules as rows;
use workflow_core::store::DeadLetter;

use super::runs::time;
use super::{check_csrf, failing, first, MAX_FORM};
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
                thead { tr { th scope="col" { "Workflow" } th scope="col" { "Step" } th scope="col" { "Error kind" } th scope="col" { "Runs" } th scope="col" { "Latest" } th scope="col" { "Latest message" } th scope="col" { "" } } }
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
                                    a href={ (base) "/console/runs/bulk?action=retry&workflow=" (query_escape(workflow)) } { "Retry " (workflow) "'s failed runs…" }
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
                    th scope="col" { "Missed" } th scope="col" { "" }
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
                                }
                            }
                        }
                    }
                }
            }
            p class="meta" { "Backfills (with their dry run) are on the API: " code { "POST /api/schedules/{id}/backfill" } "." }
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

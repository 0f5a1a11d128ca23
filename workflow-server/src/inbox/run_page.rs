//! `GET /inbox/runs/{run}`: a run's diagram, state, steps, audit trail and timeline, with
//! the cards of the tasks the person may decide, and the confirmation of a decision just
//! made.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use maud::{html, Markup, PreEscaped};
use serde::Deserialize;
use workflow_core::journal::Event;
use workflow_core::spec::StepKind;
use workflow_core::{admin, TaskInfo};

use super::card::task_card;
use super::{fail, PageCaller, PageError};
use crate::auth::Identity;
use crate::html::{page, time, words};
use crate::view::{self, parse_run, rfc3339};
use crate::{App, Shared};

#[derive(Debug, Deserialize)]
pub(super) struct RunQuery {
    pub(super) decided: Option<String>,
}

pub(super) async fn run_page(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
    query: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = fail(&app, who);
    let run = parse_run(&run).map_err(&fail)?;
    let loaded = app.view_run(&caller, run).await.map_err(&fail)?;
    let shown = loaded.payloads;
    let detail = &loaded.detail;
    let confirmed = query
        .ok()
        .and_then(|Query(q)| q.decided)
        .map(|step| confirmation(&app, who, &loaded, &step));
    let tasks: Vec<TaskInfo> = {
        let stored = workflow_core::store::StoredRun {
            record: loaded.record.clone(),
            events: loaded.events.clone(),
        };
        admin::tasks_of(&loaded.spec, &stored)
    };
    let cards: Vec<Markup> = tasks
        .iter()
        .filter(|task| app.admitted(&task.assignee, who.name()))
        .map(|task| task_card(&app, who, task, &loaded.spec, &loaded.events, shown, false))
        .collect();
    let now = app.engine.now();
    let body = html! {
        @if let Some(confirmed) = confirmed {
            (confirmed)
        }
        p {
            "Workflow " b { (detail.workflow) } ", status "
            span class="status" id="status" { (detail.status) }
            @if let Some(note) = &detail.note { " — " (note) }
        }
        @if let Some(trace) = &detail.trace_id {
            p { "Trace " code id="trace" { (trace) } }
        }
        @if let Some(reason) = detail.redacted {
            p class="meta" id="redacted" {
                "Payloads, failure messages and key values are redacted: " (reason) "."
            }
        }
        @for wait in &detail.waits_for {
            p class="waits" { (wait) }
        }
        @if let Some(tick) = &detail.tick {
            (scheduled_by(tick))
        }
        p { a id="console" href={ (app.base) "/console/runs/" (run) } { "This run in the console" } }
        figure id="diagram" {
            // The diagram is drawn from the spec (identifiers written in code, escaped by
            // the renderer), never from payloads or people's text.
            (PreEscaped(loaded.svg()))
        }
        @for card in cards {
            (card)
        }
        h2 { "Steps" }
        table id="steps" {
            tr { th { "Step" } th { "State" } th { "Detail" } }
            @for (index, step) in detail.steps.iter().enumerate() {
                @let human = matches!(
                    loaded.spec.steps.get(index).map(|s| &s.kind),
                    Some(StepKind::Human(_))
                );
                tr {
                    td { (step.id) }
                    td { (step.state) }
                    td {
                        @match human.then(|| human_detail(now, &loaded.events, index)).flatten() {
                            Some(detail) => (detail),
                            None => {
                                @match step.attempts {
                                    0 if human => "not opened yet",
                                    1 => "1 attempt",
                                    n => { (n) " attempts" }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Audit" }
        table id="audit" {
            tr { th { "When" } th { "Who" } th { "What" } th { "Step" } th { "Detail" } }
            @for entry in &detail.audit {
                tr {
                    td { (rfc3339(entry.at)) }
                    td {
                        (entry.who)
                        @if let Some(via) = &entry.via { " via " (via) }
                    }
                    td { (entry.action) }
                    td { (entry.step.as_deref().unwrap_or("")) }
                    td { (entry.detail) }
                }
            }
        }
        h2 { "Timeline" }
        table id="timeline" {
            tr { th { "When" } th { "Event" } th { "Step" } th { "Detail" } }
            @for entry in &detail.timeline {
                tr {
                    td { (rfc3339(entry.at)) }
                    td { (entry.event) }
                    td { (entry.step.as_deref().unwrap_or("")) }
                    td { (entry.detail) }
                }
            }
        }
    };
    let html = page(&run.to_string(), Some(who.name()), &app.base, body);
    Ok(HtmlBody(html).into_response())
}

/// Which schedule's tick started the run: its scheduled time and when it fired.
fn scheduled_by(tick: &workflow_core::Tick) -> Markup {
    html! {
        p id="tick" {
            "Started by schedule " b { (tick.schedule) } " for its tick of "
            time { (rfc3339(tick.scheduled)) } ", fired " time { (rfc3339(tick.fired)) }
            (format!(" (lag {:.1} s)", tick.lag_ms() as f64 / 1000.0))
        }
    }
}

/// What the person just decided, on the page the decision form answers with: the decision
/// as journaled, or that it waits for the engine that runs the run.
fn confirmation(app: &App, who: &Identity, loaded: &view::Loaded, step: &str) -> Markup {
    let Some(index) = loaded.spec.step_index(step) else {
        return html! {};
    };
    let decided = loaded.events.iter().rev().find_map(|event| match event {
        Event::TaskDecided {
            step: s,
            by,
            decision,
            at,
            ..
        } if *s == index => Some((by, decision, *at)),
        _ => None,
    });
    html! {
        p class="confirmation" id="confirmation" {
            @match decided {
                Some((by, decision, at)) if by == who.name() => {
                    "Done: you decided “" (words(step)) "”: " (crate::view::decision_text(decision)) " "
                    (time(app.engine.now(), at)) "."
                }
                Some((by, _, _)) => {
                    "“" (words(step)) "” was decided by " (by) " before you."
                }
                None => {
                    "Your decision on “" (words(step)) "” was sent; it is recorded when the engine running this run takes it in."
                }
            }
            " "
            a href={ (app.base) "/inbox" } { "Back to your tasks" }
        }
    }
}

/// A human step's state in words, from the journal: waiting since when and for whom,
/// decided by whom and when, or expired; `None` before its task opened.
fn human_detail(now: u64, events: &[Event], step: usize) -> Option<Markup> {
    let last = events.iter().rev().find(|event| {
        matches!(event,
            Event::TaskOpened { step: s, .. }
            | Event::TaskEscalated { step: s, .. }
            | Event::TaskDecided { step: s, .. }
            | Event::TaskExpired { step: s, .. } if *s == step)
    })?;
    Some(match last {
        Event::TaskOpened {
            assignee: who, at, ..
        }
        | Event::TaskEscalated { to: who, at, .. } => {
            html! { "waiting for " (who) " since " (time(now, *at)) }
        }
        event @ Event::TaskDecided {
            by, decision, at, ..
        } => html! {
            (crate::view::decision_text(decision)) " by " (crate::view::decider(by, event)) " "
            (time(now, *at))
        },
        Event::TaskExpired { at, .. } => html! { "expired " (time(now, *at)) },
        _ => return None,
    })
}

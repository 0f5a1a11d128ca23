//! `GET /inbox/runs/{run}`: a run's diagram, state, steps, audit trail and timeline, with
//! the cards of the tasks the person may decide, and the confirmation of a decision just
//! made.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use serde::Deserialize;
use workflow_core::journal::Event;
use workflow_core::spec::StepKind;
use workflow_core::{admin, TaskInfo};

use super::card::task_card;
use super::{fail, PageCaller, PageError};
use crate::auth::Identity;
use crate::html::{page, words, Html};
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
    let mut body = Html::new();
    if let Some(step) = query.ok().and_then(|Query(q)| q.decided) {
        confirmation(&mut body, &app, who, &loaded, &step);
    }
    body.raw("<p>Workflow ")
        .element("b", &detail.workflow)
        .raw(", status <span class=\"status\" id=\"status\">")
        .text(detail.status)
        .raw("</span>");
    if let Some(note) = &detail.note {
        body.raw(" — ").text(note);
    }
    if let Some(trace) = &detail.trace_id {
        body.raw("</p><p>Trace <code id=\"trace\">")
            .text(trace)
            .raw("</code>");
    }
    body.raw("</p>");
    if let Some(reason) = detail.redacted {
        body.raw("<p class=\"meta\" id=\"redacted\">")
            .text(&format!(
                "Payloads, failure messages and key values are redacted: {reason}."
            ))
            .raw("</p>");
    }
    for wait in &detail.waits_for {
        body.raw("<p class=\"waits\">").text(wait).raw("</p>");
    }
    if let Some(tick) = &detail.tick {
        scheduled_by(&mut body, tick);
    }
    body.raw("<figure id=\"diagram\">")
        // The diagram is drawn from the spec (identifiers written in code), never from
        // payloads or people's text.
        .raw(&loaded.svg())
        .raw("</figure>");
    let tasks: Vec<TaskInfo> = {
        let stored = workflow_core::store::StoredRun {
            record: app
                .engine
                .inspect(run)
                .await
                .map_err(|e| fail(e.into()))?
                .record,
            events: loaded.events.clone(),
        };
        admin::tasks_of(&loaded.spec, &stored)
    };
    for task in tasks
        .iter()
        .filter(|task| app.admitted(&task.assignee, who.name()))
    {
        task_card(
            &app,
            who,
            &mut body,
            task,
            &loaded.spec,
            &loaded.events,
            shown,
            false,
        );
    }
    body.raw(
        "<h2>Steps</h2><table id=\"steps\"><tr><th>Step</th><th>State</th><th>Detail</th></tr>",
    );
    let now = app.engine.now();
    for (index, step) in detail.steps.iter().enumerate() {
        body.raw("<tr>")
            .element("td", &step.id)
            .element("td", step.state)
            .raw("<td>");
        let human = matches!(
            loaded.spec.steps.get(index).map(|s| &s.kind),
            Some(StepKind::Human(_))
        );
        if !(human && human_detail(&mut body, now, &loaded.events, index)) {
            body.text(&match step.attempts {
                0 if human => "not opened yet".to_owned(),
                1 => "1 attempt".to_owned(),
                n => format!("{n} attempts"),
            });
        }
        body.raw("</td></tr>");
    }
    body.raw("</table><h2>Audit</h2><table id=\"audit\"><tr><th>When</th><th>Who</th><th>What</th><th>Step</th><th>Detail</th></tr>");
    for entry in &detail.audit {
        let who = match &entry.via {
            Some(via) => format!("{} via {via}", entry.who),
            None => entry.who.clone(),
        };
        body.row(&[
            &rfc3339(entry.at),
            &who,
            entry.action,
            entry.step.as_deref().unwrap_or(""),
            &entry.detail,
        ]);
    }
    body.raw("</table><h2>Timeline</h2><table id=\"timeline\"><tr><th>When</th><th>Event</th><th>Step</th><th>Detail</th></tr>");
    for entry in &detail.timeline {
        body.row(&[
            &rfc3339(entry.at),
            &entry.event,
            entry.step.as_deref().unwrap_or(""),
            &entry.detail,
        ]);
    }
    body.raw("</table>");
    let html = page(
        &run.to_string(),
        Some(who.name()),
        &app.base,
        &body.finish(),
    );
    Ok(HtmlBody(html).into_response())
}

/// Which schedule's tick started the run: its scheduled time and when it fired.
fn scheduled_by(body: &mut Html, tick: &workflow_core::Tick) {
    body.raw("<p id=\"tick\">Started by schedule ")
        .element("b", &tick.schedule)
        .raw(" for its tick of ")
        .element("time", &rfc3339(tick.scheduled))
        .raw(", fired ")
        .element("time", &rfc3339(tick.fired))
        .text(&format!(" (lag {:.1} s)", tick.lag_ms() as f64 / 1000.0))
        .raw("</p>");
}

/// What the person just decided, on the page the decision form answers with: the decision
/// as journaled, or that it waits for the engine that runs the run.
fn confirmation(body: &mut Html, app: &App, who: &Identity, loaded: &view::Loaded, step: &str) {
    let Some(index) = loaded.spec.step_index(step) else {
        return;
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
    body.raw("<p class=\"confirmation\" id=\"confirmation\">");
    match decided {
        Some((by, decision, at)) if by == who.name() => {
            body.text(&format!(
                "Done: you decided “{}”: {} ",
                words(step),
                crate::view::decision_text(decision)
            ))
            .time(app.engine.now(), at)
            .text(".");
        }
        Some((by, _, _)) => {
            body.text(&format!(
                "“{}” was decided by {by} before you.",
                words(step)
            ));
        }
        None => {
            body.text(&format!(
                "Your decision on “{}” was sent; it is recorded when the engine running this \
                 run takes it in.",
                words(step)
            ));
        }
    }
    body.raw(" ")
        .link(&format!("{}/inbox", app.base), "Back to your tasks")
        .raw("</p>");
}

/// A human step's state in words, from the journal: waiting since when and for whom,
/// decided by whom and when, or expired.
fn human_detail(html: &mut Html, now: u64, events: &[Event], step: usize) -> bool {
    let last = events.iter().rev().find(|event| {
        matches!(event,
            Event::TaskOpened { step: s, .. }
            | Event::TaskEscalated { step: s, .. }
            | Event::TaskDecided { step: s, .. }
            | Event::TaskExpired { step: s, .. } if *s == step)
    });
    match last {
        Some(Event::TaskOpened {
            assignee: who, at, ..
        })
        | Some(Event::TaskEscalated { to: who, at, .. }) => {
            html.text(&format!("waiting for {who} since "))
                .time(now, *at);
        }
        Some(
            event @ Event::TaskDecided {
                by, decision, at, ..
            },
        ) => {
            html.text(&format!(
                "{} by {} ",
                crate::view::decision_text(decision),
                crate::view::decider(by, event)
            ))
            .time(now, *at);
        }
        Some(Event::TaskExpired { at, .. }) => {
            html.text("expired ").time(now, *at);
        }
        _ => return false,
    }
    true
}

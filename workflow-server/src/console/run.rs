//! `GET /console/runs/{run}`: one run on its spec's diagram, each step's state (by colour,
//! outline, symbol and words), attempts, duration, errors, tasks and decisions; the
//! attempts over time; the journal, paged; parent and children; the schedule's tick;
//! what it waits for; its trace; cancel, retry and restart (`change`) behind a
//! confirmation. A running run's page follows `GET /console/runs/{run}/live` (`live`).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use maud::{html, Markup, PreEscaped};
use serde_json::Value;
use workflow_core::journal::{Event, Timestamp};
use workflow_core::spec::StepKind;
use workflow_core::store::RunStatus;
use workflow_core::{ErrorKind, RunId};

use super::failing;
use super::runs::{status_badge, time};
use super::states::{diagram, duration, shown, span, Shown};
use crate::error::ApiError;
use crate::html::value;
use crate::inbox::{query_escape, PageCaller, PageError};
use crate::permissions::Action;
use crate::view::{parse_run, Loaded, REDACTED};
use crate::{App, Shared};

/// The journal entries one page of a run's journal shows.
pub const JOURNAL_PAGE: usize = 50;

/// One attempt of a step, from the journal.
#[derive(Debug, Clone, PartialEq)]
struct Attempt {
    number: u32,
    started: Timestamp,
    ended: Option<Timestamp>,
    /// `None` while it runs; `Ok` with the output, or the error's kind and message.
    outcome: Option<Result<Value, (ErrorKind, String)>>,
}

/// The attempts of step `step`, in order.
fn attempts(events: &[Event], step: usize) -> Vec<Attempt> {
    let mut out: Vec<Attempt> = Vec::new();
    for event in events {
        match event {
            Event::AttemptStarted {
                step: s,
                attempt,
                at,
            } if *s == step => out.push(Attempt {
                number: *attempt,
                started: *at,
                ended: None,
                outcome: None,
            }),
            Event::AttemptFailed {
                step: s,
                attempt,
                kind,
                message,
                at,
                ..
            } if *s == step => {
                if let Some(a) = out.iter_mut().rev().find(|a| a.number == *attempt) {
                    a.ended = Some(*at);
                    a.outcome = Some(Err((*kind, message.clone())));
                }
            }
            Event::StepSucceeded {
                step: s,
                output,
                at,
            } if *s == step => {
                if let Some(a) = out.last_mut().filter(|a| a.outcome.is_none()) {
                    a.ended = Some(*at);
                    a.outcome = Some(Ok(output.clone()));
                }
            }
            _ => {}
        }
    }
    out
}

/// The paths of a browser step's evidence named in a failure's message
/// (`... [evidence: /a/shot.png, /a/page.html]`).
fn evidence(message: &str) -> Vec<&str> {
    message
        .rsplit_once("[evidence: ")
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .map(|list| list.split(", ").filter(|p| !p.is_empty()).collect())
        .unwrap_or_default()
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct RunQuery {
    journal: Option<usize>,
    done: Option<String>,
}

/// The link of a trace id through the server's template, when it is an OpenTelemetry id.
fn trace_link(app: &App, trace: &str) -> Option<String> {
    let template = app.trace_url.as_ref()?;
    let hex = trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit());
    hex.then(|| template.replace("{trace_id}", &query_escape(trace)))
}

pub(super) async fn page(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
    query: Result<Query<RunQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let run = parse_run(&run).map_err(&fail)?;
    let Query(query) = query.map_err(|r| fail(ApiError::bad_request(r.body_text())))?;
    let loaded = app.view_run(&caller, run).await.map_err(&fail)?;
    let workflow = loaded.record.workflow.clone();
    // What the page offers; the routes behind the buttons ask the policy again.
    let status = loaded.record.status;
    let may = |action| app.allows(&caller, action, &workflow, false);
    let cancel = status == RunStatus::Running && may(Action::Cancel).await.map_err(&fail)?;
    let retry = status == RunStatus::Failed && may(Action::Retry).await.map_err(&fail)?;
    let restart = status != RunStatus::Running && may(Action::Start).await.map_err(&fail)?;
    let actions = Actions {
        cancel,
        retry,
        restart,
    };
    let body = render(
        &app,
        &loaded,
        query.journal.unwrap_or(1),
        actions,
        query.done.as_deref(),
    );
    let html = crate::html::shell(
        &format!("{run} · {workflow}"),
        Some(who.name()),
        &app.base,
        body,
        loaded.record.status == RunStatus::Running,
    );
    Ok(HtmlBody(html).into_response())
}

/// The actions a run's page offers the caller.
#[derive(Debug, Clone, Copy)]
struct Actions {
    cancel: bool,
    retry: bool,
    restart: bool,
}

fn render(
    app: &App,
    loaded: &Loaded,
    journal_page: usize,
    actions: Actions,
    done: Option<&str>,
) -> Markup {
    let Actions {
        cancel,
        retry,
        restart,
    } = actions;
    let base = &app.base;
    let detail = &loaded.detail;
    let record = &loaded.record;
    let run = record.id;
    let events = &loaded.events;
    let now = app.engine.now();
    let queued = detail.queued;
    let states: Vec<Shown> = loaded
        .states
        .iter()
        .enumerate()
        .map(|(i, state)| shown(state, i, events, queued))
        .collect();
    let children: Vec<(usize, RunId)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ChildStarted { step, child, .. } => Some((*step, *child)),
            _ => None,
        })
        .collect();
    let running = record.status == RunStatus::Running;
    let pages = detail.timeline.len().div_ceil(JOURNAL_PAGE).max(1);
    let journal_page = journal_page.clamp(1, pages);
    let shown_entries = detail
        .timeline
        .iter()
        .enumerate()
        .skip((journal_page - 1) * JOURNAL_PAGE)
        .take(JOURNAL_PAGE);
    let events_url = format!("{base}/console/runs/{run}/live?seen={}", events.len());
    html! {
        @if let Some(done) = done {
            p class="confirmation" id="confirmation" role="status" {
                @match done {
                    "cancelled" => { "Cancellation sent: the run stops where it is and its compensations run." }
                    "retried" => { "Retry sent: the run starts again from its failed steps." }
                    "restarted" => { "Started with the inputs of the run it restarts." }
                    _ => { "Done." }
                }
            }
        }
        section id="live" data-events=[running.then_some(events_url.as_str())] data-seen=(events.len()) aria-live="polite" {
            p id="summary" {
                "Workflow " b { (record.workflow) } ", status " span id="status" { (status_badge(record.status)) }
                @if let Some(note) = &detail.note { " — " span id="note" { (note) } }
            }
            @if let Some(reason) = detail.redacted {
                p class="meta" id="redacted" { "Payloads, failure messages and key values are redacted: " (reason) "." }
            }
            @if queued {
                p class="waits" id="queued" { "Queued: it waits for a worker to admit it." }
            }
            @for wait in &detail.waits_for {
                p class="waits" { (wait) }
            }
            figure id="diagram" {
                // Drawn from the spec (identifiers written in code), never from payloads
                // or people's text; the step ids in it are escaped.
                (PreEscaped(diagram(&loaded.spec, &states)))
                figcaption class="legend" {
                    @for state in Shown::ALL {
                        span class={ "state cs-" (state.name()) } { (state.symbol()) " " (state.words()) }
                    }
                }
            }
            table id="steps" {
                caption { "Steps" }
                thead { tr { th scope="col" { "Step" } th scope="col" { "State" } th scope="col" { "Attempts" } th scope="col" { "Duration" } } }
                tbody {
                    @for (i, step) in detail.steps.iter().enumerate() {
                        @let state = states.get(i).copied().unwrap_or(Shown::NotStarted);
                        @let (began, settled) = span(events, i);
                        tr id={ "row-" (step.id) } {
                            td { a href={ "#detail-" (step.id) } { (step.id) } }
                            td { span class={ "state cs-" (state.name()) } { (state.symbol()) " " (state.words()) } }
                            td class="attempts" { (step.attempts) }
                            td {
                                @if let Some(began) = began {
                                    (duration(settled.unwrap_or(now).saturating_sub(began)))
                                    @if settled.is_none() { " so far" }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if cancel || retry || restart {
            section id="actions" {
                h2 { "Actions" }
                @if cancel {
                    form method="get" action={ (base) "/console/runs/" (run) "/cancel" } class="inline" {
                        button type="submit" class="reject" id="cancel" { "Cancel this run…" }
                    }
                }
                @if retry {
                    form method="get" action={ (base) "/console/runs/" (run) "/retry" } class="inline" {
                        button type="submit" id="retry" { "Retry this run…" }
                    }
                }
                @if restart {
                    form method="get" action={ (base) "/console/runs/" (run) "/restart" } class="inline" {
                        button type="submit" id="restart" { "Start it again with the same inputs…" }
                    }
                }
            }
        }
        section id="about" {
            h2 { "About" }
            table class="fields" {
                tr { th scope="row" { "Created" } td { (time(record.created_at)) } }
                tr { th scope="row" { "Last change" } td { (time(record.updated_at)) } }
                @if let Some(key) = &record.idempotency_key {
                    tr { th scope="row" { "Idempotency key" } td { code { (key) } } }
                }
                @if let Some(owner) = &record.owner {
                    tr { th scope="row" { "Driven by" } td { (owner) } }
                }
                @if let Some(parent) = record.parent {
                    tr { th scope="row" { "Parent" } td { a id="parent" href={ (base) "/console/runs/" (parent) } { (parent) } } }
                }
                @for (step, child) in &children {
                    tr {
                        th scope="row" { "Child of " (loaded.spec.steps.get(*step).map_or("?", |s| s.id.as_str())) }
                        td { a class="child" href={ (base) "/console/runs/" (child) } { (child) } }
                    }
                }
                @if let Some(tick) = &detail.tick {
                    tr id="tick" {
                        th scope="row" { "Started by schedule" }
                        td { b { (tick.schedule) } " for its tick of " (time(tick.scheduled)) ", fired " (time(tick.fired))
                             (format!(" (lag {:.1} s)", tick.lag_ms() as f64 / 1000.0)) }
                    }
                }
                @if let Some(trace) = &detail.trace_id {
                    tr {
                        th scope="row" { "Trace" }
                        td {
                            @match trace_link(app, trace) {
                                Some(link) => a id="trace" href=(link) rel="noreferrer" { code { (trace) } },
                                None => code id="trace" { (trace) },
                            }
                        }
                    }
                }
                @if let Some(input) = &detail.input {
                    tr { th scope="row" { "Inputs" } td id="input" { (value(input)) } }
                }
            }
        }
        section id="step-details" {
            h2 { "Steps in detail" }
            @for (i, step) in loaded.spec.steps.iter().enumerate() {
                @let tries = attempts(events, i);
                @let audit: Vec<_> = detail.audit.iter().filter(|a| a.step.as_deref() == Some(step.id.as_str())).collect();
                details id={ "detail-" (step.id) } open[!tries.is_empty() || !audit.is_empty()] {
                    summary {
                        (step.id) " — "
                        @let state = states.get(i).copied().unwrap_or(Shown::NotStarted);
                        span class={ "state cs-" (state.name()) } { (state.symbol()) " " (state.words()) }
                    }
                    @if tries.is_empty() && audit.is_empty() {
                        p class="meta" { "Nothing journaled for this step yet." }
                    }
                    @if !tries.is_empty() {
                        table class="attempts" {
                            thead { tr { th scope="col" { "Attempt" } th scope="col" { "Started" } th scope="col" { "Took" } th scope="col" { "Outcome" } } }
                            tbody {
                                @for attempt in &tries {
                                    tr {
                                        td { (attempt.number) }
                                        td { (time(attempt.started)) }
                                        td { (duration(attempt.ended.unwrap_or(now).saturating_sub(attempt.started))) }
                                        td {
                                            @match &attempt.outcome {
                                                None => span class="state cs-running" { "▶ running" },
                                                Some(Ok(output)) => {
                                                    span class="state cs-succeeded" { "✓ succeeded" }
                                                    @if loaded.payloads {
                                                        div class="output" { (value(output)) }
                                                    }
                                                }
                                                Some(Err((kind, message))) => {
                                                    @let state = Shown::of_error(*kind);
                                                    span class={ "state cs-" (state.name()) } { (state.symbol()) " " (kind.as_str()) }
                                                    ": "
                                                    span class="message" { (if loaded.entitled { message.as_str() } else { REDACTED }) }
                                                    @if loaded.entitled {
                                                        @let found = evidence(message);
                                                        @if !found.is_empty() {
                                                            ul class="evidence" {
                                                                @for path in found {
                                                                    li {
                                                                        "Evidence: "
                                                                        @match super::evidence::link(app, run, &step.id, attempt.number, path) {
                                                                            Some(href) => a href=(href) { code { (path) } },
                                                                            None => code { (path) },
                                                                        }
                                                                    }
                                                                }
                                                            }
                                                        }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                    @if matches!(step.kind, StepKind::Human(_)) {
                        @if !audit.is_empty() {
                            table class="decisions" {
                                thead { tr { th scope="col" { "When" } th scope="col" { "Who" } th scope="col" { "What" } th scope="col" { "Detail" } } }
                                tbody {
                                    @for entry in &audit {
                                        tr {
                                            td { (time(entry.at)) }
                                            td { (entry.who) @if let Some(via) = &entry.via { " via " (via) } }
                                            td { (entry.action) }
                                            td { (entry.detail) }
                                        }
                                    }
                                }
                            }
                        }
                        @if states.get(i) == Some(&Shown::WaitingForPerson) {
                            p { a href={ (base) "/inbox/runs/" (run) } { "Decide it in the inbox" } }
                        }
                    }
                }
            }
        }
        section id="timeline" {
            h2 { "Attempts over time" }
            (gantt(loaded, now))
        }
        section id="journal" {
            h2 { "Journal" }
            p class="meta" { (detail.timeline.len()) " entries; page " (journal_page) " of " (pages) }
            table id="journal-entries" {
                thead { tr { th scope="col" { "#" } th scope="col" { "When" } th scope="col" { "Event" } th scope="col" { "Step" } th scope="col" { "Detail" } } }
                tbody {
                    @for (seq, entry) in shown_entries {
                        tr {
                            td { (seq + 1) }
                            td { (time(entry.at)) }
                            td { code { (entry.event) } }
                            td { (entry.step.as_deref().unwrap_or("")) }
                            td { (entry.detail) }
                        }
                    }
                }
            }
            @if pages > 1 {
                nav class="pages" aria-label="Journal pages" {
                    @if journal_page > 1 {
                        a href={ (base) "/console/runs/" (run) "?journal=" (journal_page - 1) "#journal" } { "← Earlier" }
                        " "
                    }
                    @if journal_page < pages {
                        a href={ (base) "/console/runs/" (run) "?journal=" (journal_page + 1) "#journal" } id="journal-next" { "Later →" }
                    }
                }
            }
        }
    }
}

/// Every attempt as a bar on one time axis, from the run's creation to now or its end.
fn gantt(loaded: &Loaded, now: Timestamp) -> Markup {
    let events = &loaded.events;
    let mut bars = Vec::new();
    for (i, step) in loaded.spec.steps.iter().enumerate() {
        for attempt in attempts(events, i) {
            bars.push((step.id.as_str(), attempt));
        }
    }
    if bars.is_empty() {
        return html! { p class="meta" { "No attempts yet." } };
    }
    let start = loaded.record.created_at;
    let end = bars
        .iter()
        .map(|(_, a)| a.ended.unwrap_or(now))
        .max()
        .unwrap_or(now)
        .max(start + 1);
    let width = 560.0;
    let scale =
        |at: Timestamp| 180.0 + (at.saturating_sub(start)) as f64 / (end - start) as f64 * width;
    let height = bars.len() * 22 + 24;
    html! {
        svg role="img" aria-label={ "Attempts from " (crate::view::rfc3339(start)) " to " (crate::view::rfc3339(end)) }
            viewBox={ "0 0 760 " (height) } width="760" height=(height) class="gantt" {
            @for (row, (step, attempt)) in bars.iter().enumerate() {
                @let y = row * 22 + 4;
                @let x = scale(attempt.started);
                @let w = (scale(attempt.ended.unwrap_or(now)) - x).max(2.0);
                @let class = match &attempt.outcome { None => "running", Some(Ok(_)) => "succeeded", Some(Err((kind, _))) => Shown::of_error(*kind).name() };
                text x="0" y=(y + 14) { (step) " #" (attempt.number) }
                rect x=(format!("{x:.1}")) y=(y) width=(format!("{w:.1}")) height="16" class={ "bar cs-" (class) } {
                    title { (step) " attempt " (attempt.number) ": " (class) ", " (duration(attempt.ended.unwrap_or(now).saturating_sub(attempt.started))) }
                }
            }
            text x="180" y=(height - 4) { "0" }
            text x="740" y=(height - 4) text-anchor="end" { (duration(end - start)) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_paths_come_from_a_browser_steps_message() {
        assert_eq!(
            evidence("click: no element `#go` [evidence: /a/shot.png, /a/page.html]"),
            ["/a/shot.png", "/a/page.html"]
        );
        assert!(evidence("timeout after 30 s").is_empty());
    }

    #[test]
    fn attempts_pair_their_starts_with_their_ends() {
        let events = [
            Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at: 10,
            },
            Event::AttemptFailed {
                step: 0,
                attempt: 1,
                kind: workflow_core::ErrorKind::Timeout,
                message: "slow".into(),
                retry_after: None,
                safe_after: None,
                at: 20,
            },
            Event::AttemptStarted {
                step: 0,
                attempt: 2,
                at: 30,
            },
            Event::StepSucceeded {
                step: 0,
                output: serde_json::json!("ok"),
                at: 45,
            },
            Event::AttemptStarted {
                step: 1,
                attempt: 1,
                at: 50,
            },
        ];
        let first = attempts(&events, 0);
        assert_eq!(first.len(), 2);
        assert_eq!((first[0].ended, first[1].ended), (Some(20), Some(45)));
        assert!(matches!(&first[0].outcome, Some(Err((_, m))) if m == "slow"));
        assert!(matches!(&first[1].outcome, Some(Ok(_))));
        let second = attempts(&events, 1);
        assert_eq!((second.len(), second[0].outcome.clone()), (1, None));
    }
}

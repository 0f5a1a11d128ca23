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

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{Html as HtmlBody, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;
use serde_json::Value;
use workflow_core::journal::Event;
use workflow_core::spec::{OnTimeout, Spec, StepKind};
use workflow_core::store::{RunFilter, RunStatus};
use workflow_core::{admin, Approval, RunId, TaskInfo};

use crate::api::{check_comment, decide_as, delegate_as, open_task};
use crate::auth::Identity;
use crate::error::ApiError;
use crate::html::{escape, page, words, Html};
use crate::permissions::{Action, Caller};
use crate::present::present;
use crate::view::{self, parse_run, rfc3339, REDACTED};
use crate::{App, Shared};

/// The largest decision form accepted, in bytes (413 `body_too_large` past it).
pub const MAX_FORM: usize = 32 * 1024;

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/inbox", get(inbox))
        .route("/inbox/", get(inbox))
        .route("/inbox/runs/{run}", get(run_page))
        .route(
            "/inbox/runs/{run}/tasks/{step}",
            post(decide).layer(DefaultBodyLimit::max(MAX_FORM)),
        )
}

/// An error shown as a page, with the status of the API's error.
#[derive(Debug)]
pub(crate) struct PageError {
    error: ApiError,
    who: Option<Identity>,
    base: String,
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
        let mut body = Html::new();
        body.raw("<p class=\"error\" id=\"error\">")
            .text(&format!(
                "{} {}: {}",
                self.error.status.as_u16(),
                self.error.code,
                self.error.message
            ))
            .raw("</p>");
        let html = page(
            title,
            self.who.as_ref().map(Identity::name),
            &self.base,
            &body.finish(),
        );
        (self.error.status, HtmlBody(html)).into_response()
    }
}

/// The caller of an inbox request ([`crate::access::caller`]), or an error page.
#[derive(Debug, Clone)]
pub(crate) struct PageCaller(Caller);

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

fn fail(app: &App, who: &Identity) -> impl Fn(ApiError) -> PageError {
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
    // page, and only this page's runs are read.
    let scope = crate::tasks::scope(&app, &caller, None)
        .await
        .map_err(&fail)?;
    let (tasks, total, pages, number): (Vec<TaskInfo>, usize, usize, usize) =
        if conditions.is_empty() {
            let total = usize::try_from(scope.total).unwrap_or(usize::MAX);
            let pages = total.div_ceil(PAGE).max(1);
            let number = requested.clamp(1, pages);
            let tasks = crate::tasks::page(&app, &scope, None, (number - 1) * PAGE, PAGE)
                .await
                .map_err(&fail)?
                .tasks;
            (tasks, total, pages, number)
        } else {
            // Filtered: the caller's open tasks of the running runs found by the values.
            let search = conditions
                .iter()
                .map(|text| workflow_core::search::parse_condition(text, ':'))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|message| fail(ApiError::bad_request(message)))?;
            let runs: std::collections::HashSet<RunId> = app
                .engine
                .runs(RunFilter {
                    status: Some(RunStatus::Running),
                    search,
                    ..RunFilter::default()
                })
                .await
                .map_err(|e| fail(e.into()))?
                .into_iter()
                .map(|run| run.id)
                .collect();
            let mut tasks = crate::tasks::page(&app, &scope, None, 0, usize::MAX)
                .await
                .map_err(&fail)?
                .tasks;
            tasks.retain(|task| runs.contains(&task.run));
            let total = tasks.len();
            let pages = total.div_ceil(PAGE).max(1);
            let number = requested.clamp(1, pages);
            let tasks = tasks
                .into_iter()
                .skip((number - 1) * PAGE)
                .take(PAGE)
                .collect();
            (tasks, total, pages, number)
        };
    let filter_query: String = conditions
        .iter()
        .map(|text| format!("&where={}", query_escape(text)))
        .collect();
    let mut body = Html::new();
    body.raw(&format!(
        "<form method=\"get\" action=\"{}/inbox\" id=\"filter\"><label>Find runs by \
         <input name=\"where\" placeholder=\"customer_id:c-42\" value=\"{}\"></label> \
         <button>Filter</button></form>",
        escape(&app.base),
        escape(&conditions.join(" "))
    ));
    if tasks.is_empty() {
        body.raw("<p id=\"empty\">No open tasks for you.</p>");
    } else {
        body.raw("<p class=\"meta\" id=\"count\">").text(&format!(
            "{total} open task{}, soonest deadline first",
            if total == 1 { "" } else { "s" }
        ));
        body.raw("</p>");
    }
    for task in &tasks {
        let store = &**app.engine.store();
        let stored = store.load(task.run).await.map_err(|e| fail(e.into()))?;
        let spec = match &stored {
            Some(stored) => admin::stored_spec(store, &stored.record.fingerprint)
                .await
                .map_err(|e| fail(e.into()))?,
            None => None,
        };
        let (Some(stored), Some(spec)) = (stored, spec) else {
            continue;
        };
        let show = app.show_payloads
            && app
                .allows(&caller, Action::ViewPayloads, &task.workflow, true)
                .await
                .map_err(&fail)?;
        task_card(
            &app,
            who,
            &mut body,
            task,
            &spec,
            &stored.events,
            show,
            true,
        );
    }
    if pages > 1 {
        body.raw("<nav class=\"pages\" id=\"pages\">");
        if number > 1 {
            body.link(
                &format!("{}/inbox?page={}{filter_query}", app.base, number - 1),
                "← Sooner",
            );
        }
        body.text(&format!(" Page {number} of {pages} "));
        if number < pages {
            body.link(
                &format!("{}/inbox?page={}{filter_query}", app.base, number + 1),
                "Later →",
            );
        }
        body.raw("</nav>");
    }
    let html = page("Your tasks", Some(who.name()), &app.base, &body.finish());
    Ok(HtmlBody(html).into_response())
}

/// `text` for a URL's query: everything but unreserved characters percent-encoded.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One task: prompt, context (payloads if `show`), deadline and escalation, and its
/// decision form.
#[allow(clippy::too_many_arguments)] // one card, drawn from what the page loaded
fn task_card(
    app: &App,
    who: &Identity,
    body: &mut Html,
    task: &TaskInfo,
    spec: &Spec,
    events: &[Event],
    show: bool,
    link_run: bool,
) {
    let index = spec.step_index(&task.step);
    let id = format!("task-{}-{}", task.run, task.step);
    let now = app.engine.now();
    let presented = present(spec, events, &task.step, show);
    let heading = presented
        .title
        .clone()
        .unwrap_or_else(|| format!("{} for {}", words(&task.step), task.assignee));
    body.raw(&format!("<section class=\"task\" id=\"{}\">", escape(&id)))
        .raw("<h2 class=\"title\">")
        .text(&heading)
        .raw("</h2><p class=\"meta\">")
        .text(&format!("{} · {} · due ", task.workflow, task.run))
        .time(now, task.deadline)
        .raw("</p><p class=\"prompt\">")
        .text(task.prompt.as_deref().unwrap_or("(no prompt)"))
        .raw("</p><table>");
    if link_run {
        body.raw("<tr><th>Run</th><td>")
            .link(
                &format!("{}/inbox/runs/{}", app.base, task.run),
                &task.run.to_string(),
            )
            .raw("</td></tr>");
    }
    let assignee = if task.escalated {
        format!("{} (escalated)", task.assignee)
    } else {
        task.assignee.clone()
    };
    body.raw("<tr><th>Assigned to</th>")
        .element("td", &assignee)
        .raw("</tr>");
    if let Some(since) = index.and_then(|step| opened_at(events, step)) {
        body.raw("<tr><th>Waiting since</th><td>")
            .time(now, since)
            .raw("</td></tr>");
    }
    body.raw("<tr><th>Deadline</th><td class=\"deadline\">")
        .time(now, task.deadline)
        .raw("</td></tr><tr><th>At the deadline</th>")
        .element("td", &on_timeout(spec, index, task.escalated))
        .raw("</tr>");
    if presented.approvals > 1 {
        let mut quorum = format!("{} of {}", presented.approved_by.len(), presented.approvals);
        if !presented.approved_by.is_empty() {
            quorum.push_str(&format!(" (by {})", presented.approved_by.join(", ")));
        }
        body.raw("<tr><th>Approvals</th>")
            .element("td", &quorum)
            .raw("</tr>");
    }
    body.raw("</table>");
    if !presented.shown.is_empty() {
        body.raw("<table class=\"shown\">");
        for (path, value) in &presented.shown {
            body.raw("<tr>").element("th", path).raw("<td>");
            match value {
                Some(value) => body.value(value),
                None => body.text("-"),
            };
            body.raw("</td></tr>");
        }
        body.raw("</table>");
    }
    context(body, spec, index, events, show);
    decision_form(app, who, body, task, spec, index);
    body.raw("</section>");
}

/// When the task of step `step` was last opened or escalated.
fn opened_at(events: &[Event], step: usize) -> Option<u64> {
    events.iter().rev().find_map(|event| match event {
        Event::TaskOpened { step: s, at, .. } | Event::TaskEscalated { step: s, at, .. }
            if *s == step =>
        {
            Some(*at)
        }
        _ => None,
    })
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
        Some(Event::TaskDecided {
            by, decision, at, ..
        }) => {
            html.text(&format!(
                "{} by {by} ",
                crate::view::decision_text(decision)
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

fn on_timeout(spec: &Spec, index: Option<usize>, escalated: bool) -> String {
    let human = index
        .and_then(|i| spec.steps.get(i))
        .and_then(|step| match &step.kind {
            StepKind::Human(human) => Some(human),
            _ => None,
        });
    match human.map(|h| &h.on_timeout) {
        Some(OnTimeout::Escalate(to)) if !escalated => format!("escalates to {to}"),
        Some(OnTimeout::Escalate(_)) => "expires (escalated once already)".to_owned(),
        Some(OnTimeout::Abort) => "expires: the step fails".to_owned(),
        Some(OnTimeout::Approve) => "approved automatically".to_owned(),
        Some(OnTimeout::Reject) => "rejected automatically".to_owned(),
        None => "unknown".to_owned(),
    }
}

/// The run's inputs and the outputs of the steps the task depends on.
fn context(body: &mut Html, spec: &Spec, index: Option<usize>, events: &[Event], shown: bool) {
    body.raw("<details open><summary>Context</summary><table>");
    if let Some(Event::RunStarted { input, .. }) = events.first() {
        context_row(body, "inputs", Some(input), shown);
    }
    let deps = index
        .and_then(|i| spec.steps.get(i))
        .map_or(&[][..], |step| step.deps.as_slice());
    for dep in deps {
        let output = events.iter().rev().find_map(|event| match event {
            Event::StepSucceeded { step, output, .. } if step == dep => Some(output),
            _ => None,
        });
        let name = spec.steps.get(*dep).map_or("?", |s| s.id.as_str());
        context_row(body, name, output, shown);
    }
    body.raw("</table></details>");
}

/// One payload of the context: its fields if shown, redacted otherwise.
fn context_row(body: &mut Html, name: &str, value: Option<&Value>, shown: bool) {
    body.raw("<tr>").element("th", name).raw("<td>");
    match value {
        Some(value) if shown => body.value(value),
        Some(_) => body.raw("<pre>").text(REDACTED).raw("</pre>"),
        None => body.text("(no output)"),
    };
    body.raw("</td></tr>");
}

fn is_approval(spec: &Spec, index: Option<usize>) -> bool {
    index
        .and_then(|i| spec.steps.get(i))
        .is_some_and(|step| step.output == "Approval" || step.output.ends_with("::Approval"))
}

fn decision_form(
    app: &App,
    who: &Identity,
    body: &mut Html,
    task: &TaskInfo,
    spec: &Spec,
    index: Option<usize>,
) {
    let action = format!("{}/inbox/runs/{}/tasks/{}", app.base, task.run, task.step);
    body.raw(&format!(
        "<form method=\"post\" action=\"{}\">",
        escape(&action)
    ))
    .hidden("csrf", &app.csrf.token(who));
    if let Some(fields) = app.engine.decision_form(&task.workflow, &task.step) {
        crate::form::render(body, &fields);
        body.raw("<button type=\"submit\" name=\"verdict\" value=\"form\">Decide</button>");
    } else if is_approval(spec, index) {
        body.raw("<label>Comment<textarea name=\"comment\"></textarea></label>")
            .raw("<button type=\"submit\" name=\"verdict\" value=\"approve\">Approve</button>")
            .raw("<button type=\"submit\" name=\"verdict\" value=\"reject\">Reject</button>");
    } else {
        body.raw("<label>Decision (JSON)<textarea name=\"decision\"></textarea></label>")
            .raw("<button type=\"submit\" name=\"verdict\" value=\"decide\">Decide</button>");
    }
    body.raw("<label>Delegate to<input name=\"to\" maxlength=\"256\"></label>")
        .raw("<button type=\"submit\" name=\"verdict\" value=\"delegate\">Delegate</button>")
        .raw("</form>");
}

#[derive(Debug, Deserialize)]
struct RunQuery {
    decided: Option<String>,
}

async fn run_page(
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
        .filter(|task| app.engine.authorizes(&task.assignee, who.name()))
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
        body.row(&[
            &rfc3339(entry.at),
            &entry.who,
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
            posted,
        }
    }
}

async fn decide(
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
    check_comment(form.comment.as_deref()).map_err(&fail)?;
    let comment = form.comment.filter(|c| !c.trim().is_empty());
    if form.verdict == "delegate" {
        let to = form.to.unwrap_or_default();
        delegate_as(&app, &caller, run, &step, &to)
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
            let task = open_task(&app, run, &step).await.map_err(&fail)?;
            let fields = task
                .and_then(|task| app.engine.decision_form(&task.workflow, &step))
                .ok_or_else(|| {
                    fail(ApiError::new(
                        StatusCode::NOT_FOUND,
                        "unknown_task",
                        format!("{run} has no open task `{step}` with a form"),
                    ))
                })?;
            crate::form::read(&fields, &form.posted).map_err(&fail)?
        }
        "decide" => serde_json::from_str(form.decision.as_deref().unwrap_or("")).map_err(|e| {
            fail(ApiError::invalid_payload(format!(
                "the decision is not JSON: {e}"
            )))
        })?,
        other => {
            return Err(fail(ApiError::bad_request(format!(
                "unknown verdict `{other}`"
            ))))
        }
    };
    decide_as(&app, &caller, run, &step, decision)
        .await
        .map_err(&fail)?;
    let target = format!(
        "{}/inbox/runs/{run}?decided={}",
        app.base,
        query_text(&step)
    );
    let mut response = Redirect::to(&target).into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    Ok(response)
}

//! `GET /console/runs`: runs filtered by workflow, status, creation time and search keys,
//! newest first, paged by cursor, with counts per status.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use maud::{html, Markup};
use workflow_core::journal::{rfc3339, Timestamp};
use workflow_core::store::{RunFilter, RunRecord, RunStatus};
use workflow_core::RunId;

use super::{failing, first, parse_time};
use crate::error::ApiError;
use crate::inbox::{query_escape, PageCaller, PageError};
use crate::permissions::{Action, Caller};
use crate::{App, Shared};

/// The runs one page of the console lists.
pub const PAGE: usize = 50;

/// How many of the newest matching runs the counts per status count.
pub const COUNTED: usize = 1000;

/// How many pages of the store one page of the console reads at most to fill itself with
/// runs the caller may see and the filter admits.
const SCANNED: usize = 20;

/// The statuses, in the order the counts show them.
const STATUSES: [RunStatus; 5] = [
    RunStatus::Running,
    RunStatus::Completed,
    RunStatus::Failed,
    RunStatus::Cancelled,
    RunStatus::Parked,
];

/// What the runs page (and a bulk action) is filtered by.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub(crate) workflow: Option<String>,
    pub(crate) status: Option<RunStatus>,
    /// Created at or after, ms.
    pub(crate) from: Option<Timestamp>,
    /// Created at or before, ms.
    pub(crate) to: Option<Timestamp>,
    /// `where=` conditions as written.
    pub(crate) conditions: Vec<String>,
    /// The same, parsed.
    pub(crate) search: Vec<(String, String)>,
    from_text: String,
    to_text: String,
}

impl Filter {
    /// The filter of a query's (or a form's) pairs; 400 `bad_request` for an unknown
    /// status, a time that is not one or a condition that does not parse.
    pub(crate) fn parse(pairs: &[(String, String)]) -> Result<Filter, ApiError> {
        let text = |name: &str| first(pairs, name).map(str::trim).filter(|t| !t.is_empty());
        let status = match text("status") {
            None => None,
            Some(text) => Some(RunStatus::parse(text).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unknown status `{text}`; one of running, completed, failed, cancelled, parked"
                ))
            })?),
        };
        let conditions: Vec<String> = pairs
            .iter()
            .filter(|(key, value)| key == "where" && !value.trim().is_empty())
            .map(|(_, value)| value.trim().to_owned())
            .collect();
        let search = conditions
            .iter()
            .map(|text| {
                workflow_core::search::parse_condition(text, ':').map_err(ApiError::bad_request)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Filter {
            workflow: text("workflow").map(str::to_owned),
            status,
            from: text("from").map(|t| parse_time(t, false)).transpose()?,
            to: text("to").map(|t| parse_time(t, true)).transpose()?,
            conditions,
            search,
            from_text: text("from").unwrap_or("").to_owned(),
            to_text: text("to").unwrap_or("").to_owned(),
        })
    }

    /// The filter as a query string (`&workflow=...&where=...`), with `status` in place of
    /// its own status when given (`Some("")`: any).
    pub(crate) fn query(&self, status: Option<&str>) -> String {
        let mut out = String::new();
        let mut push = |name: &str, value: &str| {
            if !value.is_empty() {
                out.push_str(&format!("&{name}={}", query_escape(value)));
            }
        };
        push("workflow", self.workflow.as_deref().unwrap_or(""));
        push(
            "status",
            status.unwrap_or_else(|| self.status.map_or("", |s| s.as_str())),
        );
        push("from", &self.from_text);
        push("to", &self.to_text);
        for condition in &self.conditions {
            push("where", condition);
        }
        out
    }

    /// The filter as hidden fields of a form.
    pub(crate) fn hidden(&self) -> Markup {
        html! {
            @if let Some(workflow) = &self.workflow {
                input type="hidden" name="workflow" value=(workflow);
            }
            @if let Some(status) = self.status {
                input type="hidden" name="status" value=(status.as_str());
            }
            @if !self.from_text.is_empty() {
                input type="hidden" name="from" value=(self.from_text);
            }
            @if !self.to_text.is_empty() {
                input type="hidden" name="to" value=(self.to_text);
            }
            @for condition in &self.conditions {
                input type="hidden" name="where" value=(condition);
            }
        }
    }

    /// Whether a run created at `at` is inside the time range.
    fn in_range(&self, at: Timestamp) -> bool {
        self.from.is_none_or(|from| at >= from) && self.to.is_none_or(|to| at <= to)
    }

    /// What the store filters by, for `status`.
    fn store_filter(
        &self,
        status: Option<RunStatus>,
        before: Option<RunId>,
        limit: usize,
    ) -> RunFilter {
        RunFilter {
            workflow: self.workflow.clone(),
            status,
            before,
            limit: Some(limit),
            search: self.search.clone(),
        }
    }
}

/// A page of runs: those `caller` may see (and, with `action`, may take it on), that the
/// filter admits, newest first, from before `before`; and where the next page starts.
pub(crate) async fn scan(
    app: &App,
    caller: &Caller,
    filter: &Filter,
    status: Option<RunStatus>,
    before: Option<RunId>,
    limit: usize,
    action: Option<Action>,
) -> Result<(Vec<(RunRecord, bool)>, Option<RunId>), ApiError> {
    let mut runs = Vec::new();
    let mut cursor = before;
    for _ in 0..SCANNED {
        let page = app
            .engine
            .runs(filter.store_filter(status, cursor, limit))
            .await?;
        let full = page.len() == limit;
        let last = page.last().map(|r| r.id);
        // Newest first: once a whole page is older than the range, so is everything after.
        let older = filter
            .from
            .is_some_and(|from| page.iter().all(|r| r.created_at < from));
        for record in app.visible_records(caller, page).await? {
            if !filter.in_range(record.created_at) {
                continue;
            }
            let payloads = app.entitled(caller, &record.workflow).await?;
            // A search reads the runs' inputs: it finds only runs whose payloads the
            // caller may see, so it confirms nothing about the others.
            if !filter.search.is_empty() && !payloads {
                continue;
            }
            if let Some(action) = action {
                if !app.allows(caller, action, &record.workflow, false).await? {
                    continue;
                }
            }
            runs.push((record, payloads));
            if runs.len() == limit {
                let next = runs.last().map(|(r, _): &(RunRecord, bool)| r.id);
                return Ok((runs, next));
            }
        }
        if !full || older {
            return Ok((runs, None));
        }
        cursor = last;
    }
    Ok((runs, cursor))
}

/// How many runs of each status the filter admits that `caller` may see, among the
/// newest [`COUNTED`] of them (one read, newest first, which every store answers from its
/// order of runs); and whether more runs match than were counted.
async fn counts(
    app: &App,
    caller: &Caller,
    filter: &Filter,
) -> Result<(Vec<(RunStatus, usize)>, bool), ApiError> {
    let (runs, _) = scan(app, caller, filter, None, None, COUNTED + 1, None).await?;
    let more = runs.len() > COUNTED;
    let counted = &runs[..runs.len().min(COUNTED)];
    let counts = STATUSES
        .iter()
        .map(|status| {
            let n = counted.iter().filter(|(r, _)| r.status == *status).count();
            (*status, n)
        })
        .collect();
    Ok((counts, more))
}

/// A status with its symbol, so it does not read by colour alone.
pub(crate) fn status_badge(status: RunStatus) -> Markup {
    let symbol = match status {
        RunStatus::Running => "▶",
        RunStatus::Completed => "✓",
        RunStatus::Failed => "✗",
        RunStatus::Cancelled => "⊘",
        RunStatus::Parked => "‖",
    };
    html! {
        span class={ "run-status rs-" (status.as_str()) } { (symbol) " " (status.as_str()) }
    }
}

/// A time as UTC text in a `<time>`.
pub(crate) fn time(at: Timestamp) -> Markup {
    let text = rfc3339(at);
    html! { time datetime=(text) { (text) } }
}

/// The runs' table.
pub(crate) fn table(app: &App, runs: &[(RunRecord, bool)], id: &str) -> Markup {
    html! {
        table id=(id) {
            thead { tr { th scope="col" { "Run" } th scope="col" { "Workflow" } th scope="col" { "Status" } th scope="col" { "Created (UTC)" } th scope="col" { "Note" } } }
            tbody {
                @for (record, payloads) in runs {
                    tr {
                        td { a href={ (app.base) "/console/runs/" (record.id) } { (record.id) } }
                        td { (record.workflow) }
                        td { (status_badge(record.status)) }
                        td { (time(record.created_at)) }
                        td { (crate::view::visible_note(record, *payloads).unwrap_or_default()) }
                    }
                }
            }
        }
    }
}

pub(super) async fn list(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let Query(pairs) = pairs.map_err(|r| fail(ApiError::bad_request(r.body_text())))?;
    let filter = Filter::parse(&pairs).map_err(&fail)?;
    let before = match first(&pairs, "before").filter(|t| !t.is_empty()) {
        Some(text) => Some(
            text.parse::<RunId>()
                .map_err(|_| fail(ApiError::bad_request(format!("`{text}` is not a run id"))))?,
        ),
        None => None,
    };
    // The page and the counts, read side by side (where the store reads in parallel).
    let (page, counts) = futures_util::future::join(
        scan(&app, &caller, &filter, filter.status, before, PAGE, None),
        counts(&app, &caller, &filter),
    )
    .await;
    let (runs, next) = page.map_err(&fail)?;
    let (counts, sampled) = counts.map_err(&fail)?;
    let base = &app.base;
    let any_status = filter.query(Some(""));
    let body = html! {
        form method="get" action={ (base) "/console/runs" } id="filter" class="filter" {
            label { "Workflow " input name="workflow" value=(filter.workflow.as_deref().unwrap_or("")); }
            " "
            label { "Status "
                select name="status" {
                    option value="" { "any" }
                    @for status in STATUSES {
                        option value=(status.as_str()) selected[filter.status == Some(status)] { (status.as_str()) }
                    }
                }
            }
            " "
            label { "Created from " input name="from" placeholder="2026-07-18" value=(filter.from_text); }
            " "
            label { "to " input name="to" placeholder="2026-07-18T23:59" value=(filter.to_text); }
            " "
            // One field per search condition (all of them must hold), and one more.
            @for (i, condition) in filter.conditions.iter().enumerate() {
                label { @if i == 0 { "Search " } @else { "and " } input name="where" value=(condition); }
                " "
            }
            label {
                @if filter.conditions.is_empty() { "Search " } @else { "and " }
                input name="where" placeholder="customer_id:c-42";
            }
            " "
            button type="submit" { "Filter" }
        }
        nav id="counts" aria-label="Runs by status" class="counts" {
            a href={ (base) "/console/runs?" (any_status.trim_start_matches('&')) } { "All" }
            @for (status, count) in &counts {
                a href={ (base) "/console/runs?" (filter.query(Some(status.as_str())).trim_start_matches('&')) }
                    class={ "count-" (status.as_str()) } {
                    (status_badge(*status)) " "
                    span class="n" { (count) }
                }
            }
            @if sampled {
                " "
                span class="meta" id="sampled" { "(of the newest " (COUNTED) " runs that match)" }
            }
        }
        @if runs.is_empty() {
            p id="empty" { "No runs match." }
        } @else {
            (table(&app, &runs, "runs"))
        }
        @if let Some(next) = next {
            nav class="pages" id="pages" aria-label="Pages" {
                a href={ (base) "/console/runs?before=" (next) (filter.query(None)) } rel="next" { "Older runs →" }
            }
        }
        section id="bulk" {
            h2 { "Bulk actions" }
            p class="meta" { "Each shows which runs it would take, and asks, before it does anything." }
            form method="get" action={ (base) "/console/runs/bulk" } class="inline" {
                (filter.hidden())
                input type="hidden" name="action" value="cancel";
                button type="submit" { "Cancel the running runs of this filter…" }
            }
            form method="get" action={ (base) "/console/runs/bulk" } class="inline" {
                (filter.hidden())
                input type="hidden" name="action" value="retry";
                button type="submit" { "Retry the failed runs of this filter…" }
            }
        }
    };
    let html = crate::html::shell("Runs", Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

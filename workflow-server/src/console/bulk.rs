//! Bulk actions over the runs page's filter (or runs named by `run=`, as a group of dead
//! letters names them): `GET /console/runs/bulk` shows what a cancel (of the running runs)
//! or a dead-letter retry (of the failed runs) would take, how many runs and which; its form posts exactly those runs to `POST /console/runs/bulk`, which
//! asks the policy again for each and carries each out through the engine, as the API's
//! `cancel` and `retry` do (each journaled with who did it, so the run's audit trail shows
//! it).

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use axum::Form;
use maud::html;
use workflow_core::store::RunStatus;
use workflow_core::RunId;

use super::runs::{scan, table, Filter};
use super::{check_csrf, failing, first, BULK_MAX, MAX_FORM};
use crate::error::ApiError;
use crate::inbox::{PageCaller, PageError};
use crate::permissions::Action;
use crate::view::parse_run;
use crate::Shared;

/// A bulk action: what it does to which runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bulk {
    Cancel,
    Retry,
}

impl Bulk {
    fn parse(text: Option<&str>) -> Result<Bulk, ApiError> {
        match text {
            Some("cancel") => Ok(Bulk::Cancel),
            Some("retry") => Ok(Bulk::Retry),
            other => Err(ApiError::bad_request(format!(
                "unknown bulk action `{}`; one of cancel, retry",
                other.unwrap_or("")
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Bulk::Cancel => "cancel",
            Bulk::Retry => "retry",
        }
    }

    fn action(self) -> Action {
        match self {
            Bulk::Cancel => Action::Cancel,
            Bulk::Retry => Action::Retry,
        }
    }

    /// The status of the runs it takes.
    fn status(self) -> RunStatus {
        match self {
            Bulk::Cancel => RunStatus::Running,
            Bulk::Retry => RunStatus::Failed,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Bulk::Cancel => "Cancel",
            Bulk::Retry => "Retry",
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

pub(super) async fn preview(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    pairs: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let Query(pairs) = pairs.map_err(|r| fail(ApiError::bad_request(r.body_text())))?;
    let bulk = Bulk::parse(first(&pairs, "action")).map_err(&fail)?;
    let filter = Filter::parse(&pairs).map_err(&fail)?;
    // The filter's own status narrows the set; a cancel takes running runs, a retry failed
    // ones, so another status leaves nothing to take.
    // Runs named one by one (`run=`, a group of dead letters): those of them the caller
    // may see and take the action on, in the action's status.
    let named = pairs
        .iter()
        .filter(|(key, _)| key == "run")
        .map(|(_, text)| parse_run(text).map_err(|e| ApiError::bad_request(e.message)))
        .collect::<Result<Vec<RunId>, _>>()
        .map_err(&fail)?;
    let runs = if !named.is_empty() {
        let mut runs = Vec::new();
        for run in named.into_iter().take(BULK_MAX + 1) {
            let record = match app.visible_run(&caller, run).await {
                Ok(seen) => seen.stored.record,
                Err(error) if error.code == "unknown_run" => continue,
                Err(error) => return Err(fail(error)),
            };
            if record.status != bulk.status()
                || !app
                    .allows(&caller, bulk.action(), &record.workflow, false)
                    .await
                    .map_err(&fail)?
            {
                continue;
            }
            let payloads = app
                .entitled(&caller, &record.workflow)
                .await
                .map_err(&fail)?;
            runs.push((record, payloads));
        }
        runs
    } else if filter.status.is_none_or(|s| s == bulk.status()) {
        let (runs, _) = scan(
            &app,
            &caller,
            &filter,
            Some(bulk.status()),
            None,
            BULK_MAX + 1,
            Some(bulk.action()),
        )
        .await
        .map_err(&fail)?;
        runs
    } else {
        Vec::new()
    };
    let more = runs.len() > BULK_MAX;
    let runs = &runs[..runs.len().min(BULK_MAX)];
    let n = runs.len();
    let title = format!(
        "{} {n} {} run{}?",
        bulk.verb(),
        bulk.status().as_str(),
        plural(n)
    );
    let base = &app.base;
    let back = format!(
        "{base}/console/runs?{}",
        filter.query(None).trim_start_matches('&')
    );
    let body = html! {
        p id="preview" class="meta" {
            @match bulk {
                Bulk::Cancel => { "Cancelling stops each run where it is; its compensations run. " }
                Bulk::Retry => { "Retrying runs each failed run again from its failed steps. " }
            }
            "Only the runs below are taken, even if more match by the time you confirm; each is checked again."
        }
        @if more {
            p id="more" class="meta" { "More runs match than one bulk action takes (" (BULK_MAX) "); these are the newest. Confirm, then preview again for the rest." }
        }
        @if n == 0 {
            p id="empty" { "No " (bulk.status().as_str()) " runs you may " (bulk.name()) " match this filter." }
            p { a href=(back) { "Back to the runs" } }
        } @else {
            (table(&app, runs, "taken"))
            form method="post" action={ (base) "/console/runs/bulk" } id="confirm" {
                input type="hidden" name="csrf" value=(app.csrf.token(who));
                input type="hidden" name="action" value=(bulk.name());
                @for (record, _) in runs {
                    input type="hidden" name="run" value=(record.id);
                }
                button type="submit" id="yes" class="reject" { "Yes, " (bulk.name()) " " (n) " run" (plural(n)) }
                " "
                a href=(back) { "No, go back" }
            }
        }
    };
    let html = crate::html::shell(&title, Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

pub(super) async fn carry_out(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
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
    let bulk = Bulk::parse(first(&pairs, "action")).map_err(&fail)?;
    let runs = pairs
        .iter()
        .filter(|(key, _)| key == "run")
        .map(|(_, text)| parse_run(text).map_err(|e| ApiError::bad_request(e.message)))
        .collect::<Result<Vec<RunId>, _>>()
        .map_err(&fail)?;
    if runs.len() > BULK_MAX {
        return Err(fail(ApiError::bad_request(format!(
            "{} runs posted; one bulk action takes at most {BULK_MAX}",
            runs.len()
        ))));
    }
    let mut outcomes = Vec::with_capacity(runs.len());
    for run in runs {
        // Each run as the API's route for one would: load, check, then ask the engine.
        let outcome = async {
            app.permitted_run(&caller, run, bulk.action()).await?;
            match bulk {
                Bulk::Cancel => app.engine.cancel(run, who.name()).await?,
                Bulk::Retry => app.engine.retry_dead_letter(run, who.name()).await?,
            }
            Ok::<(), ApiError>(())
        }
        .await;
        tracing::info!(%run, by = %who, action = bulk.name(), ok = outcome.is_ok(), "bulk action");
        outcomes.push((run, outcome));
    }
    let done = outcomes.iter().filter(|(_, o)| o.is_ok()).count();
    let title = match bulk {
        Bulk::Cancel => format!("Cancelled {done} run{}", plural(done)),
        Bulk::Retry => format!("Retried {done} run{}", plural(done)),
    };
    let base = &app.base;
    let body = html! {
        table id="outcomes" {
            thead { tr { th scope="col" { "Run" } th scope="col" { "Outcome" } } }
            tbody {
                @for (run, outcome) in &outcomes {
                    tr {
                        td { a href={ (base) "/console/runs/" (run) } { (run) } }
                        td {
                            @match outcome {
                                Ok(()) => span class="ok" { "✓ " (bulk.name()) " sent" },
                                Err(error) => span class="error" { "✗ " (error.code) ": " (error.message) },
                            }
                        }
                    }
                }
            }
        }
        p { a href={ (base) "/console/runs" } { "Back to the runs" } }
    };
    let html = crate::html::shell(&title, Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

//! The console's flow-control page, drawn from the running runs the caller
//! may see (up to [`RUNNING`] of them, newest first).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use maud::html;
use workflow_core::journal::Timestamp;
use workflow_core::store::{RunRecord, RunStatus};
use workflow_core::RunId;

use super::failing;
use super::runs::{scan, time, Filter};
use crate::error::ApiError;
use crate::inbox::{PageCaller, PageError};
use crate::permissions::Caller;
use crate::view::REDACTED;
use crate::{App, Shared};

/// The most running runs the flow-control and workers pages read.
pub const RUNNING: usize = 1000;

/// The runs a row links to.
pub(super) const LINKED: usize = 10;

pub(super) async fn running(
    app: &App,
    caller: &Caller,
) -> Result<(Vec<(RunRecord, bool)>, bool), ApiError> {
    let (runs, next) = scan(
        app,
        caller,
        &Filter::default(),
        Some(RunStatus::Running),
        None,
        RUNNING,
        None,
    )
    .await?;
    Ok((runs, next.is_some()))
}

/// One concurrency key, slot or rate bucket as the flow page shows it.
#[derive(Debug, Default)]
struct Key {
    /// Runs (and their steps) holding a slot of it.
    holders: Vec<(RunId, String)>,
    /// Runs or steps queued on it.
    queued: usize,
    /// Since when the oldest of them waits.
    oldest: Option<Timestamp>,
}

pub(super) async fn flow(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let (runs, more) = running(&app, &caller).await.map_err(&fail)?;
    // (kind, scope, key) → its state; key values shown only with `payloads`.
    let mut keys: BTreeMap<(String, String, String), Key> = BTreeMap::new();
    let mut unsupported = None;
    for (record, entitled) in &runs {
        let flow = match app.engine.store().flow_of(record.id).await {
            Ok(flow) => flow,
            Err(error) => {
                unsupported = Some(error.to_string());
                break;
            }
        };
        let value = |key: &str| {
            if *entitled {
                key.to_owned()
            } else {
                REDACTED.to_owned()
            }
        };
        for (step, scope, key) in &flow.held {
            keys.entry(("slot".into(), scope.clone(), value(key)))
                .or_default()
                .holders
                .push((record.id, step.clone()));
        }
        if let Some(gate) = &flow.gate {
            let (scope, key) = gate
                .key
                .clone()
                .unwrap_or_else(|| (record.workflow.clone(), String::new()));
            let entry = keys
                .entry(("start".into(), scope, value(&key)))
                .or_default();
            if gate.admitted {
                entry.holders.push((record.id, String::new()));
            } else {
                entry.queued += 1;
                let since = gate.not_before.unwrap_or(record.created_at);
                entry.oldest = Some(entry.oldest.map_or(since, |o| o.min(since)));
            }
        }
        for wait in &flow.waits {
            let entry = keys
                .entry((wait.kind.clone(), wait.scope.clone(), value(&wait.key)))
                .or_default();
            entry.queued += 1;
            entry.oldest = Some(entry.oldest.map_or(wait.since, |o| o.min(wait.since)));
        }
    }
    let rates = super::rates::section(&app, &caller, &runs)
        .await
        .map_err(&fail)?;
    let base = &app.base;
    let now = app.engine.now();
    let body = html! {
        p class="meta" { "From the " (runs.len()) " running runs you may see" @if more { " (the newest " (RUNNING) ")" } "." }
        @if let Some(why) = unsupported {
            p id="unsupported" class="meta" { (why) }
        }
        @if keys.is_empty() {
            p id="empty" { "No key is in use and nothing waits for one." }
        } @else {
            table id="keys" {
                thead { tr { th scope="col" { "Kind" } th scope="col" { "Scope" } th scope="col" { "Key" } th scope="col" { "Held by" } th scope="col" { "Queued" } th scope="col" { "Oldest wait" } } }
                tbody {
                    @for ((kind, scope, key), state) in &keys {
                        tr {
                            td { (kind) }
                            td { (scope) }
                            td { code { (key) } }
                            td {
                                (state.holders.len()) @if !state.holders.is_empty() { ": " }
                                @for (run, step) in state.holders.iter().take(LINKED) {
                                    a href={ (base) "/console/runs/" (run) } { (run) }
                                    @if !step.is_empty() { " (" (step) ")" }
                                    " "
                                }
                            }
                            td { (state.queued) }
                            td {
                                @if let Some(oldest) = state.oldest {
                                    (time(oldest)) " (" (super::states::duration(now.saturating_sub(oldest))) ")"
                                }
                            }
                        }
                    }
                }
            }
        }
        (rates)
    };
    let html = crate::html::shell("Flow control", Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

//! The console's workers page: the engines that keep leases in the store, as their worker
//! rows say ([`Store::workers`](workflow_core::store::Store::workers): last renewal, lease
//! expiry, draining, lapsed or stopped), with the running runs each holds among those the
//! caller may see (up to [`RUNNING`](super::RUNNING) of them, newest first); owners of
//! running runs without a worker row (a store one engine drives keeps none), and runs
//! nobody drives, after them.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use maud::{html, Markup};
use workflow_core::journal::Timestamp;
use workflow_core::store::{RunRecord, WorkerRow};

use super::failing;
use super::flow::{running, LINKED, RUNNING};
use super::runs::time;
use super::states::duration;
use crate::inbox::{PageCaller, PageError};
use crate::Shared;

/// A worker's state in words (the page never says it by colour alone).
fn state(row: &WorkerRow, now: Timestamp) -> Markup {
    html! {
        @if row.stopped {
            span class="worker-stopped" { "stopped" }
        } @else if row.lapsed(now) {
            strong class="worker-lapsed" { "lease lapsed" }
            " (" (duration(now - row.lease_until)) " ago: its runs go to other workers)"
        } @else if let Some(since) = row.draining_since {
            strong class="worker-draining" { "draining" } " since " (time(since))
        } @else {
            span class="worker-working" { "working" }
        }
    }
}

/// The runs of `held`, linked (the first [`LINKED`]).
fn links(base: &str, held: &[&RunRecord]) -> Markup {
    html! {
        @for record in held.iter().take(LINKED) {
            a href={ (base) "/console/runs/" (record.id) } { (record.id) } " "
        }
        @if held.len() > LINKED { "…" }
    }
}

pub(super) async fn workers(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let (runs, more) = running(&app, &caller).await.map_err(&fail)?;
    let store = app.engine.store();
    let (rows, unreadable) = match store.workers().await {
        Ok(rows) => (rows, None),
        Err(error) => (Vec::new(), Some(error.to_string())),
    };
    let mut owners: BTreeMap<Option<String>, Vec<&RunRecord>> = BTreeMap::new();
    for (record, _) in &runs {
        owners.entry(record.owner.clone()).or_default().push(record);
    }
    // Now on the store's clock, which renewals and lease expiries are kept by.
    let now = app
        .engine
        .now()
        .saturating_add_signed(store.clock_offset_ms());
    let base = &app.base;
    let body = html! {
        p class="meta" {
            "Workers as their last heartbeat recorded them, with the " (runs.len())
            " running runs you may see" @if more { " (the newest " (RUNNING) ")" } "."
        }
        @if let Some(why) = unreadable {
            p id="unreadable" class="meta" { "The store's worker rows cannot be read: " (why) }
        }
        @if rows.is_empty() {
            p id="no-workers" class="meta" {
                "No worker records itself in this store: engines keep leases (and heartbeats) only in stores several engine processes share."
            }
        } @else {
            table id="workers" {
                thead { tr {
                    th scope="col" { "Worker" } th scope="col" { "State" } th scope="col" { "Runs held" }
                    th scope="col" { "Last renewal" } th scope="col" { "Lease until" } th scope="col" { "Runs" }
                } }
                tbody {
                    @for row in &rows {
                        @let held = owners.remove(&Some(row.name.clone())).unwrap_or_default();
                        tr {
                            th scope="row" { code { (row.name) } br; span class="meta" { "started " (time(row.started_at)) } }
                            td { (state(row, now)) }
                            td { (held.len()) }
                            td { (time(row.renewed_at)) " (" (duration(now.saturating_sub(row.renewed_at))) " ago)" }
                            td {
                                (time(row.lease_until))
                                @if row.lease_until >= now { " (in " (duration(row.lease_until - now)) ")" }
                            }
                            td { (links(base, &held)) }
                        }
                    }
                }
            }
        }
        @if !owners.is_empty() {
            h2 { "Owners without a worker row" }
            table id="owners" {
                thead { tr { th scope="col" { "Owner" } th scope="col" { "Runs held" } th scope="col" { "Oldest run" } th scope="col" { "Runs" } } }
                tbody {
                    @for (owner, held) in &owners {
                        tr {
                            td { @match owner { Some(owner) => code { (owner) }, None => em { "nobody: queued or between owners" } } }
                            td { (held.len()) }
                            td { @if let Some(oldest) = held.iter().map(|r| r.created_at).min() { (time(oldest)) } }
                            td { (links(base, held)) }
                        }
                    }
                }
            }
        } @else if runs.is_empty() {
            p id="empty" { "No running runs." }
        }
    };
    let html = crate::html::shell("Workers", Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

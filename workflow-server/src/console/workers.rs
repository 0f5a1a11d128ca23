//! The console's workers page: who drives the running runs the caller may see (up to
//! [`RUNNING`](super::RUNNING) of them, newest first).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::{Html as HtmlBody, IntoResponse, Response};
use maud::html;
use workflow_core::store::RunRecord;

use super::failing;
use super::flow::{running, LINKED, RUNNING};
use super::runs::time;
use crate::inbox::{PageCaller, PageError};
use crate::Shared;

pub(super) async fn workers(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let (runs, more) = running(&app, &caller).await.map_err(&fail)?;
    let mut owners: BTreeMap<Option<String>, Vec<&RunRecord>> = BTreeMap::new();
    for (record, _) in &runs {
        owners.entry(record.owner.clone()).or_default().push(record);
    }
    let base = &app.base;
    let body = html! {
        p class="meta" { "Who drives the " (runs.len()) " running runs you may see" @if more { " (the newest " (RUNNING) ")" } "." }
        @if owners.is_empty() {
            p id="empty" { "No running runs." }
        } @else {
            table id="workers" {
                thead { tr { th scope="col" { "Owner" } th scope="col" { "Runs held" } th scope="col" { "Oldest run" } th scope="col" { "Runs" } } }
                tbody {
                    @for (owner, held) in &owners {
                        tr {
                            td { @match owner { Some(owner) => code { (owner) }, None => em { "nobody: queued or between owners" } } }
                            td { (held.len()) }
                            td { @if let Some(oldest) = held.iter().map(|r| r.created_at).min() { (time(oldest)) } }
                            td {
                                @for record in held.iter().take(LINKED) {
                                    a href={ (base) "/console/runs/" (record.id) } { (record.id) } " "
                                }
                                @if held.len() > LINKED { "…" }
                            }
                        }
                    }
                }
            }
        }
        p class="meta" { "Leases and their renewals are not shown yet: the store does not list them." }
    };
    let html = crate::html::shell("Workers", Some(who.name()), base, body, false);
    Ok(HtmlBody(html).into_response())
}

//! `GET /console/runs/{run}/live`: a running run's page follows its journal over
//! Server-Sent Events, `change` when the journal grows and `end` once the run finished,
//! read from the store whenever its [`RunWatch`] says the run may have changed: a
//! notification of a commit to the run on PostgreSQL, a poll every [`WATCH_POLL`]
//! elsewhere, so a commit shows within a second.
//!
//! [`WATCH_POLL`]: workflow_core::store::WATCH_POLL

use std::convert::Infallible;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use workflow_core::store::{RunStatus, RunWatch, Store};
use workflow_core::RunId;

use super::{failing, POLL};
use crate::inbox::{PageCaller, PageError};
use crate::view::parse_run;
use crate::Shared;

#[derive(Debug, serde::Deserialize)]
pub(super) struct LiveQuery {
    seen: Option<usize>,
}

/// What a live stream last saw of its run, and its subscription to the run's commits.
struct Watch {
    store: std::sync::Arc<dyn Store>,
    run: RunId,
    seen: usize,
    ended: bool,
    commits: Option<RunWatch>,
}

impl Watch {
    /// Waits until the run may have changed: its subscription says so (made, or made
    /// again, first when it lapses), or [`POLL`] passed without one.
    async fn next_change(&mut self) {
        if self.commits.as_ref().is_none_or(RunWatch::needs_renewal) {
            match self.store.watch(self.run).await {
                Ok(commits) => self.commits = Some(commits),
                Err(error) => {
                    tracing::debug!(run = %self.run, %error, "live page: cannot watch the run");
                    self.commits = None;
                }
            }
        }
        match &mut self.commits {
            Some(commits) => commits.changed().await,
            None => tokio::time::sleep(POLL).await,
        }
    }
}

pub(super) async fn live(
    State(app): State<Shared>,
    PageCaller(caller): PageCaller,
    Path(run): Path<String>,
    query: Result<Query<LiveQuery>, QueryRejection>,
) -> Result<Response, PageError> {
    let who = caller.identity();
    let fail = failing(&app, who);
    let run = parse_run(&run).map_err(&fail)?;
    let seen = app.visible_run(&caller, run).await.map_err(&fail)?;
    let known = query.ok().and_then(|Query(q)| q.seen);
    let watch = Watch {
        store: app.engine.store().clone(),
        run,
        seen: known.unwrap_or(seen.stored.events.len()),
        ended: false,
        commits: None,
    };
    let stream = futures_util::stream::unfold(watch, |mut watch| async move {
        if watch.ended {
            return None;
        }
        loop {
            let stored = match watch.store.load(watch.run).await {
                Ok(Some(stored)) => stored,
                Ok(None) => return None,
                Err(error) => {
                    tracing::debug!(run = %watch.run, %error, "live page: store unavailable");
                    tokio::time::sleep(POLL).await;
                    continue;
                }
            };
            let count = stored.events.len();
            if stored.record.status != RunStatus::Running {
                watch.ended = true;
                let event = SseEvent::default().event("end").data(count.to_string());
                return Some((Ok::<_, Infallible>(event), watch));
            }
            if count != watch.seen {
                watch.seen = count;
                let event = SseEvent::default().event("change").data(count.to_string());
                return Some((Ok(event), watch));
            }
            watch.next_change().await;
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

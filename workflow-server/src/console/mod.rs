//! The console: every run in the browser, server-rendered under `/console` with the same
//! permission policy, security headers and CSRF rules as the API and the inbox (which is
//! one of its pages). Every page works without JavaScript; one small static script
//! (`/console/static/console.js`, allowed by `script-src 'self'`, no inline script)
//! brings a running run's page up to date when the run's journal changes, without
//! reloading it. `GET /console` sends everyone to the runs page.
//!
//! | Method and path | Shows or does | Who |
//! |---|---|---|
//! | `GET /console/runs?workflow=&status=&from=&to=&where=&before=` | runs filtered by workflow, status, creation time (UTC, `2026-07-18` or `2026-07-18T05:10`) and search keys (`where=`, as the API), newest first, paged by cursor, with counts per status (of the newest [`COUNTED`] that match) | anyone signed in: the runs they may view |
//! | `GET /console/runs/bulk?action=cancel\|retry&...` | what a bulk cancel or dead-letter retry of the filtered runs would do: how many runs, which | as the runs page; only the runs the caller may cancel or retry |
//! | `POST /console/runs/bulk` | carries it out, run by run, through the engine (CSRF token) | `operator` |
//! | `GET /console/runs/{run}` | the run on its spec's diagram, each step's state, attempts, duration, errors, task and decisions; timeline; journal (paged); parent and children; tick; waits; trace link | who may view the run; payloads with `payloads` |
//! | `GET /console/runs/{run}/evidence/{step}/{attempt}/{file}` | a failed browser step's screenshot (PNG) or page (HTML, as text), from [`Server::evidence_dir`](crate::Server::evidence_dir) | who may see the run's payloads |
//! | `GET /console/runs/{run}/live?seen=` | Server-Sent Events: `change` when its journal grows past `seen` entries, `end` when it finished | who may view the run |
//! | `GET /console/static/console.js` | the script | everyone |
//! | `GET`/`POST /console/runs/{run}/cancel` | asks, then cancels | `operator` |
//! | `GET`/`POST /console/runs/{run}/retry` | asks, then retries a failed run | `operator` |
//! | `GET`/`POST /console/runs/{run}/restart` | asks, then starts a new run of the workflow with the run's inputs | who may view the run and start its workflow (`operator`) |
//! | `GET /console/dead-letters` | failed runs grouped by workflow, step and error kind | viewers, of what they may view |
//! | `GET /console/schedules` | schedules, next fires in their zone, last run, lag, missed ticks | viewers of their workflows |
//! | `POST /console/schedules/{id}/pause`, `.../resume`, `.../trigger` | pauses, resumes or triggers one (CSRF token) | `operator` of its workflow |
//! | `GET /console/schedules/{id}/backfill?from=&to=` | a backfill's dry run: the ticks of the range it would start | `operator` of its workflow |
//! | `POST /console/schedules/{id}/backfill` | starts them, each under its tick's key (CSRF token) | `operator` of its workflow |
//! | `GET /console/flow` | concurrency keys in use, their holders, queued runs and the oldest wait; rate buckets (up to [`BUCKETS`]): each step rate's tokens available and used, and when the next comes | viewers; key values with `payloads` |
//! | `GET /console/workers` | the workers that keep leases in the store: runs held, last renewal, lease expiry, draining, lapsed or stopped; owners of running runs without a worker row; runs queued for a worker | viewers |
//!
//! A run the caller may not view answers as one that does not exist (404), an action it
//! may not take 403, as on the API; errors are pages with the API's status and code.
//!
//! The live updates follow the store's changes ([`Store::watch`]): on PostgreSQL a commit
//! to a watched run notifies the console (only watched runs pay for it), elsewhere the
//! store is read every [`POLL`], so a commit shows within a second either way.
//!
//! [`Store::watch`]: workflow_core::store::Store::watch

mod bulk;
mod change;
mod evidence;
mod flow;
mod live;
mod pages;
mod rates;
mod run;
mod runs;
mod states;
mod workers;

pub use evidence::MAX_EVIDENCE;
pub use flow::RUNNING;
pub use rates::BUCKETS;
pub use run::JOURNAL_PAGE;
pub use runs::{COUNTED, PAGE};

use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use workflow_core::journal::Timestamp;

use crate::auth::Identity;
use crate::error::ApiError;
use crate::inbox::PageError;
use crate::{App, Shared};

/// How often a live page's stream reads the run from the store when the store cannot
/// tell it of commits (or its subscription failed).
pub const POLL: Duration = Duration::from_millis(250);

/// The most runs one bulk action takes (the preview says when the filter finds more).
pub const BULK_MAX: usize = 500;

/// The largest form the console accepts, in bytes (413 `body_too_large` past it).
pub const MAX_FORM: usize = 64 * 1024;

/// The console's script: subscribes to a run's events and reloads its live part.
const SCRIPT: &str = include_str!("console.js");

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/console", get(home))
        .route("/console/", get(home))
        .route("/console/static/console.js", get(script))
        .route("/console/runs", get(runs::list))
        .route(
            "/console/runs/bulk",
            get(bulk::preview).post(bulk::carry_out),
        )
        .route("/console/runs/{run}", get(run::page))
        .route("/console/runs/{run}/live", get(live::live))
        .route(
            "/console/runs/{run}/evidence/{step}/{attempt}/{file}",
            get(evidence::serve),
        )
        .route(
            "/console/runs/{run}/cancel",
            get(change::ask_cancel).post(change::cancel),
        )
        .route(
            "/console/runs/{run}/retry",
            get(change::ask_retry).post(change::retry),
        )
        .route(
            "/console/runs/{run}/restart",
            get(change::ask_restart).post(change::restart),
        )
        .route("/console/dead-letters", get(pages::dead_letters))
        .route("/console/schedules", get(pages::schedules))
        .route(
            "/console/schedules/{id}/backfill",
            get(pages::backfill_preview).post(pages::backfill),
        )
        .route(
            "/console/schedules/{id}/{change}",
            post(pages::change_schedule),
        )
        .route("/console/flow", get(flow::flow))
        .route("/console/workers", get(workers::workers))
        .layer(DefaultBodyLimit::max(MAX_FORM))
}

async fn home(axum::extract::State(app): axum::extract::State<Shared>) -> Redirect {
    Redirect::to(&format!("{}/console/runs", app.base))
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

/// An error of a console page, shown as a page.
pub(crate) fn failing(app: &App, who: &Identity) -> impl Fn(ApiError) -> PageError {
    crate::inbox::fail(app, who)
}

/// 403 `csrf` unless `token` is `who`'s form token.
pub(crate) fn check_csrf(app: &App, who: &Identity, token: Option<&str>) -> Result<(), ApiError> {
    if app.csrf.verify(who, token.unwrap_or("")) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf",
            "the form's CSRF token is missing or not yours; reload the page and try again",
        ))
    }
}

/// The first value of `name` among a query's or a form's pairs.
pub(crate) fn first<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// A time written in a filter, in UTC: `2026-07-18`, `2026-07-18T05:10`,
/// `2026-07-18T05:10:30` or with a trailing `Z`; ms since the epoch. A date alone is its
/// midnight, or with `end_of_day` its last millisecond.
pub(crate) fn parse_time(text: &str, end_of_day: bool) -> Result<Timestamp, ApiError> {
    let bad = || {
        ApiError::bad_request(format!(
            "`{text}` is not a time: write `2026-07-18` or `2026-07-18T05:10` (UTC)"
        ))
    };
    let text = text.trim().trim_end_matches('Z');
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let mut parts = date.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let number = |s: &str, digits: usize| {
        (s.len() == digits && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    let (Some(y), Some(m), Some(d)) = (number(y, 4), number(m, 2), number(d, 2)) else {
        return Err(bad());
    };
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return Err(bad());
    }
    let mut ms = days_from_civil(y, m, d) * 86_400_000;
    match time {
        Some(time) => {
            let mut fields = time.split(':');
            let h = fields.next().and_then(|s| number(s, 2));
            let min = fields.next().and_then(|s| number(s, 2));
            let sec = match fields.next() {
                Some(s) => number(s, 2),
                None => Some(0),
            };
            let (Some(h), Some(min), Some(sec), None) = (h, min, sec, fields.next()) else {
                return Err(bad());
            };
            if h > 23 || min > 59 || sec > 59 {
                return Err(bad());
            }
            ms += ((h * 60 + min) * 60 + sec) * 1000;
            if end_of_day {
                ms += 999;
            }
        }
        None if end_of_day => ms += 86_400_000 - 1,
        None => {}
    }
    u64::try_from(ms).map_err(|_| bad())
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_times_read_as_utc() {
        assert_eq!(parse_time("1970-01-01", false).unwrap(), 0);
        assert_eq!(parse_time("1970-01-01", true).unwrap(), 86_399_999);
        assert_eq!(
            parse_time("2026-07-18T05:10", false).unwrap(),
            1_784_351_400_000
        );
        assert_eq!(
            parse_time("2026-07-18T05:10:00Z", false).unwrap(),
            1_784_351_400_000
        );
        assert_eq!(parse_time("2000-02-29", false).unwrap(), 951_782_400_000);
        for bad in [
            "",
            "2026-02-30",
            "2026-13-01",
            "2026-7-18",
            "2026-07-18T25:00",
            "2026-07-18T05",
            "yesterday",
            "1969-12-31",
            "<script>",
        ] {
            let error = parse_time(bad, false).unwrap_err();
            assert_eq!(error.code, "bad_request", "{bad}");
        }
    }
}

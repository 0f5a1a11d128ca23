//! Seed 003's browser automation: a weekly report from an internal finance dashboard that
//! has no API. Headless Chromium logs in, downloads the CSV export (its SHA-256 journaled
//! with the step's output), the report is parsed and checked for anomalies, a person from
//! finance reviews them, and the approved report is published through the dashboard's
//! form (an external effect: proposed, not done, in a dry run).
//!
//! The dashboard is a local axum site ([`serve_dashboard`]) with `data-testid`s on what
//! the steps touch; its export link appears only after the page has rendered, and its
//! export fails once with a 503 before it works, so the download step is retried: the
//! retry keeps the run's cookies and does not log in again.

use std::error::Error;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Form, Router};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use workflow::browser::{test_id, Browser, BrowserConfig, BrowserError, Download, Failure, Page};
use workflow::journal::Event;
use workflow::prelude::*;

use crate::{wait_for_task, Log, Progress};

/// The week's export, as the dashboard serves it: one region is far off the others.
pub const WEEKLY_CSV: &str = "region,revenue\n\
north,12040\n\
south,11875\n\
east,12390\n\
west,1210\n\
central,12110\n";

/// One row of the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The region.
    pub region: String,
    /// Its revenue, in euros.
    pub revenue: i64,
}

/// The parsed report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// The rows, in the file's order.
    pub rows: Vec<Row>,
    /// The sum of the revenues.
    pub total: i64,
    /// Rows more than 50 % off the median, described for the reviewer.
    pub anomalies: Vec<String>,
    /// The export's SHA-256, checked against the download's.
    pub sha256: String,
}

/// Where the report was published.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The dashboard's id for the publication.
    pub id: String,
}

/// The environment: the browser and the dashboard's address.
#[derive(Debug, Clone)]
pub struct Reporting {
    /// Headless Chromium.
    pub browser: Browser,
    /// The dashboard, `http://host:port`.
    pub dashboard: String,
}

/// The steps' implementations.
pub mod steps {
    use super::*;

    /// Signs in when the dashboard sent the page to its login form.
    async fn sign_in_if_asked(page: &Page) -> Result<(), BrowserError> {
        if page.url().await?.contains("/login") {
            page.fill(test_id("user"), "report-robot").await?;
            page.fill(test_id("password"), "correct horse").await?;
            page.click(test_id("sign-in")).await?;
        }
        Ok(())
    }

    /// Logs in (unless the run's cookies still hold a session) and downloads the weekly
    /// export.
    pub async fn fetch_report(env: &Reporting, ctx: &StepContext) -> Result<Download, StepError> {
        let page = env.browser.page(ctx).await?;
        page.goto(&format!("{}/reports", env.dashboard)).await?;
        sign_in_if_asked(&page).await?;
        page.wait_for_url("/reports").await?;
        // The export's availability is only known once the report page says so.
        page.wait_for(test_id("export-csv")).await?;
        page.click(test_id("export-csv")).await?;
        let status = page.text(test_id("export-status")).await?;
        if let Some(code) = status.strip_prefix("Export failed: ") {
            // The export answered an HTTP error: classified as such (a 503 is retried),
            // with the page's screenshot and HTML as evidence.
            let failure = Failure::HttpStatus {
                url: format!("{}/reports/export", env.dashboard),
                status: code.trim().parse().unwrap_or(500),
            };
            return Err(page.fail("export", failure).await.into());
        }
        let report = page.download(test_id("download-csv")).await?;
        page.close().await?;
        Ok(report)
    }

    /// Parses the export, checks it against its checksum and flags the rows more than
    /// 50 % off the median.
    pub async fn parse(report: Download) -> Result<Figures, StepError> {
        let content = tokio::fs::read(&report.path).await?;
        let sha256 = format!("{:x}", Sha256::digest(&content));
        if sha256 != report.sha256 {
            return Err(StepError::validation(format!(
                "{} changed since it was downloaded",
                report.path.display()
            )));
        }
        let text = String::from_utf8(content)
            .map_err(|_| StepError::validation("the export is not UTF-8"))?;
        let mut rows = Vec::new();
        for (n, line) in text.lines().enumerate().skip(1) {
            let (region, revenue) = line
                .split_once(',')
                .ok_or_else(|| StepError::validation(format!("line {}: no comma", n + 1)))?;
            let revenue = revenue.trim().parse().map_err(|_| {
                StepError::validation(format!("line {}: revenue {revenue:?}", n + 1))
            })?;
            rows.push(Row {
                region: region.to_owned(),
                revenue,
            });
        }
        let mut sorted: Vec<i64> = rows.iter().map(|row| row.revenue).collect();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        let anomalies = rows
            .iter()
            .filter(|row| (row.revenue - median).abs() * 2 > median.abs())
            .map(|row| format!("{}: {} (median {median})", row.region, row.revenue))
            .collect();
        Ok(Figures {
            total: rows.iter().map(|row| row.revenue).sum(),
            rows,
            anomalies,
            sha256,
        })
    }

    /// Publishes the approved report through the dashboard's form, with the step's
    /// idempotency key as the publication's reference.
    pub async fn publish(
        env: &Reporting,
        ctx: &StepContext,
        figures: Figures,
    ) -> Result<Published, StepError> {
        let page = env.browser.page(ctx).await?;
        page.goto(&format!("{}/publish", env.dashboard)).await?;
        sign_in_if_asked(&page).await?;
        page.wait_for_url("/publish").await?;
        let summary = format!(
            "total {} over {} regions; {} anomalies reviewed",
            figures.total,
            figures.rows.len(),
            figures.anomalies.len()
        );
        page.fill(test_id("summary"), &summary).await?;
        page.fill(test_id("reference"), &ctx.idempotency_key)
            .await?;
        page.click(test_id("publish")).await?;
        page.wait_for_url("/published*").await?;
        let id = page.text(test_id("publication-id")).await?;
        page.close().await?;
        Ok(Published { id })
    }
}

workflow! {
    /// The weekly dashboard report: download, parse, review, publish.
    pub workflow DashboardReport(week: String) env Reporting {
        step fetch_report -> Download {
            action: steps::fetch_report(env, ctx),
            retry: { max_attempts: 3, backoff: exponential, initial: 200ms, max: 2s, jitter: full },
            timeout: 90s,
        }
        step parse -> Figures {
            action: steps::parse(fetch_report),
        }
        human review -> Approval {
            assignee: "finance",
            depends_on: [parse],
            timeout: 24h,
            on_timeout: escalate("finance_leads"),
            prompt: "Review this week's anomalies before the report is published.",
        }
        step publish -> Published {
            action: steps::publish(env, ctx, parse),
            depends_on: [review],
            condition: review.approved,
            effect: external,
            timeout: 90s,
        }
    }
}

/// What the dashboard saw.
#[derive(Debug, Default)]
pub struct DashboardLog {
    /// Successful logins.
    pub logins: AtomicUsize,
    /// Export requests (the first one fails).
    pub exports: AtomicUsize,
    /// Publications: (reference, summary).
    pub published: Mutex<Vec<(String, String)>>,
}

/// The local finance dashboard, served until the process ends.
#[derive(Debug, Clone)]
pub struct Dashboard {
    /// Its address.
    pub addr: SocketAddr,
    /// What it saw.
    pub log: Arc<DashboardLog>,
}

impl Dashboard {
    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

const SESSION: &str = "dash_session=7f3a9c";

fn signed_in(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|cookies| cookies.split("; ").any(|cookie| cookie == SESSION))
}

/// Serves the dashboard on a free loopback port.
pub async fn serve_dashboard() -> Result<Dashboard, Box<dyn Error>> {
    let log = Arc::new(DashboardLog::default());
    let router = Router::new()
        .route("/login", get(login_page).post(login))
        .route("/reports", get(reports))
        .route("/reports/export", axum::routing::post(export))
        .route("/reports/weekly.csv", get(weekly_csv))
        .route("/publish", get(publish_page).post(publish))
        .route("/published", get(published))
        .with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(Dashboard { addr, log })
}

async fn login_page() -> Html<&'static str> {
    Html(
        r#"<!doctype html><title>Finance dashboard: sign in</title>
<form method="post" action="/login">
<input name="user" data-testid="user"> <input name="password" type="password" data-testid="password">
<button data-testid="sign-in">Sign in</button></form>"#,
    )
}

#[derive(Deserialize)]
struct Credentials {
    user: String,
    password: String,
}

async fn login(State(log): State<Arc<DashboardLog>>, Form(form): Form<Credentials>) -> Response {
    if form.user != "report-robot" || form.password != "correct horse" {
        return (StatusCode::UNAUTHORIZED, Html("<h1>Wrong password</h1>")).into_response();
    }
    log.logins.fetch_add(1, Ordering::SeqCst);
    (
        [(header::SET_COOKIE, format!("{SESSION}; Path=/; HttpOnly"))],
        Redirect::to("/reports"),
    )
        .into_response()
}

async fn reports(headers: HeaderMap) -> Response {
    if !signed_in(&headers) {
        return Redirect::to("/login").into_response();
    }
    Html(
        r#"<!doctype html><title>Reports</title><h1>Weekly revenue</h1>
<div id="actions"></div><p data-testid="export-status"></p>
<script>
// The export button is rendered once the page's data has "loaded".
setTimeout(() => {
  document.getElementById('actions').innerHTML =
    '<button data-testid="export-csv" onclick="exportCsv()">Export CSV</button>';
}, 300);
async function exportCsv() {
  const answer = await fetch('/reports/export', { method: 'POST' });
  const status = document.querySelector('[data-testid=export-status]');
  if (answer.ok) {
    status.textContent = 'Export ready';
    status.insertAdjacentHTML('afterend',
      '<a data-testid="download-csv" href="/reports/weekly.csv">weekly.csv</a>');
  } else {
    status.textContent = 'Export failed: ' + answer.status;
  }
}
</script>"#,
    )
    .into_response()
}

async fn export(State(log): State<Arc<DashboardLog>>, headers: HeaderMap) -> StatusCode {
    if !signed_in(&headers) {
        return StatusCode::UNAUTHORIZED;
    }
    if log.exports.fetch_add(1, Ordering::SeqCst) == 0 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    }
}

async fn weekly_csv(headers: HeaderMap) -> Response {
    if !signed_in(&headers) {
        return Redirect::to("/login").into_response();
    }
    (
        [
            (header::CONTENT_TYPE, "text/csv"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"weekly.csv\"",
            ),
        ],
        WEEKLY_CSV,
    )
        .into_response()
}

async fn publish_page(headers: HeaderMap) -> Response {
    if !signed_in(&headers) {
        return Redirect::to("/login").into_response();
    }
    Html(
        r#"<!doctype html><title>Publish</title><form method="post" action="/publish">
<input name="summary" data-testid="summary" size="80">
<input name="reference" data-testid="reference" size="60">
<button data-testid="publish">Publish</button></form>"#,
    )
    .into_response()
}

#[derive(Deserialize)]
struct Publication {
    summary: String,
    reference: String,
}

async fn publish(
    State(log): State<Arc<DashboardLog>>,
    headers: HeaderMap,
    Form(form): Form<Publication>,
) -> Response {
    if !signed_in(&headers) {
        return StatusCode::FORBIDDEN.into_response();
    }
    let mut published = log.published.lock().unwrap_or_else(|e| e.into_inner());
    // The reference is the step's idempotency key: a repeat publishes nothing new.
    let index = match published.iter().position(|(r, _)| *r == form.reference) {
        Some(index) => index,
        None => {
            published.push((form.reference, form.summary));
            published.len() - 1
        }
    };
    Redirect::to(&format!("/published?id=pub-{}", index + 1)).into_response()
}

#[derive(Deserialize)]
struct PublishedQuery {
    id: String,
}

async fn published(Query(query): Query<PublishedQuery>) -> Html<String> {
    let id: String = query
        .id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    Html(format!(
        "<!doctype html><title>Published</title><p>Published as <b data-testid=\"publication-id\">{id}</b></p>"
    ))
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The run.
    pub run: RunId,
    /// The downloaded export.
    pub report: Download,
    /// The parsed figures.
    pub figures: Figures,
    /// The reviewer's decision.
    pub review: Approval,
    /// The publication, if the report was approved.
    pub published: Option<Published>,
    /// Attempts of the download step (the first export fails once).
    pub fetch_attempts: u32,
    /// Logins the dashboard saw.
    pub logins: usize,
    /// Publications the dashboard holds: (reference, summary).
    pub publications: Vec<(String, String)>,
}

/// Runs the weekly report against `dashboard`, with artifacts under `artifacts`; a
/// simulated reviewer from finance approves it after reading the anomalies.
pub async fn run(
    dashboard: &Dashboard,
    artifacts: PathBuf,
    log: &Log,
) -> Result<Summary, Box<dyn Error>> {
    let browser = Browser::launch(BrowserConfig::new(artifacts)).await?;
    let engine = Engine::builder().build();
    engine.register::<DashboardReport>(Reporting {
        browser,
        dashboard: dashboard.url(),
    })?;
    let progress = Progress::start(&engine, DashboardReport::spec(), log);
    let run = engine
        .start::<DashboardReport>(DashboardReportInput {
            week: "2026-W49".into(),
        })
        .await?;

    let task = wait_for_task(&engine, run.id(), "review", Duration::from_secs(120)).await?;
    let figures = engine
        .events(run.id())
        .await?
        .into_iter()
        .find_map(|event| match event {
            Event::StepSucceeded {
                step: 1, output, ..
            } => serde_json::from_value::<Figures>(output).ok(),
            _ => None,
        })
        .ok_or("the report was not parsed")?;
    log.line(format!(
        "[review] {} sees {} anomal{}:",
        task.assignee,
        figures.anomalies.len(),
        if figures.anomalies.len() == 1 {
            "y"
        } else {
            "ies"
        }
    ));
    for anomaly in &figures.anomalies {
        log.line(format!("[review]   {anomaly}"));
    }
    let reviewer = "lee@finance";
    run.review()
        .approve(reviewer, Some("west is low because of the store refit"))
        .await?;
    log.line(format!("[review] {reviewer} approves"));

    let outputs = run.outputs().await?;
    progress.finish().await;
    let fetch_attempts = engine
        .events(run.id())
        .await?
        .iter()
        .filter(|event| matches!(event, Event::AttemptStarted { step: 0, .. }))
        .count() as u32;
    let publications = dashboard
        .log
        .published
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Ok(Summary {
        run: run.id(),
        report: outputs.fetch_report,
        figures: outputs.parse,
        review: outputs.review,
        published: outputs.publish,
        fetch_attempts,
        logins: dashboard.log.logins.load(Ordering::SeqCst),
        publications,
    })
}

//! The console over real loopback TCP: the runs page's filters, counts and paging; bulk
//! cancel and retry behind their preview, carried out run by run as the API would and
//! journaled with who did it; a run's page with its step states and live updates over
//! Server-Sent Events; the state changes' permissions, CSRF and cross-site checks; and
//! every page escaping what people and payloads wrote.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::{Method, Request, StatusCode};
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use workflow_core::journal::Event;
use workflow_core::machine::StepState;
use workflow_core::prelude::*;
use workflow_core::store::{Claimant, Heartbeat, RunStatus};
use workflow_core::{Approval, Engine, RunId, StepContext};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_server::{Csrf, Identity};
use workflow_sqlite::SqliteStore;

fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The CSRF token the tests' server (key `[42; 32]`) puts in `who`'s forms.
fn token(who: &str) -> String {
    Csrf::new([42; 32]).token(&Identity(who.to_owned()))
}

async fn post_form(addr: SocketAddr, path: &str, who: Option<&str>, body: Vec<u8>) -> Answer {
    let mut headers = vec![(
        "content-type",
        "application/x-www-form-urlencoded".to_owned(),
    )];
    if let Some(who) = who {
        headers.push(("x-forwarded-user", who.to_owned()));
    }
    request(addr, Method::POST, path, &headers, body).await
}

/// The `<status> <code>` an error page says, or the status alone for a success.
fn outcome(answer: &Answer) -> (u16, String) {
    let status = answer.status.as_u16();
    match answer.body.find("id=\"error\">") {
        Some(start) if !answer.status.is_success() && !answer.status.is_redirection() => {
            let text = &answer.body[start + 11..];
            (
                status,
                text.split([' ', ':']).nth(1).unwrap_or("").to_owned(),
            )
        }
        _ => (status, String::new()),
    }
}

fn ticket(id: &str, text: &str) -> TriageInput {
    TriageInput {
        ticket: Ticket {
            ticket_id: id.into(),
            text: text.into(),
        },
    }
}

/// Starts a Triage run and waits for its lead's task.
async fn waiting(engine: &Engine, id: &str) -> RunId {
    let run = engine
        .start::<Triage>(ticket(id, "locked out"))
        .await
        .unwrap()
        .id();
    wait_for_task(engine, run, "approve_alert").await;
    run
}

/// A Triage run that failed at its alert (a dead letter).
async fn failed(engine: &Engine, desk: &Desk, id: &str) -> RunId {
    let run = waiting(engine, id).await;
    desk.broken.store(true, Ordering::SeqCst);
    engine
        .decide(
            run,
            "approve_alert",
            LEAD,
            serde_json::to_value(Approval::approve(None)).unwrap(),
        )
        .await
        .unwrap();
    wait_for_status(engine, run, RunStatus::Failed).await;
    desk.broken.store(false, Ordering::SeqCst);
    run
}

fn by(events: &[Event]) -> (Option<String>, Option<String>) {
    let cancelled = events.iter().find_map(|e| match e {
        Event::Cancelled { by, .. } => Some(by.clone()),
        _ => None,
    });
    let retried = events.iter().find_map(|e| match e {
        Event::Retried { by, .. } => Some(by.clone()),
        _ => None,
    });
    (cancelled, retried)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_page_filters_counts_and_pages() {
    let (engine, desk) = engine(true);
    let addr = serve(server(&engine, standard()).router()).await;
    let a = waiting(&engine, "T-1").await;
    let b = waiting(&engine, "T-2").await;
    let broken = failed(&engine, &desk, "T-3").await;

    let page = get(addr, "/console/runs", Some(OPERATOR)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for run in [a, b, broken] {
        assert!(
            page.body.contains(&format!("/console/runs/{run}\"")),
            "{run}: {}",
            page.body
        );
    }
    // Counts per status, each a link to its filter.
    let counts = &page.body[page.body.find("id=\"counts\"").unwrap()..];
    let count = |status: &str| {
        let at = counts.find(&format!("count-{status}")).unwrap();
        let n = &counts[at..];
        let n = &n[n.find("class=\"n\">").unwrap() + 10..];
        n[..n.find('<').unwrap()].to_owned()
    };
    assert_eq!(
        (count("running"), count("failed"), count("completed")),
        ("2".into(), "1".into(), "0".into())
    );

    // By status, by search key, by time, by workflow.
    let failed_only = get(addr, "/console/runs?status=failed", Some(OPERATOR)).await;
    assert!(failed_only
        .body
        .contains(&format!("/console/runs/{broken}\"")));
    assert!(!failed_only.body.contains(&format!("/console/runs/{a}\"")));
    let found = get(addr, "/console/runs?where=ticket_id:T-2", Some(OPERATOR)).await;
    assert!(found.body.contains(&format!("/console/runs/{b}\"")));
    assert!(!found.body.contains(&format!("/console/runs/{a}\"")));
    // Each condition keeps a field of its own, and all must hold.
    assert!(
        found
            .body
            .contains("name=\"where\" value=\"ticket_id:T-2\""),
        "{}",
        found.body
    );
    let both = get(
        addr,
        "/console/runs?where=ticket_id:T-2&where=ticket_id:T-1",
        Some(OPERATOR),
    )
    .await;
    assert!(both.body.contains("id=\"empty\""), "{}", both.body);
    let future = get(addr, "/console/runs?from=2999-01-01", Some(OPERATOR)).await;
    assert!(future.body.contains("id=\"empty\""), "{}", future.body);
    let past = get(addr, "/console/runs?to=2000-01-01", Some(OPERATOR)).await;
    assert!(past.body.contains("id=\"empty\""), "{}", past.body);
    let other = get(addr, "/console/runs?workflow=Shipment", Some(OPERATOR)).await;
    assert!(other.body.contains("id=\"empty\""), "{}", other.body);

    // The viewer may not search by inputs (it reads payloads): nothing is found.
    let viewer = get(addr, "/console/runs?where=ticket_id:T-2", Some(VIEWER)).await;
    assert!(viewer.body.contains("id=\"empty\""), "{}", viewer.body);
    // Someone with no role sees none of them.
    let outsider = get(addr, "/console/runs", Some(OUTSIDER)).await;
    assert!(outsider.body.contains("id=\"empty\""), "{}", outsider.body);

    // Bad filters are pages with the API's codes, not panics.
    for bad in [
        "/console/runs?status=sleeping",
        "/console/runs?from=yesterday",
        "/console/runs?before=nope",
        "/console/runs?where=no-colon",
    ] {
        let answer = get(addr, bad, Some(OPERATOR)).await;
        assert_eq!(outcome(&answer), (400, "bad_request".into()), "{bad}");
    }

    // Paging by cursor: past the first page, the next page starts where it ended.
    for i in 0..workflow_server::console::PAGE {
        waiting(&engine, &format!("P-{i}")).await;
    }
    let first = get(addr, "/console/runs?status=running", Some(OPERATOR)).await;
    assert!(!first.body.contains(&format!("/console/runs/{a}\"")));
    let next = first.body.find("rel=\"next\"").map(|_| ()).is_some();
    assert!(next, "{}", first.body);
    let older = get(
        addr,
        &format!("/console/runs?before={}&status=running", RunId(a.0 + 3)),
        Some(OPERATOR),
    )
    .await;
    assert!(older.body.contains(&format!("/console/runs/{a}\"")));
    assert!(older.body.contains(&format!("/console/runs/{b}\"")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_retry_shows_its_runs_then_retries_them_as_the_operator() {
    let (engine, desk) = engine(true);
    let addr = serve(server(&engine, standard()).router()).await;
    let one = failed(&engine, &desk, "T-1").await;
    let two = failed(&engine, &desk, "T-2").await;
    let running = waiting(&engine, "T-3").await;

    let preview = get(
        addr,
        "/console/runs/bulk?action=retry&workflow=Triage",
        Some(OPERATOR),
    )
    .await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    assert!(
        preview.body.contains("Retry 2 failed runs?"),
        "{}",
        preview.body
    );
    for run in [one, two] {
        assert!(preview
            .body
            .contains(&format!("name=\"run\" value=\"{run}\"")));
    }
    assert!(!preview.body.contains(&format!("value=\"{running}\"")));
    // Nothing changed yet.
    assert_eq!(by(&engine.events(one).await.unwrap()), (None, None));

    // A viewer's preview takes nothing; a post without the person's token does nothing.
    let viewer = get(addr, "/console/runs/bulk?action=retry", Some(VIEWER)).await;
    assert!(viewer.body.contains("id=\"empty\""), "{}", viewer.body);
    let forged = post_form(
        addr,
        "/console/runs/bulk",
        Some(OPERATOR),
        form(&[
            ("csrf", &token(VIEWER)),
            ("action", "retry"),
            ("run", &one.to_string()),
        ]),
    )
    .await;
    assert_eq!(outcome(&forged), (403, "csrf".into()));
    // From another site, even with the token: refused.
    let cross = request(
        addr,
        Method::POST,
        "/console/runs/bulk",
        &[
            ("x-forwarded-user", OPERATOR.to_owned()),
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
            ("origin", "https://evil.example".to_owned()),
        ],
        form(&[
            ("csrf", &token(OPERATOR)),
            ("action", "retry"),
            ("run", &one.to_string()),
        ]),
    )
    .await;
    assert_eq!(outcome(&cross), (403, "cross_site".into()));
    // The viewer posting the runs itself: each is refused by the policy, none retried.
    let refused = post_form(
        addr,
        "/console/runs/bulk",
        Some(VIEWER),
        form(&[
            ("csrf", &token(VIEWER)),
            ("action", "retry"),
            ("run", &one.to_string()),
        ]),
    )
    .await;
    assert!(refused.body.contains("forbidden"), "{}", refused.body);
    assert_eq!(by(&engine.events(one).await.unwrap()), (None, None));

    let one_text = one.to_string();
    let two_text = two.to_string();
    let done = post_form(
        addr,
        "/console/runs/bulk",
        Some(OPERATOR),
        form(&[
            ("csrf", &token(OPERATOR)),
            ("action", "retry"),
            ("run", &one_text),
            ("run", &two_text),
        ]),
    )
    .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert!(done.body.contains("Retried 2 runs"), "{}", done.body);
    for run in [one, two] {
        let events = engine.events(run).await.unwrap();
        assert_eq!(by(&events).1.as_deref(), Some(OPERATOR), "{run}");
    }
    // The audit trail of each run names who retried it.
    let detail = get(addr, &format!("/api/runs/{one}"), Some(OPERATOR))
        .await
        .json();
    let audit = detail["audit"].as_array().unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e["action"] == "retried" && e["who"] == OPERATOR),
        "{detail}"
    );

    // A bulk cancel of the running ones, the same way.
    let preview = get(addr, "/console/runs/bulk?action=cancel", Some(OPERATOR)).await;
    assert!(
        preview.body.contains(&format!("value=\"{running}\"")),
        "{}",
        preview.body
    );
    let running_text = running.to_string();
    let done = post_form(
        addr,
        "/console/runs/bulk",
        Some(OPERATOR),
        form(&[
            ("csrf", &token(OPERATOR)),
            ("action", "cancel"),
            ("run", &running_text),
        ]),
    )
    .await;
    assert!(done.body.contains("Cancelled 1 run"), "{}", done.body);
    wait_for_status(&engine, running, RunStatus::Cancelled).await;
    assert_eq!(
        by(&engine.events(running).await.unwrap()).0.as_deref(),
        Some(OPERATOR)
    );
    let unknown = get(addr, "/console/runs/bulk?action=delete", Some(OPERATOR)).await;
    assert_eq!(outcome(&unknown), (400, "bad_request".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_page_shows_each_steps_state_and_asks_before_cancelling() {
    let (engine, _desk) = engine(true);
    let router = server(&engine, standard())
        .trace_url("https://tempo.example/trace/{trace_id}")
        .router();
    let addr = serve(router).await;
    let run = waiting(&engine, "T-1").await;
    let page = get(addr, &format!("/console/runs/{run}"), Some(OPERATOR)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    // The diagram's steps carry their state's class and its words, and so do the rows.
    assert!(body.contains("class=\"step cs-succeeded\""), "{body}");
    assert!(body.contains("class=\"step cs-waiting-person\""), "{body}");
    assert!(body.contains("class=\"step cs-not-started\""), "{body}");
    assert!(
        body.contains("approve_alert: ☐ waiting for a person"),
        "{body}"
    );
    // Each step of the diagram links to its details, so the keyboard reaches it.
    let figure = &body[body.find("id=\"diagram\"").unwrap()..];
    let figure = &figure[..figure.find("</figure>").unwrap()];
    assert!(
        figure.contains("<a href=\"#detail-approve_alert\">"),
        "{figure}"
    );
    assert_eq!(figure.matches("<a ").count(), 3, "{figure}");
    assert_eq!(figure.matches("</a>").count(), 3, "{figure}");
    assert!(body.contains("id=\"detail-approve_alert\""), "{body}");
    assert!(body.contains("✓ succeeded"), "{body}");
    // No inline script, one static script for the live part of a running run.
    assert!(body.contains("/console/static/console.js"), "{body}");
    assert!(!body.contains("<script>"), "{body}");
    assert!(
        body.contains(&format!("data-events=\"/console/runs/{run}/live?seen=")),
        "{body}"
    );
    assert!(
        body.contains("href=\"https://tempo.example/trace/"),
        "{body}"
    );
    assert!(body.contains("id=\"cancel\""), "{body}");
    assert!(body.contains("id=\"journal-entries\""), "{body}");
    // The viewer sees the run but no cancel button, nor payloads.
    let viewer = get(addr, &format!("/console/runs/{run}"), Some(VIEWER)).await;
    assert!(!viewer.body.contains("id=\"cancel\""), "{}", viewer.body);
    assert!(viewer.body.contains("id=\"redacted\""), "{}", viewer.body);
    assert!(!viewer.body.contains("locked out"), "{}", viewer.body);
    assert!(
        body.contains("locked out"),
        "the operator sees the inputs: {body}"
    );

    // Cancel asks first; the answer's form carries the person's token.
    let ask = get(addr, &format!("/console/runs/{run}/cancel"), Some(OPERATOR)).await;
    assert_eq!(ask.status, StatusCode::OK, "{}", ask.body);
    assert!(ask.body.contains(&token(OPERATOR)), "{}", ask.body);
    assert_eq!(
        engine.inspect(run).await.unwrap().record.status,
        RunStatus::Running
    );
    let done = post_form(
        addr,
        &format!("/console/runs/{run}/cancel"),
        Some(OPERATOR),
        form(&[("csrf", &token(OPERATOR))]),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    wait_for_status(&engine, run, RunStatus::Cancelled).await;
    let after = get(
        addr,
        &format!("/console/runs/{run}?done=cancelled"),
        Some(OPERATOR),
    )
    .await;
    assert!(after.body.contains("id=\"confirmation\""), "{}", after.body);
    // A finished run's page has nothing live.
    assert!(!after.body.contains("data-events"), "{}", after.body);

    // The journal pages.
    let long = waiting(&engine, "T-2").await;
    let page = get(
        addr,
        &format!("/console/runs/{long}?journal=99"),
        Some(OPERATOR),
    )
    .await;
    assert!(page.body.contains("page 1 of 1"), "{}", page.body);
}

mod slow {
    use super::*;

    /// Works for an hour, unless its run is cancelled (its future is dropped).
    pub async fn work() -> Result<u32, StepError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(1)
    }
}

workflow! {
    /// A quick step, then one that works for an hour.
    pub workflow Stalled(ticket: Ticket) env Desk {
        step classify -> bool {
            action: desk::classify(ticket),
        }
        step long -> u32 {
            action: slow::work(),
            depends_on: [classify],
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_a_cancel_stopped_is_shown_cancelled_not_failed() {
    let (engine, desk) = engine(true);
    engine.register::<Stalled>(desk).expect("registers");
    let addr = serve(server(&engine, standard()).router()).await;
    let run = engine
        .start::<Stalled>(StalledInput {
            ticket: ticket("T-1", "slow").ticket,
        })
        .await
        .unwrap()
        .id();
    let mut started = false;
    for _ in 0..500 {
        let view = engine.inspect(run).await.unwrap();
        if matches!(view.steps[1].state, StepState::Running { .. }) {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(started, "the long step never started");
    engine.cancel(run, "lee").await.unwrap();
    wait_for_status(&engine, run, RunStatus::Cancelled).await;
    assert_eq!(
        engine.inspect(run).await.unwrap().steps[1].state.name(),
        "cancelled"
    );
    let page = get(addr, &format!("/console/runs/{run}"), Some(LEAD)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    // The diagram, the steps' table, the attempt and the timeline say cancelled, with
    // its symbol beside its class; nothing says failed.
    assert!(body.contains("class=\"step cs-succeeded\""), "{body}");
    assert!(body.contains("class=\"step cs-cancelled\""), "{body}");
    assert!(body.contains("long: ⊘ cancelled"), "{body}");
    let row = &body[body.find("id=\"row-long\"").unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(
        row.contains("<span class=\"state cs-cancelled\">⊘ cancelled</span>"),
        "{row}"
    );
    let detail = &body[body.find("id=\"detail-long\"").unwrap()..];
    assert!(
        detail.contains("<span class=\"state cs-cancelled\">⊘ cancelled</span>"),
        "{detail}"
    );
    assert!(body.contains("class=\"bar cs-cancelled\""), "{body}");
    assert!(!body.contains("step cs-failed"), "{body}");
    assert!(!body.contains("bar cs-failed"), "{body}");
    // The legend names the state too.
    let legend = &body[body.find("class=\"legend\"").unwrap()..];
    let legend = &legend[..legend.find("</figcaption>").unwrap()];
    assert!(legend.contains("cs-cancelled\">⊘ cancelled"), "{legend}");
}

/// Reads `path`'s Server-Sent Events until one named `name` arrives (or `within` passes);
/// returns the events seen.
async fn events_until(
    addr: SocketAddr,
    path: &str,
    who: &str,
    name: &str,
    within: Duration,
    on_open: impl std::future::Future<Output = ()>,
) -> String {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::builder()
        .uri(path)
        .header("host", addr.to_string())
        .header("x-forwarded-user", who)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    on_open.await;
    let mut body = response.into_body();
    let mut seen = String::new();
    let _ = tokio::time::timeout(within, async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                seen.push_str(&String::from_utf8_lossy(data));
                if seen.contains(&format!("event: {name}")) {
                    return;
                }
            }
        }
    })
    .await;
    seen
}

/// A running run's page hears of a commit within a second, then of the run's end. The
/// commit is made once the stream is open and `followed` is over.
async fn hears_of_commits_within_a_second<F: std::future::Future<Output = ()>>(
    engine: &Engine,
    followed: impl FnOnce(RunId) -> F,
) {
    let addr = serve(server(engine, standard()).router()).await;
    let run = waiting(engine, "T-1").await;
    let seen = engine.events(run).await.unwrap().len();
    let path = format!("/console/runs/{run}/live?seen={seen}");
    let decider = engine.clone();
    let started = std::time::Instant::now();
    let heard = events_until(
        addr,
        &path,
        OPERATOR,
        "change",
        Duration::from_secs(1),
        async move {
            followed(run).await;
            decider
                .decide(
                    run,
                    "approve_alert",
                    LEAD,
                    serde_json::to_value(Approval::reject(None)).unwrap(),
                )
                .await
                .unwrap();
        },
    )
    .await;
    assert!(
        heard.contains("event: change") || heard.contains("event: end"),
        "nothing within {:?}: {heard:?}",
        started.elapsed()
    );
    // Once the run finished, the stream says so and ends.
    wait_for_status(engine, run, RunStatus::Completed).await;
    let ended = events_until(
        addr,
        &path,
        OPERATOR,
        "end",
        Duration::from_secs(1),
        async {},
    )
    .await;
    assert!(ended.contains("event: end"), "{ended:?}");
    // Someone who may not view the run gets what a missing run gets.
    let hidden = get(addr, &path, Some(OUTSIDER)).await;
    assert_eq!(outcome(&hidden), (404, "unknown_run".into()));
    let anonymous = get(addr, &path, None).await;
    assert_eq!(outcome(&anonymous), (401, "unauthenticated".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_runs_page_hears_of_its_commits_within_a_second() {
    let dir = std::env::temp_dir().join(format!("console-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.db");
    let _ = std::fs::remove_file(&path);
    let (on_file, _desk) = engine_on(SqliteStore::open(&path).unwrap(), true);
    hears_of_commits_within_a_second(&on_file, |_| async {}).await;
    let (in_memory, _desk) = engine(true);
    hears_of_commits_within_a_second(&in_memory, |_| async {}).await;
}

/// On PostgreSQL the page is told of the commit by a notification: the run is marked
/// watched while the page follows it, and nothing polls faster than the mark's renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_running_runs_page_hears_of_its_commits_by_notification() {
    let Some(url) = pg_testing::server("a_running_runs_page_hears_by_notification").await else {
        return;
    };
    let schema = Schema::new(&url, "console_live");
    let (engine, _desk) = engine_on(schema.store().await, true);
    // The commit is made once the page follows the run (it marked the run watched), so
    // only a notification can tell the page of it within the second: the mark holds for
    // half a minute and the page reads the run again only after half of it otherwise.
    let schema_ref = &schema;
    let marked = |run: RunId| async move {
        let check = format!(
            "DO $$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM runs WHERE id = {} AND watched_until > now()) THEN
                    RAISE EXCEPTION 'not watched';
                END IF;
             END $$;",
            run.0
        );
        while schema_ref.execute(&check).await.is_err() {
            tokio::task::yield_now().await;
        }
    };
    hears_of_commits_within_a_second(&engine, marked).await;
    drop(engine);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_state_changes_answer_each_caller_by_the_policy() {
    const CALLERS: [Option<&str>; 6] = [
        None,
        Some(OUTSIDER),
        Some(APPROVER),
        Some(VIEWER),
        Some(OPERATOR),
        Some(OTHER_OPERATOR),
    ];
    for (column, who) in CALLERS.into_iter().enumerate() {
        let (engine, desk) = engine(false);
        let addr = serve(server(&engine, standard()).router()).await;
        engine
            .schedules()
            .create(
                "nightly-report",
                "Nightly",
                workflow_core::schedule::Schedule::new("0 0 1 1 *"),
            )
            .await
            .unwrap();
        let running = waiting(&engine, "T-1").await;
        let broken = failed(&engine, &desk, "T-2").await;
        let csrf = token(who.unwrap_or("nobody"));
        let name = who.unwrap_or("anonymous");
        let schedule_row = [
            (401, "unauthenticated"),
            (404, "unknown_schedule"),
            (404, "unknown_schedule"),
            (403, "forbidden"),
            (303, ""),
            (404, "unknown_schedule"),
        ];
        let rows: [(String, [(u16, &str); 6]); 7] = [
            (
                format!("/console/runs/{running}/cancel"),
                [
                    (401, "unauthenticated"),
                    (404, "unknown_run"),
                    (403, "forbidden"),
                    (403, "forbidden"),
                    (303, ""),
                    (404, "unknown_run"),
                ],
            ),
            (
                format!("/console/runs/{broken}/retry"),
                [
                    (401, "unauthenticated"),
                    (404, "unknown_run"),
                    (403, "forbidden"),
                    (403, "forbidden"),
                    (303, ""),
                    (404, "unknown_run"),
                ],
            ),
            (
                format!("/console/runs/{broken}/restart"),
                [
                    (401, "unauthenticated"),
                    (404, "unknown_run"),
                    (403, "forbidden"),
                    (403, "forbidden"),
                    (303, ""),
                    (404, "unknown_run"),
                ],
            ),
            // Resumed first (it is not paused), so the pause below is what stays.
            (
                "/console/schedules/nightly-report/resume".to_owned(),
                schedule_row,
            ),
            (
                "/console/schedules/nightly-report/trigger".to_owned(),
                schedule_row,
            ),
            // A backfill answers with the page of the ticks it started.
            ("/console/schedules/nightly-report/backfill".to_owned(), {
                let mut row = schedule_row;
                row[4] = (200, "");
                row
            }),
            (
                "/console/schedules/nightly-report/pause".to_owned(),
                schedule_row,
            ),
        ];
        for (path, row) in &rows {
            let fields = [
                ("csrf", csrf.as_str()),
                ("from", "2026-01-01"),
                ("to", "2026-01-02"),
            ];
            let answer = post_form(addr, path, who, form(&fields)).await;
            let (status, code) = row[column];
            assert_eq!(
                outcome(&answer),
                (status, code.to_owned()),
                "POST {path} as {name}: {}",
                answer.body
            );
        }
        let events = engine.events(running).await.unwrap();
        assert_eq!(by(&events).0.is_some(), column == 4, "cancel by {name}");
        let events = engine.events(broken).await.unwrap();
        assert_eq!(by(&events).1.is_some(), column == 4, "retry by {name}");
        // The restart started one run more, with the failed run's inputs, by the operator.
        let all = engine.runs(Default::default()).await.unwrap();
        let (scheduled, runs): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|r| r.workflow == "Nightly");
        assert_eq!(
            runs.len(),
            if column == 4 { 3 } else { 2 },
            "restart by {name}"
        );
        // The trigger and the backfill started the schedule's runs, for the operator only.
        assert_eq!(!scheduled.is_empty(), column == 4, "trigger by {name}");
        if column == 4 {
            let newest = runs[0].id;
            let events = engine.events(newest).await.unwrap();
            let Some(Event::RunStarted { input, .. }) = events.first() else {
                panic!("{events:?}");
            };
            assert_eq!(input["ticket"]["ticket_id"], "T-2");
            assert!(events
                .iter()
                .any(|e| matches!(e, Event::Initiated { by, .. } if by == OPERATOR)));
        }
        let paused = workflow_core::admin::schedules::get(&**engine.store(), "nightly-report")
            .await
            .unwrap()
            .paused;
        assert_eq!(paused, column == 4, "pause by {name}");
    }
}

mod probe {
    use super::*;

    pub async fn echo(ticket: Ticket) -> Result<String, StepError> {
        Err(StepError::permanent(format!(
            "refused {} {}",
            ticket.ticket_id, ticket.text
        )))
    }
}

workflow! {
    /// Fails, quoting its input in its error.
    pub workflow Probe(ticket: Ticket) env Desk {
        search: [ticket.ticket_id],
        step echo -> String {
            action: probe::echo(ticket),
        }
    }
}

workflow! {
    /// One run per ticket at a time, each held by a lead's approval.
    pub workflow Keyed(ticket: Ticket) env Desk {
        concurrency: { key: ticket.ticket_id, limit: 1 },
        human hold -> Approval {
            assignee: "support_leads",
            timeout: 2h,
            on_timeout: escalate("on_call"),
        }
    }
}

/// What an attacker writes into inputs, errors, keys and searches.
const SCRIPT: &str = "<script>alert(1)</script>";
const BREAKOUT: &str = "\"><img src=x onerror=alert(1)>";

fn assert_escaped(page: &str, what: &str) {
    for raw in [SCRIPT, "<img src=x", "\"><img"] {
        assert!(!page.contains(raw), "{what} carries `{raw}` raw: {page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_page_escapes_what_people_and_payloads_wrote() {
    let (engine, desk) = engine(true);
    engine.register::<Probe>(desk.clone()).unwrap();
    let addr = serve(server(&engine, standard()).show_payloads(true).router()).await;
    let run = engine
        .start::<Probe>(ProbeInput {
            ticket: Ticket {
                ticket_id: BREAKOUT.into(),
                text: SCRIPT.into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_status(&engine, run, RunStatus::Failed).await;
    // Two runs of one concurrency key written by the attacker: one holds it, one waits.
    engine.register::<Keyed>(desk.clone()).unwrap();
    let keyed = |engine: Engine| async move {
        engine
            .start::<Keyed>(KeyedInput {
                ticket: Ticket {
                    ticket_id: BREAKOUT.into(),
                    text: SCRIPT.into(),
                },
            })
            .await
            .unwrap()
            .id()
    };
    let holder = keyed(engine.clone()).await;
    wait_for_task(&engine, holder, "hold").await;
    let gated = keyed(engine.clone()).await;
    let search = encode(&format!("ticket_id:{BREAKOUT}"));
    let pages = [
        "/console/runs".to_owned(),
        format!("/console/runs?where={search}"),
        format!("/console/runs?workflow={}", encode(SCRIPT)),
        format!("/console/runs?from={}", encode(SCRIPT)),
        format!("/console/runs/{run}"),
        format!("/console/runs/{gated}"),
        format!("/console/runs/{holder}"),
        format!("/console/runs/{run}/retry"),
        format!("/console/runs/bulk?action=retry&where={search}"),
        format!("/console/runs/{}", encode(SCRIPT)),
        "/console/dead-letters".to_owned(),
        "/console/schedules".to_owned(),
        "/console/flow".to_owned(),
        "/console/workers".to_owned(),
    ];
    for path in &pages {
        let answer = get(addr, path, Some(LEAD)).await;
        assert_escaped(&answer.body, path);
    }
    // What was written shows, as text.
    let escaped_script = "&lt;script&gt;alert(1)&lt;/script&gt;";
    for path in [
        format!("/console/runs/{run}"),
        "/console/dead-letters".to_owned(),
        "/console/runs".to_owned(),
    ] {
        let answer = get(addr, &path, Some(LEAD)).await;
        assert!(
            answer.body.contains(escaped_script),
            "{path}: {}",
            answer.body
        );
    }
    // The key's value shows as text where its holders and its queue are listed.
    let flow = get(addr, "/console/flow", Some(LEAD)).await.body;
    let keys = &flow[flow.find("id=\"keys\"").unwrap_or_else(|| panic!("{flow}"))..];
    assert!(
        keys.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"),
        "{keys}"
    );
    assert!(
        keys.contains(&format!("/console/runs/{holder}\"")),
        "{keys}"
    );
    let waits = get(addr, &format!("/console/runs/{gated}"), Some(LEAD))
        .await
        .body;
    assert!(waits.contains("class=\"waits\""), "{waits}");
    let found = get(addr, &format!("/console/runs?where={search}"), Some(LEAD)).await;
    assert!(
        found.body.contains(&format!("/console/runs/{run}\"")),
        "the search finds the run: {}",
        found.body
    );
    assert!(found.body.contains("&quot;&gt;&lt;img"), "{}", found.body);
    // A person's name is text too.
    let who = format!("eve{SCRIPT}");
    let answer = get(addr, "/console/runs", Some(&who)).await;
    assert_escaped(&answer.body, "a person's name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_group_and_workers_and_flow_show_running_runs() {
    let (engine, desk) = engine(true);
    let addr = serve(server(&engine, standard()).router()).await;
    let one = failed(&engine, &desk, "T-1").await;
    let two = failed(&engine, &desk, "T-2").await;
    let running = waiting(&engine, "T-3").await;
    let letters = get(addr, "/console/dead-letters", Some(OPERATOR)).await;
    assert_eq!(letters.status, StatusCode::OK, "{}", letters.body);
    assert!(
        letters.body.contains("2 failed runs in 1 groups"),
        "{}",
        letters.body
    );
    for run in [one, two] {
        assert!(letters.body.contains(&format!("/console/runs/{run}\"")));
    }
    assert!(letters.body.contains("the alert service refused the alert"));
    let viewer = get(addr, "/console/dead-letters", Some(VIEWER)).await;
    assert!(
        !viewer.body.contains("the alert service refused"),
        "{}",
        viewer.body
    );
    assert!(viewer.body.contains("(redacted)"), "{}", viewer.body);
    let outsider = get(addr, "/console/dead-letters", Some(OUTSIDER)).await;
    assert!(outsider.body.contains("id=\"empty\""), "{}", outsider.body);
    // A group's retry previews exactly its runs; runs named that the caller may not see,
    // or that are not failed, are left out.
    let group =
        format!("/console/runs/bulk?action=retry&run={one}&run={two}&run={running}&run=run-999");
    assert!(
        letters
            .body
            .contains(&format!("name=\"run\" value=\"{one}\"")),
        "{}",
        letters.body
    );
    let preview = get(addr, &group, Some(OPERATOR)).await;
    assert!(
        preview.body.contains("Retry 2 failed runs?"),
        "{}",
        preview.body
    );
    assert!(
        !preview.body.contains(&format!("value=\"{running}\"")),
        "{}",
        preview.body
    );
    let shipping = get(addr, &group, Some(OTHER_OPERATOR)).await;
    assert!(shipping.body.contains("id=\"empty\""), "{}", shipping.body);
    let bad = get(
        addr,
        "/console/runs/bulk?action=retry&run=nope",
        Some(OPERATOR),
    )
    .await;
    assert_eq!(outcome(&bad), (400, "bad_request".into()));

    let workers = get(addr, "/console/workers", Some(OPERATOR)).await;
    assert_eq!(workers.status, StatusCode::OK, "{}", workers.body);
    assert!(
        workers.body.contains(&format!("/console/runs/{running}\"")),
        "{}",
        workers.body
    );
    let flow = get(addr, "/console/flow", Some(OPERATOR)).await;
    assert_eq!(flow.status, StatusCode::OK, "{}", flow.body);
    let schedules = get(addr, "/console/schedules", Some(OPERATOR)).await;
    assert_eq!(schedules.status, StatusCode::OK, "{}", schedules.body);
}

/// The row of the workers' table that names `name`.
fn worker_row<'a>(page: &'a str, name: &str) -> &'a str {
    let table = &page[page
        .find("id=\"workers\"")
        .unwrap_or_else(|| panic!("{page}"))..];
    let start = table
        .find(&format!("<code>{name}</code>"))
        .unwrap_or_else(|| panic!("no row for {name}: {table}"));
    let row = &table[start..];
    &row[..row.find("</tr>").unwrap_or(row.len())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_page_shows_each_workers_renewal_lease_and_whether_it_drains_or_lapsed() {
    let (engine, _desk) = engine(true);
    let addr = serve(server(&engine, standard()).router()).await;
    let running = waiting(&engine, "T-1").await;
    let store = engine.store().clone();
    let now = engine.now();
    // What each engine sharing the store records with its renewals.
    let beat = |owner: &str, at: u64, draining: Option<u64>| {
        let store = store.clone();
        let owner = owner.to_owned();
        async move {
            store
                .heartbeat(Heartbeat {
                    claimant: Claimant {
                        owner: &owner,
                        lease_ms: 30_000,
                        now: at,
                    },
                    started: at.saturating_sub(60_000),
                    draining,
                })
                .await
                .unwrap();
        }
    };
    beat(engine.owner(), now, None).await;
    beat("drainer", now, Some(now - 2_000)).await;
    beat("gone-away", now - 120_000, None).await;
    beat("leaver", now, None).await;
    store.release("leaver", None).await.unwrap();
    let probe = format!("w{SCRIPT}{BREAKOUT}");
    beat(&probe, now, Some(now)).await;

    let page = get(addr, "/console/workers", Some(VIEWER)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let body = &page.body;
    let own = worker_row(body, engine.owner());
    assert!(own.contains("working"), "{own}");
    assert!(own.contains(&format!("/console/runs/{running}\"")), "{own}");
    assert!(own.contains("<td>1</td>"), "one run held: {own}");
    assert!(own.contains(" ms ago)") || own.contains(" s ago)"), "{own}");
    let drainer = worker_row(body, "drainer");
    assert!(drainer.contains("draining</strong> since"), "{drainer}");
    let gone = worker_row(body, "gone-away");
    assert!(gone.contains("lease lapsed"), "{gone}");
    assert!(gone.contains("(1 min "), "lapsed 90 s before now: {gone}");
    assert!(!gone.contains("draining"), "{gone}");
    let leaver = worker_row(body, "leaver");
    assert!(leaver.contains("stopped"), "{leaver}");
    assert!(!leaver.contains("lapsed"), "{leaver}");
    // The running run is listed under its worker, not among owners without one.
    assert!(!body.contains("id=\"owners\""), "{body}");
    // A worker's name is text.
    assert_escaped(body, "a worker's name");
    assert!(
        body.contains("w&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img"),
        "{body}"
    );
    let anonymous = get(addr, "/console/workers", None).await;
    assert_eq!(outcome(&anonymous), (401, "unauthenticated".into()));
}

workflow! {
    /// Classifies a ticket at most once an hour per ticket (two at once), then once more
    /// through a shared gateway (an hour a token, five at most).
    pub workflow Paced(ticket: Ticket) env Desk {
        step notify -> bool {
            action: desk::classify(ticket),
            rate: { key: ticket.ticket_id, limit: 1, per: 1h, burst: 2 },
        }
        step gateway -> bool {
            action: desk::classify(ticket),
            rate: { key: "sms-gateway", limit: 1, per: 1h, burst: 5 },
            depends_on: [notify],
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flow_page_shows_each_rate_bucket_by_who_may_see_it() {
    let (engine, desk) = engine(true);
    engine.register::<Paced>(desk).expect("registers");
    let roles = workflow_server::Roles::parse(&format!(
        "{LEAD} operator:* payloads:*\n{VIEWER} viewer:Paced\n{OPERATOR} operator:Triage"
    ))
    .unwrap();
    let router = workflow_server::Server::new(engine.clone())
        .authenticator(workflow_server::TrustedHeader::new())
        .permissions(roles)
        .router();
    let addr = serve(router).await;
    // Three tickets, two of them named to break out of the page.
    for id in ["T-1", SCRIPT, BREAKOUT] {
        let run = engine
            .start::<Paced>(PacedInput {
                ticket: ticket(id, "paced").ticket,
            })
            .await
            .unwrap()
            .id();
        wait_for_status(&engine, run, RunStatus::Completed).await;
    }
    let lead = get(addr, "/console/flow", Some(LEAD)).await;
    assert_eq!(lead.status, StatusCode::OK, "{}", lead.body);
    assert_escaped(&lead.body, "a rate key");
    let table = &lead.body[lead.body.find("id=\"rates\"").expect("a table of buckets")..];
    let table = &table[..table.find("</table>").unwrap()];
    let rows: Vec<&str> = table.split("<tr>").skip(2).collect();
    assert_eq!(rows.len(), 4, "{table}");
    // Each ticket's bucket: one token of two taken, the next due within the hour.
    let ticket_row = rows
        .iter()
        .find(|row| row.contains("<code>T-1</code>"))
        .expect("T-1's bucket");
    assert!(ticket_row.contains("<td>Paced.notify</td>"), "{ticket_row}");
    assert!(
        ticket_row.contains("1 per 1 h 0 min, at most 2"),
        "{ticket_row}"
    );
    assert!(
        ticket_row.contains("<td class=\"tokens\">1 of 2</td><td class=\"used\">1</td>"),
        "{ticket_row}"
    );
    assert!(
        ticket_row.contains("<td class=\"next\">in 59 min"),
        "{ticket_row}"
    );
    assert!(
        rows.iter().any(|row| row.contains("&lt;script&gt;")),
        "{table}"
    );
    // The shared gateway: three tokens of five taken, one per run.
    let gateway = rows
        .iter()
        .find(|row| row.contains("<code>sms-gateway</code>"))
        .expect("the gateway's bucket");
    assert!(gateway.contains("<td>Paced.gateway</td>"), "{gateway}");
    assert!(
        gateway.contains("<td class=\"tokens\">2 of 5</td><td class=\"used\">3</td>"),
        "{gateway}"
    );
    // A viewer without payloads sees the buckets, not their keys.
    let viewer = get(addr, "/console/flow", Some(VIEWER)).await;
    assert!(viewer.body.contains("id=\"rates\""), "{}", viewer.body);
    assert!(!viewer.body.contains("T-1"), "{}", viewer.body);
    assert!(!viewer.body.contains("sms-gateway"), "{}", viewer.body);
    assert_escaped(&viewer.body, "a rate key");
    assert_eq!(viewer.body.matches("<code>(redacted)</code>").count(), 4);
    // Who may not view the workflow sees none of them.
    for who in [OPERATOR, OUTSIDER] {
        let page = get(addr, "/console/flow", Some(who)).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(!page.body.contains("id=\"rates\""), "{}", page.body);
        assert!(page.body.contains("id=\"no-rates\""), "{}", page.body);
        assert!(!page.body.contains("Paced.notify"), "{}", page.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_shows_its_ticks_then_starts_them() {
    let (engine, _desk) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    engine
        .schedules()
        .create(
            "nightly-report",
            "Nightly",
            workflow_core::schedule::Schedule::new("0 0 * * *"),
        )
        .await
        .unwrap();
    let path = "/console/schedules/nightly-report/backfill";
    let range = "from=2026-01-01&to=2026-01-03";
    let dry = get(addr, &format!("{path}?{range}"), Some(OPERATOR)).await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.body);
    assert!(
        dry.body.contains("Backfill 3 ticks of nightly-report?"),
        "{}",
        dry.body
    );
    assert!(
        dry.body.contains("2026-01-02T00:00:00.000Z"),
        "{}",
        dry.body
    );
    let nightly = |engine: Engine| async move {
        engine
            .runs(workflow_core::store::RunFilter {
                workflow: Some("Nightly".into()),
                ..Default::default()
            })
            .await
            .unwrap()
            .len()
    };
    assert_eq!(nightly(engine.clone()).await, 0, "a dry run starts nothing");
    // Seeing a schedule is not changing it; someone who may not see it finds none.
    let viewer = get(addr, &format!("{path}?{range}"), Some(VIEWER)).await;
    assert_eq!(outcome(&viewer), (403, "forbidden".into()));
    let outsider = get(addr, &format!("{path}?{range}"), Some(OUTSIDER)).await;
    assert_eq!(outcome(&outsider), (404, "unknown_schedule".into()));
    for bad in [
        "from=2026-01-03&to=2026-01-01",
        "from=2026-01-01",
        "from=x&to=y",
    ] {
        let answer = get(addr, &format!("{path}?{bad}"), Some(OPERATOR)).await;
        assert_eq!(outcome(&answer), (400, "bad_request".into()), "{bad}");
    }
    let started = post_form(
        addr,
        path,
        Some(OPERATOR),
        form(&[
            ("csrf", &token(OPERATOR)),
            ("from", "2026-01-01"),
            ("to", "2026-01-03"),
        ]),
    )
    .await;
    assert_eq!(started.status, StatusCode::OK, "{}", started.body);
    assert!(
        started
            .body
            .contains("Backfilled 3 ticks of nightly-report"),
        "{}",
        started.body
    );
    assert_eq!(nightly(engine.clone()).await, 3);
    // Each run's page names the schedule and the tick that started it.
    let first = engine
        .runs(workflow_core::store::RunFilter {
            workflow: Some("Nightly".into()),
            ..Default::default()
        })
        .await
        .unwrap()[0]
        .id;
    let page = get(addr, &format!("/console/runs/{first}"), Some(OPERATOR))
        .await
        .body;
    let tick = &page[page.find("id=\"tick\"").unwrap_or_else(|| panic!("{page}"))..];
    assert!(tick.contains("<b>nightly-report</b>"), "{tick}");
    assert!(tick.contains("2026-01-0"), "{tick}");
    // Again: each tick ran under its key already, so nothing new starts.
    post_form(
        addr,
        path,
        Some(OPERATOR),
        form(&[
            ("csrf", &token(OPERATOR)),
            ("from", "2026-01-01"),
            ("to", "2026-01-03"),
        ]),
    )
    .await;
    assert_eq!(nightly(engine.clone()).await, 3);
    let forged = post_form(
        addr,
        path,
        Some(OPERATOR),
        form(&[("from", "2026-01-04"), ("to", "2026-01-05")]),
    )
    .await;
    assert_eq!(outcome(&forged), (403, "csrf".into()));
    assert_eq!(nightly(engine).await, 3);
}

/// Where the evidence test's browser step saves its artifacts.
static ARTIFACTS: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

mod shots {
    use super::*;

    /// Fails as a browser step does, saving a screenshot and the page's HTML first.
    pub async fn shoot(_env: &Desk, ctx: &StepContext, ticket: Ticket) -> Result<(), StepError> {
        let dir = ARTIFACTS
            .get()
            .expect("set by the test")
            .join(ctx.run_id.to_string())
            .join(ctx.step)
            .join(format!("attempt-{}", ctx.attempt));
        std::fs::create_dir_all(&dir).unwrap();
        let png = dir.join("failure-1.png");
        let html = dir.join("failure-1.html");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\n-not-really").unwrap();
        std::fs::write(
            &html,
            format!("<html><script>alert(1)</script>{}</html>", ticket.text),
        )
        .unwrap();
        Err(StepError::permanent(format!(
            "click: no element `#go` [evidence: {}, {}]",
            png.display(),
            html.display()
        )))
    }
}

workflow! {
    /// A browser step that fails, leaving its evidence.
    pub workflow Shot(ticket: Ticket) env Desk {
        step shoot -> () {
            action: shots::shoot(env, ctx, ticket),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_browser_steps_evidence_is_linked_and_served_to_who_may_see_payloads() {
    let dir = std::env::temp_dir().join(format!("console-evidence-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    ARTIFACTS.set(dir.clone()).unwrap();
    let (engine, desk) = engine(true);
    engine.register::<Shot>(desk.clone()).unwrap();
    let roles = workflow_server::Roles::parse(&format!(
        "{LEAD} operator:* payloads:*\n{VIEWER} viewer:Shot\n"
    ))
    .unwrap();
    let router = server(&engine, standard())
        .permissions(roles)
        .evidence_dir(&dir)
        .router();
    let addr = serve(router).await;
    let run = engine
        .start::<Shot>(ShotInput {
            ticket: Ticket {
                ticket_id: "T-1".into(),
                text: "page text".into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_status(&engine, run, RunStatus::Failed).await;
    let link = format!("/console/runs/{run}/evidence/shoot/1/failure-1.png");
    let page = get(addr, &format!("/console/runs/{run}"), Some(LEAD))
        .await
        .body;
    assert!(page.contains(&format!("href=\"{link}\"")), "{page}");
    let png = get(addr, &link, Some(LEAD)).await;
    assert_eq!(png.status, StatusCode::OK, "{}", png.body);
    assert_eq!(png.headers["content-type"], "image/png");
    assert!(png.body.starts_with("\u{fffd}PNG"), "{:?}", png.body);
    // A captured page is its source, as text: it never runs as this site.
    let html = get(
        addr,
        &format!("/console/runs/{run}/evidence/shoot/1/failure-1.html"),
        Some(LEAD),
    )
    .await;
    assert_eq!(html.status, StatusCode::OK);
    assert_eq!(html.headers["content-type"], "text/plain; charset=utf-8");
    assert_eq!(html.headers["x-content-type-options"], "nosniff");
    // Evidence shows payloads: a viewer without `payloads` gets none, nor its link; who
    // may not see the run gets a missing run.
    let viewer = get(addr, &link, Some(VIEWER)).await;
    assert_eq!(outcome(&viewer), (403, "forbidden".into()));
    let viewer_page = get(addr, &format!("/console/runs/{run}"), Some(VIEWER))
        .await
        .body;
    assert!(!viewer_page.contains("/evidence/"), "{viewer_page}");
    let outsider = get(addr, &link, Some(OUTSIDER)).await;
    assert_eq!(outsider.status, StatusCode::NOT_FOUND);
    // Only the layout's files: no other step, no way out of the attempt's directory.
    std::fs::write(dir.join("secret.png"), b"secret").unwrap();
    for path in [
        format!("/console/runs/{run}/evidence/other/1/failure-1.png"),
        format!("/console/runs/{run}/evidence/shoot/2/failure-1.png"),
        format!("/console/runs/{run}/evidence/shoot/x/failure-1.png"),
        format!("/console/runs/{run}/evidence/shoot/1/..%2F..%2F..%2Fsecret.png"),
        format!("/console/runs/{run}/evidence/shoot/1/notes.txt"),
    ] {
        let answer = get(addr, &path, Some(LEAD)).await;
        assert_eq!(outcome(&answer), (404, "no_evidence".into()), "{path}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_past_the_newest_thousand_say_so() {
    let (engine, _desk) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let counted = workflow_server::console::COUNTED;
    let mut last = None;
    for n in 0..=counted as u64 {
        let tick = workflow_core::Tick {
            schedule: "nightly-report".into(),
            scheduled: n,
            fired: n,
        };
        let run = engine
            .start::<Nightly>(NightlyInput { tick })
            .await
            .unwrap()
            .id();
        last = Some(run);
    }
    wait_for_status(&engine, last.unwrap(), RunStatus::Completed).await;
    let page = get(addr, "/console/runs", Some(LEAD)).await.body;
    let counts = &page[page.find("id=\"counts\"").unwrap()..];
    let counts = &counts[..counts.find("</nav>").unwrap()];
    assert!(counts.contains("id=\"sampled\""), "{counts}");
    assert!(
        counts.contains(&format!("of the newest {counted} runs")),
        "{counts}"
    );
    let n = &counts[counts.find("count-completed").unwrap()..];
    let n = &n[n.find("class=\"n\">").unwrap() + 10..];
    let n: usize = n[..n.find('<').unwrap()].parse().unwrap();
    // The newest thousand, of which the last may still be finishing.
    assert!(n == counted || n == counted - 1, "{counts}");
    // A filter that matches fewer is counted exactly, and says nothing more.
    let few = get(addr, "/console/runs?workflow=Triage", Some(LEAD))
        .await
        .body;
    assert!(!few.contains("id=\"sampled\""), "{few}");
}

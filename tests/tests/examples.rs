//! Each runnable example's scenario, run by the same library code the example runs, with
//! its outcome asserted.
//!
//! The onboarding tests use real time (with the simulated service latency set to zero):
//! they run on a SQLite file, whose writes happen on the store's writer thread, and tokio's
//! paused clock would auto-advance while waiting for them (see `SqliteStore`'s docs),
//! firing the 48-hour review timeout early. The others run on paused time.

use std::path::PathBuf;
use std::time::Duration;

use examples::content_moderation;
use examples::onboarding::{self, Config, Found, Reviewer};
use examples::order_saga;
use examples::parallel_report::{self, Sources};
use examples::ticket_server;
use examples::ticket_triage;
use examples::Log;
use workflow_core::store::RunStatus;
use workflow_core::{DecisionError, ErrorKind};

/// A store file of its own for each test, removed when dropped.
struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let file = format!("workflow-example-{name}-{}-{nanos}.db", std::process::id());
        TempDb(std::env::temp_dir().join(file))
    }

    fn config(&self, reviewer: Reviewer) -> Config {
        let mut config = Config::new(&self.0);
        config.latency = Duration::ZERO;
        config.reviewer = reviewer;
        config
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.0.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

const APPROVE_NOW: Reviewer = Reviewer::Simulated {
    delay: Duration::ZERO,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboarding_completes_after_a_retry_and_an_approval_and_a_rerun_returns_the_same_run() {
    let db = TempDb::new("onboarding");
    let log = Log::quiet();
    let first = onboarding::run(&db.config(APPROVE_NOW), &log)
        .await
        .unwrap();
    assert_eq!(first.found, Found::New);
    assert_eq!(first.status, RunStatus::Completed);
    assert_eq!(
        first.provision_attempts, 2,
        "one simulated 503, then success"
    );
    let workspace = first
        .workspace
        .clone()
        .expect("the workspace is provisioned");
    let review = first.review.clone().expect("the review is decided");
    assert!(review.approved);
    assert_eq!(review.by, "ana@trust_and_safety_team");
    assert!(first.welcome_sent);
    assert!(first.activated);
    let services: Vec<&str> = first
        .calls
        .iter()
        .map(|c| c.split(']').next().unwrap_or(""))
        .collect();
    assert_eq!(
        services.iter().filter(|s| **s == "[workspaces").count(),
        2,
        "{:?}",
        first.calls
    );
    assert!(first.calls[0].starts_with("[accounts] created user"));
    assert!(first.calls.last().unwrap().ends_with("is active"));
    // The progress stream showed the failure, the retry and the human decision live.
    assert!(log.contains("provision_workspace: attempt 1 FAILED (unavailable"));
    assert!(log.contains("provision_workspace: attempt 2 started (after"));
    assert!(log.contains("human_review: waiting for a decision by trust_and_safety_team"));
    assert!(log.contains("[simulated reviewer] ana@trust_and_safety_team approves"));
    assert!(log.contains("human_review: approved by ana@trust_and_safety_team"));

    // Run the example again on the same file: the signup's idempotency key finds the
    // finished run, and nothing runs again.
    let again = onboarding::run(&db.config(APPROVE_NOW), &Log::quiet())
        .await
        .unwrap();
    assert_eq!(again.found, Found::Finished);
    assert_eq!(again.run, first.run);
    assert!(again.calls.is_empty(), "nothing re-ran: {:?}", again.calls);
    assert_eq!(again.workspace, Some(workspace));
    assert_eq!(again.review, Some(review));
    assert_eq!(again.provision_attempts, 2);
}

#[test]
fn an_interrupted_onboarding_resumes_without_rerunning_completed_steps() {
    let db = TempDb::new("interrupted");
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    // The first process stops while the review waits; dropping its runtime ends it.
    let first = runtime();
    let stopped = first
        .block_on(onboarding::run(
            &db.config(Reviewer::StopAtReview),
            &Log::quiet(),
        ))
        .unwrap();
    drop(first);
    assert_eq!(stopped.found, Found::New);
    assert_eq!(stopped.status, RunStatus::Running);
    assert_eq!(stopped.review, None);
    assert_eq!(stopped.calls.len(), 4, "{:?}", stopped.calls);

    // The second process resumes it from the journal: only the activation runs.
    let log = Log::quiet();
    let resumed = runtime()
        .block_on(onboarding::run(&db.config(APPROVE_NOW), &log))
        .unwrap();
    assert_eq!(resumed.found, Found::Resumed);
    assert_eq!(resumed.run, stopped.run);
    assert_eq!(resumed.status, RunStatus::Completed);
    assert_eq!(resumed.calls.len(), 1, "{:?}", resumed.calls);
    assert!(resumed.calls[0].ends_with("is active"));
    assert_eq!(resumed.provision_attempts, 2);
    assert!(resumed.review.is_some_and(|r| r.approved));
    assert!(resumed.activated);
    assert!(log.contains("Resumed 1 unfinished run(s)"));
    assert!(log.contains("human_review         waiting"));
}

#[tokio::test(start_paused = true)]
async fn ticket_triage_makes_one_run_and_sends_exactly_one_alert() {
    let log = Log::quiet();
    let summary = ticket_triage::run(false, &log).await.unwrap();
    assert_eq!(summary.runs.len(), 3);
    assert!(
        summary.runs.iter().all(|run| *run == summary.runs[0]),
        "{:?}",
        summary.runs
    );
    let triage = summary.triage.unwrap();
    assert!(triage.urgent && triage.ambiguous);
    let approval = summary.approval.unwrap();
    assert!(approval.approved);
    assert_eq!(approval.by, "lee@support_leads");
    // The reply was lost after the alert went out; the retry reconciled instead of posting.
    assert_eq!(summary.posts, 1);
    assert_eq!(summary.delivered.len(), 1, "{:?}", summary.delivered);
    assert_eq!(summary.send_attempts, 2);
    assert_eq!(summary.alert.as_ref(), Some(&summary.delivered[0].id));
    assert_eq!(
        summary.delivered[0].key,
        format!("TicketTriage/{}/send_alert", summary.runs[0].0)
    );
    assert!(summary.proposals.is_empty());
    assert!(log.contains("send_alert: attempt 1 FAILED (timeout"));
    assert!(log.contains("lookup key=TicketTriage/1/send_alert: found alert-1"));
    // A forged delivery is refused by the signature check, in one attempt.
    assert!(summary
        .forged
        .contains("failed at step `verify` after 1 attempt(s): unauthorized"));

    // Frozen clock, seeded jitter, paused time: the same scenario prints the same lines.
    let again = Log::quiet();
    ticket_triage::run(false, &again).await.unwrap();
    assert_eq!(log.lines(), again.lines());
}

#[tokio::test(start_paused = true)]
async fn a_ticket_triage_dry_run_proposes_the_alert_and_sends_nothing() {
    let summary = ticket_triage::run(true, &Log::quiet()).await.unwrap();
    assert!(summary.runs.iter().all(|run| *run == summary.runs[0]));
    assert!(summary.approval.unwrap().approved);
    assert_eq!(summary.posts, 0);
    assert!(summary.delivered.is_empty());
    assert_eq!(summary.alert, None);
    assert_eq!(summary.send_attempts, 0);
    assert_eq!(summary.proposals.len(), 1);
    assert_eq!(summary.proposals[0].0, "send_alert");
    assert_eq!(summary.proposals[0].1["verify"]["ticket_id"], "T-91");
}

#[tokio::test(start_paused = true)]
async fn content_moderation_escalates_after_48_hours() {
    let summary = content_moderation::run(&Log::quiet()).await.unwrap();
    // The clean post needs nobody.
    assert!(!summary.clean.screening.requires_human_review);
    assert_eq!(summary.clean.review, None);
    assert!(summary.clean.task_events.is_empty());
    assert!(summary.clean.publication.is_some());
    // The flagged one escalates exactly 48 hours after its task opened.
    let flagged = &summary.flagged;
    assert!(flagged.screening.requires_human_review);
    let events: Vec<(u64, &str)> = flagged
        .task_events
        .iter()
        .map(|(after, what)| (after.as_secs(), what.as_str()))
        .collect();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0], (0, "opened for moderators"));
    assert_eq!(events[1], (48 * 3600, "escalated to moderation_leads"));
    assert_eq!(events[2].1, "decided by lee@moderation_leads");
    assert!(events[2].0 > 48 * 3600);
    assert_eq!(summary.escalated_to, "moderation_leads");
    assert!(
        matches!(summary.late_moderator, Some(DecisionError::Unauthorized { ref assignee, .. }) if assignee == "moderation_leads"),
        "{:?}",
        summary.late_moderator
    );
    let review = flagged.review.clone().unwrap();
    assert!(!review.approved);
    assert_eq!(flagged.publication, None);
}

#[tokio::test(start_paused = true)]
async fn order_saga_compensates_in_reverse_order_and_dead_letters_the_run() {
    let summary = order_saga::run(&Log::quiet()).await.unwrap();
    let services: Vec<String> = summary
        .calls
        .iter()
        .map(|c| c.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        services,
        [
            "[inventory] reserve",
            "[payments] charge",
            "[carrier] book",
            "[payments] refund",
            "[inventory] release"
        ]
    );
    assert_eq!(summary.compensated, ["charge_payment", "reserve_inventory"]);
    let letter = summary.dead_letter.unwrap();
    assert_eq!(letter.run, summary.run);
    assert_eq!(
        (letter.step.as_str(), letter.attempts, letter.kind),
        ("ship", 1, ErrorKind::Validation)
    );
    assert!(letter.message.contains("carrier rejected the address"));
    assert!(!letter.trace_id.is_empty());
}

#[tokio::test(start_paused = true)]
async fn parallel_report_takes_as_long_as_the_slowest_fetch() {
    let sources = Sources::default();
    let summary = parallel_report::run(sources.clone(), &Log::quiet())
        .await
        .unwrap();
    let slowest = sources.slowest().1;
    assert!(summary.elapsed >= slowest, "{:?}", summary.elapsed);
    assert!(
        summary.elapsed < slowest + Duration::from_millis(50),
        "{:?}",
        summary.elapsed
    );
    assert!(summary.elapsed < sources.sequential());
    assert_eq!(summary.fetches.len(), 4);
    assert!(
        summary
            .fetches
            .iter()
            .all(|(_, start, _)| *start == Duration::ZERO),
        "{:?}",
        summary.fetches
    );
    assert_eq!(summary.report.lines.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_fulfilment_maps_ships_in_a_child_and_takes_an_early_payment() {
    use examples::order_fulfilment;
    let db = TempDb::new("fulfil");
    let summary = order_fulfilment::run(db.0.clone(), 10, &Log::quiet())
        .await
        .unwrap();
    let holds = &summary.outputs.reserve_lines;
    assert_eq!(holds.len(), 10);
    let skus: Vec<&str> = holds.iter().map(|h| h.sku.as_str()).collect();
    assert_eq!(skus[0], "SKU-00");
    assert_eq!(skus[9], "SKU-09", "in the order's order");
    let mut keys = summary.reservations.clone();
    keys.dedup();
    assert_eq!(keys.len(), 10, "one key per line");
    assert_eq!(summary.outputs.ship.pack.items, 19);
    assert_eq!(summary.outputs.payment.amount_cents, 12_900);
    let store = workflow_sqlite::SqliteStore::open(&db.0).unwrap();
    let runs = workflow_core::store::Store::runs(&store, Default::default())
        .await
        .unwrap();
    let child = runs.iter().find(|r| r.workflow == "Shipping").unwrap();
    assert_eq!(child.parent, Some(summary.run));
    drop(store);
    // The start is keyed by the order: a second run finds the first.
    let again = order_fulfilment::run(db.0.clone(), 10, &Log::quiet())
        .await
        .unwrap();
    assert_eq!(again.run, summary.run);
}

/// One HTTP/1.1 request on a fresh loopback connection: status and body.
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

/// The front-door example: the signed delivery it prints makes one run however often it is
/// sent, the forged one is refused and journals nothing, and the lead's approval over HTTP
/// sends exactly one alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ticket_triage_server_verifies_at_the_front_door_and_sends_one_alert() {
    use examples::ticket_triage::AlertService;
    use std::sync::Arc;
    use workflow_core::prelude::*;

    let engine = Engine::builder().build();
    let alerts = Arc::new(AlertService::default());
    let router = ticket_server::router(&engine, Arc::clone(&alerts), &Log::quiet()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let now = (engine.now() / 1000) as i64;
    let line = ticket_server::curl(addr, "evt_884", now, false);
    assert!(
        line.contains("webhook-signature: v1,") && line.contains(ticket_server::HOOK),
        "{line}"
    );

    let deliver = |event_id: &'static str, forged: bool| async move {
        let mut headers =
            ticket_server::webhook().sign(event_id, now, ticket_server::BODY.as_bytes());
        if forged {
            headers[2].1 = "v1,Zm9yZ2Vk".into();
        }
        let mut all: Vec<(&str, String)> = vec![("content-type", "application/json".into())];
        all.extend(headers);
        http(addr, "POST", ticket_server::HOOK, &all, ticket_server::BODY).await
    };
    let mut runs = Vec::new();
    for expected in [201, 200, 200] {
        let (status, body) = deliver("evt_884", false).await;
        assert_eq!(status, expected, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        runs.push(answer["run"].as_str().unwrap().to_owned());
    }
    assert!(runs.iter().all(|run| *run == runs[0]), "{runs:?}");
    let (status, body) = deliver("evt_885", true).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(engine.runs(Default::default()).await.unwrap().len(), 1);

    let run: RunId = runs[0].parse().unwrap();
    examples::wait_for_task(&engine, run, "approve_alert", Duration::from_secs(10))
        .await
        .unwrap();
    let lead = [
        ("x-forwarded-user", "lee@support_leads".to_owned()),
        ("content-type", "application/json".to_owned()),
    ];
    let (status, body) = http(
        addr,
        "POST",
        &format!("/api/runs/{run}/tasks/approve_alert"),
        &lead,
        r#"{"approved": true, "comment": "payroll is blocked"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let outputs = tokio::time::timeout(
        Duration::from_secs(10),
        engine
            .handle::<ticket_server::TicketIntake>(run)
            .await
            .unwrap()
            .outputs(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(outputs.send_alert.is_some());
    assert_eq!(alerts.delivered().len(), 1);
}

/// The dashboard report in headless Chromium (installed with apt-get when missing, as
/// root): the export fails once (503, evidence saved), the retry downloads it without a
/// second login, the anomaly is found, the review approves and the report is published
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_report_downloads_after_a_503_reviews_the_anomaly_and_publishes_once() {
    use examples::dashboard_report::{self, serve_dashboard, WEEKLY_CSV};
    workflow_browser::ensure_installed().expect("chromedriver and chromium");
    let artifacts = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-report");
    let _ = std::fs::remove_dir_all(&artifacts);
    let dashboard = serve_dashboard().await.unwrap();
    let summary = dashboard_report::run(&dashboard, artifacts.clone(), &Log::quiet())
        .await
        .unwrap();

    assert_eq!(summary.fetch_attempts, 2, "one 503, then the download");
    assert_eq!(summary.logins, 1, "the retry kept the run's login");
    let attempt = |n: u32| {
        artifacts
            .canonicalize()
            .unwrap()
            .join(format!("run-{}/fetch_report/attempt-{n}", summary.run.0))
    };
    assert!(std::fs::read_to_string(attempt(1).join("failure-1.html"))
        .unwrap()
        .contains("Export failed: 503"));
    assert!(std::fs::read(attempt(1).join("failure-1.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));
    assert_eq!(summary.report.path, attempt(2).join("downloads/weekly.csv"));
    assert_eq!(summary.report.bytes, WEEKLY_CSV.len() as u64);
    assert_eq!(summary.figures.sha256, summary.report.sha256);
    assert_eq!(summary.figures.rows.len(), 5);
    assert_eq!(summary.figures.total, 49_625);
    assert_eq!(
        summary.figures.anomalies,
        vec!["west: 1210 (median 12040)".to_owned()]
    );
    assert!(summary.review.approved);
    assert_eq!(summary.review.by, "lee@finance");
    assert_eq!(summary.published.unwrap().id, "pub-1");
    assert_eq!(
        summary.publications,
        vec![(
            format!("DashboardReport/{}/publish", summary.run.0),
            "total 49625 over 5 regions; 1 anomalies reviewed".to_owned()
        )]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn onboarding_from_the_seeds_yaml_file_runs_end_to_end_on_sqlite() {
    let db = TempDb::new("onboarding-file");
    let log = Log::quiet();
    let summary = examples::onboarding_file::run(&db.0, &log)
        .await
        .expect("the file's workflow runs");
    assert_eq!(summary.status, RunStatus::Completed);
    assert_eq!(summary.user.email, "ada@example.com");
    assert_eq!(
        summary.provision_attempts, 2,
        "one transient failure, one retry"
    );
    assert!(summary.approved && summary.activated);
    assert_eq!(
        summary.welcome.map(|r| r.message_id).as_deref(),
        Some("welcome-15012"),
        "the `with:` literal reaches the action"
    );
    assert_eq!(
        summary.calls.first().map(String::as_str),
        Some("[accounts] created user 15012 for ada@example.com (Ada Lovelace, plan team)")
    );
    assert_eq!(
        summary.calls.last().map(String::as_str),
        Some("[accounts] user 15012 is active")
    );
}

#[tokio::test(start_paused = true)]
async fn daily_report_fires_at_nine_berlin_time_on_weekdays_across_the_dst_change() {
    let summary = examples::daily_report::run(&Log::quiet()).await.unwrap();
    // Mon 23 - Fri 27 in winter time, Mon 30 - Wed 1 in summer time; no weekend.
    assert_eq!(
        summary.ticks,
        [
            "2026-03-23T09:00:00+01:00[Europe/Berlin]",
            "2026-03-24T09:00:00+01:00[Europe/Berlin]",
            "2026-03-25T09:00:00+01:00[Europe/Berlin]",
            "2026-03-26T09:00:00+01:00[Europe/Berlin]",
            "2026-03-27T09:00:00+01:00[Europe/Berlin]",
            "2026-03-30T09:00:00+02:00[Europe/Berlin]",
            "2026-03-31T09:00:00+02:00[Europe/Berlin]",
            "2026-04-01T09:00:00+02:00[Europe/Berlin]",
        ]
    );
    assert_eq!(summary.sent.len(), 8, "one report per tick");
    assert_eq!(
        summary.reviewed,
        ["2026-03-25"],
        "only the anomalous day waits for a person"
    );
    assert_eq!(
        summary.sent[2],
        "report for 2026-03-25: 400 orders, 90 refunds (anomalies reviewed by ana@analysts)"
    );
}

//! Webhook intake over real loopback TCP: every refusal journals nothing; a redelivery
//! answers with the first delivery's run. Seed 000's triple-delivered webhook end to end.

mod common;

use axum::http::StatusCode;
use common::*;
use workflow_core::store::RunStatus;
use workflow_sqlite::SqliteStore;

use workflow_server::WebhookConfig;

const TEXT: &str = "Maybe locked out; payroll closes today";

/// Seed 000: the helpdesk delivers one signed webhook three times; one run, one approval
/// (over the API), one alert; a forged fourth delivery is refused before any parse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_delivered_three_times_makes_one_run_and_one_alert() {
    let (engine, desk) = engine(false);
    let config = standard();
    let addr = serve(server(&engine, config.clone()).router()).await;
    let body = body("evt_884", "T-91", TEXT);

    let mut runs = Vec::new();
    for delivery in 0..3 {
        let headers = config.sign("evt_884", now_secs(&engine), &body);
        let answer = deliver(addr, &headers, body.clone()).await;
        let expected = if delivery == 0 {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        assert_eq!(answer.status, expected, "{}", answer.body);
        assert_eq!(answer.json()["created"], delivery == 0);
        assert_eq!(answer.json()["event_id"], "evt_884");
        runs.push(run_id(&answer));
    }
    assert!(runs.iter().all(|run| *run == runs[0]), "{runs:?}");
    assert_eq!(run_count(&engine).await, 1);

    let run = runs[0];
    let task = wait_for_task(&engine, run, "approve_alert").await;
    assert_eq!(task.assignee, "support_leads");
    let decided = post_json(
        addr,
        &format!("/api/runs/{run}/tasks/approve_alert"),
        Some(LEAD),
        serde_json::json!({ "approved": true, "comment": "payroll is blocked" }),
    )
    .await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    wait_for_status(&engine, run, RunStatus::Completed).await;
    assert_eq!(desk.alerts.load(std::sync::atomic::Ordering::SeqCst), 1);

    // A forged delivery of a new event: refused, no second run.
    let forged = body_of("evt_885");
    let mut headers = config.sign("evt_885", now_secs(&engine), &forged);
    headers[2].1 = "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".into();
    let answer = deliver(addr, &headers, forged).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer.code(), "bad_signature");
    assert_eq!(run_count(&engine).await, 1);

    // The run's record names the event id, scoped to the endpoint and workflow, as its key,
    // and the audit trail the lead.
    let detail = get(addr, &format!("/api/runs/{run}"), Some(LEAD))
        .await
        .json();
    assert_eq!(
        detail["idempotency_key"],
        "webhook /hooks/tickets Triage evt_884"
    );
    assert_eq!(detail["status"], "completed");
    let audit = detail["audit"].as_array().unwrap();
    assert!(audit.iter().any(|entry| entry["action"] == "decided"
        && entry["who"] == LEAD
        && entry["detail"] == "approved (\"payroll is blocked\")"));
}

/// Signed headers of a delivery.
type Headers = Vec<(&'static str, String)>;

fn body_of(event_id: &str) -> Vec<u8> {
    body(event_id, "T-92", TEXT)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_missing_or_stale_signatures_are_401_and_journal_nothing() {
    let (engine, _) = engine(false);
    let config = standard();
    let addr = serve(server(&engine, config.clone()).router()).await;
    let body = body_of("evt_1");
    let now = now_secs(&engine);
    let good = config.sign("evt_1", now, &body);

    let other = WebhookConfig::standard("whsec_b3RoZXItc2VjcmV0LW9mLWFub3RoZXItc2VuZGVy").unwrap();
    let mut truncated = good.clone();
    truncated[2].1.truncate(20);
    let mut empty = good.clone();
    empty[2].1 = "v1,".into();
    let mut changed_id = good.clone();
    changed_id[0].1 = "evt_2".into();
    let cases: Vec<(&str, Headers, Vec<u8>, &str)> = vec![
        ("no headers", Vec::new(), body.clone(), "missing_signature"),
        (
            "no signature",
            good[..2].to_vec(),
            body.clone(),
            "missing_signature",
        ),
        (
            "another secret",
            other.sign("evt_1", now, &body),
            body.clone(),
            "bad_signature",
        ),
        ("truncated", truncated, body.clone(), "bad_signature"),
        ("empty", empty, body.clone(), "bad_signature"),
        ("another id", changed_id, body.clone(), "bad_signature"),
        (
            "changed body",
            good.clone(),
            body_of("evt_9"),
            "bad_signature",
        ),
        (
            "stale",
            config.sign("evt_1", now - 301, &body),
            body.clone(),
            "stale_timestamp",
        ),
        (
            "future",
            config.sign("evt_1", now + 301, &body),
            body.clone(),
            "stale_timestamp",
        ),
    ];
    for (case, headers, body, code) in cases {
        let answer = deliver(addr, &headers, body).await;
        assert_eq!(
            answer.status,
            StatusCode::UNAUTHORIZED,
            "{case}: {}",
            answer.body
        );
        assert_eq!(answer.code(), code, "{case}");
    }
    assert_eq!(run_count(&engine).await, 0, "nothing journaled");
    // Within the tolerance, both ways, it is taken.
    for (id, skew) in [("evt_a", -290), ("evt_b", 290)] {
        let body = body_of(id);
        let answer = deliver(addr, &config.sign(id, now + skew, &body), body).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{id}: {}", answer.body);
    }
    assert_eq!(run_count(&engine).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_is_413_and_journals_nothing() {
    let (engine, _) = engine(false);
    let config = standard();
    let addr = serve(server(&engine, config.clone()).router()).await;
    let big = body("evt_big", "T-1", &"x".repeat(5000));
    let answer = deliver(addr, &config.sign("evt_big", now_secs(&engine), &big), big).await;
    assert_eq!(
        answer.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        answer.body
    );
    assert_eq!(answer.code(), "body_too_large");
    assert_eq!(run_count(&engine).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_but_unparseable_payload_is_422_and_journals_nothing() {
    let (engine, _) = engine(false);
    let config = standard();
    let addr = serve(server(&engine, config.clone()).router()).await;
    let now = now_secs(&engine);
    for (id, body) in [
        ("evt_text", b"not json at all".to_vec()),
        ("evt_shape", br#"{"ticket_id": 7}"#.to_vec()),
    ] {
        let answer = deliver(addr, &config.sign(id, now, &body), body).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{id}: {}",
            answer.body
        );
        assert_eq!(answer.code(), "invalid_payload");
        assert!(answer.json()["error"]["message"].is_string());
    }
    // Unverified and unparseable: the signature is checked first (401, not 422).
    let answer = deliver(addr, &[], b"not json".to_vec()).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert_eq!(run_count(&engine).await, 0);
}

/// Stripe and GitHub endpoints: the event id comes from the payload and from
/// `X-GitHub-Delivery`, and a redelivery answers with the same run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_and_github_deliveries_are_verified_and_deduplicated() {
    let (engine, _) = engine(false);
    let stripe = WebhookConfig::stripe("whsec_stripe").unwrap();
    let github = WebhookConfig::github("gh-secret").unwrap();
    let router = workflow_server::Server::new(engine.clone())
        .webhook::<Triage, Ticket>("/hooks/stripe", stripe.clone(), |ticket| TriageInput {
            ticket,
        })
        .webhook::<Triage, Ticket>("/hooks/github", github.clone(), |ticket| TriageInput {
            ticket,
        })
        .router();
    let addr = serve(router).await;
    let now = now_secs(&engine);
    let post = |path: &'static str, headers: Vec<(&'static str, String)>, body: Vec<u8>| async move {
        let mut all: Vec<(&str, String)> = vec![("content-type", "application/json".into())];
        all.extend(headers);
        request(addr, axum::http::Method::POST, path, &all, body).await
    };

    let body = body("evt_stripe_1", "T-1", TEXT);
    let first = post("/hooks/stripe", stripe.sign("", now, &body), body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(first.json()["event_id"], "evt_stripe_1");
    let again = post(
        "/hooks/stripe",
        stripe.sign("", now + 5, &body),
        body.clone(),
    )
    .await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(run_id(&again), run_id(&first));
    let stale = post(
        "/hooks/stripe",
        stripe.sign("", now - 400, &body),
        body.clone(),
    )
    .await;
    assert_eq!(stale.code(), "stale_timestamp");

    let delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958";
    let first = post(
        "/hooks/github",
        github.sign(delivery, now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let again = post(
        "/hooks/github",
        github.sign(delivery, now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(
        (again.status, run_id(&again)),
        (StatusCode::OK, run_id(&first))
    );
    let mut forged = github.sign(delivery, now, &body);
    forged[1].1 = format!("sha256={}", "0".repeat(64));
    let answer = post("/hooks/github", forged, body).await;
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (StatusCode::UNAUTHORIZED, "bad_signature")
    );
    assert_eq!(run_count(&engine).await, 2);
}

/// The same deliveries on a SQLite file: one run per event id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redeliveries_on_sqlite_make_one_run_per_event() {
    let dir = std::env::temp_dir().join(format!("wf-server-intake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runs.db");
    let _ = std::fs::remove_file(&path);
    let (engine, _) = engine_on(SqliteStore::open(&path).unwrap(), false);
    let config = standard();
    let addr = serve(server(&engine, config.clone()).router()).await;
    for round in 0..2 {
        for n in 0..5 {
            let id = format!("evt_{n}");
            let body = body(&id, "T", "fine");
            let answer = deliver(addr, &config.sign(&id, now_secs(&engine), &body), body).await;
            let expected = if round == 0 {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            assert_eq!(answer.status, expected, "{}", answer.body);
        }
    }
    assert_eq!(run_count(&engine).await, 5);
    let _ = std::fs::remove_dir_all(&dir);
}

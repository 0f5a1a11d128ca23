//! What every answer of the front door carries and how it refuses: the security headers,
//! JSON bodies for unknown paths and methods, body limits, media types, credentials that
//! cannot be one person, an unavailable policy, and redaction for those without payloads.

mod common;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::json;
use workflow_core::store::RunStatus;
use workflow_server::{
    Action, Authenticator, BearerTokens, Caller, PolicyError, Server, Target, TrustedHeader,
    Verdict,
};

async fn start(addr: std::net::SocketAddr, key: &str, text: &str) -> workflow_core::RunId {
    let answer = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": key, "text": text}}}),
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.body);
    run_id(&answer)
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer
        .headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_else(|| panic!("no `{name}` header on {} {}", answer.status, answer.body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_the_security_headers() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = start(addr, "T-1", "locked out").await;
    wait_for_task(&engine, run, "approve_alert").await;
    for (path, who) in [
        ("/inbox".to_owned(), Some(LEAD)),
        (format!("/inbox/runs/{run}"), Some(LEAD)),
        (format!("/api/runs/{run}"), Some(LEAD)),
        ("/api/runs".to_owned(), Some(LEAD)),
        ("/api/runs".to_owned(), None),
        ("/api/nowhere".to_owned(), Some(LEAD)),
        (format!("/inbox/runs/{run}"), Some(OUTSIDER)),
        ("/console/runs".to_owned(), Some(LEAD)),
        (format!("/console/runs/{run}"), Some(LEAD)),
        (format!("/console/runs/{run}/cancel"), Some(LEAD)),
        ("/console/runs/bulk?action=cancel".to_owned(), Some(LEAD)),
        ("/console/dead-letters".to_owned(), Some(LEAD)),
        ("/console/schedules".to_owned(), Some(LEAD)),
        ("/console/flow".to_owned(), Some(LEAD)),
        ("/console/workers".to_owned(), Some(LEAD)),
        ("/console/static/console.js".to_owned(), None),
        (format!("/console/runs/{run}"), Some(OUTSIDER)),
    ] {
        let answer = get(addr, &path, who).await;
        let policy = header(&answer, "content-security-policy");
        for directive in [
            "frame-ancestors 'none'",
            "default-src 'self'",
            "script-src 'self'",
        ] {
            assert!(policy.contains(directive), "{path}: {policy}");
        }
        assert!(!policy.contains("unsafe-inline"), "{path}: {policy}");
        assert_eq!(header(&answer, "x-frame-options"), "DENY", "{path}");
        assert_eq!(
            header(&answer, "x-content-type-options"),
            "nosniff",
            "{path}"
        );
        assert_eq!(header(&answer, "referrer-policy"), "same-origin", "{path}");
        assert_eq!(header(&answer, "cache-control"), "no-store", "{path}");
    }
    // The pages' one stylesheet is the one the policy allows by its hash.
    let page = get(addr, "/inbox", Some(LEAD)).await;
    assert!(page.body.contains("<style>"), "{}", page.body);
    assert!(!page.body.contains("<script"), "{}", page.body);
    // The console's one script is a file of this server, never inline; and the diagram on
    // its run page carries no style element of its own for the policy to refuse.
    let run_page = get(addr, &format!("/console/runs/{run}"), Some(LEAD))
        .await
        .body;
    assert_eq!(run_page.matches("<script").count(), 1, "{run_page}");
    assert!(
        run_page.contains("<script src=\"/console/static/console.js\" defer></script>"),
        "{run_page}"
    );
    assert_eq!(run_page.matches("<style>").count(), 1, "{run_page}");
    let script = get(addr, "/console/static/console.js", None).await;
    assert!(
        header(&script, "content-type").starts_with("text/javascript"),
        "{:?}",
        script.headers
    );
    assert!(script.body.contains("EventSource"), "{}", script.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_methods_and_large_bodies_answer_json() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let nowhere = get(addr, "/api/nowhere", Some(LEAD)).await;
    assert_eq!(
        (nowhere.status, nowhere.code()),
        (StatusCode::NOT_FOUND, "not_found".to_owned())
    );
    let method = request(addr, Method::DELETE, "/api/runs", &[], Vec::new()).await;
    assert_eq!(
        (method.status, method.code()),
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed".to_owned()
        )
    );
    let huge = format!(
        r#"{{"workflow": "Triage", "input": {{"ticket": {{"ticket_id": "T", "text": "{}"}}}}}}"#,
        "x".repeat(3 << 20)
    );
    let large = request(
        addr,
        Method::POST,
        "/api/runs",
        &[
            ("content-type", "application/json".to_owned()),
            ("x-forwarded-user", LEAD.to_owned()),
        ],
        huge.into_bytes(),
    )
    .await;
    assert_eq!(
        (large.status, large.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large".to_owned())
    );
    // The media type's name is case-insensitive, in the cross-site check and the parser.
    let mixed = request(
        addr,
        Method::POST,
        "/api/runs",
        &[
            ("content-type", "Application/JSON; charset=utf-8".to_owned()),
            ("x-forwarded-user", LEAD.to_owned()),
        ],
        json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": "T-2", "text": "hi"}}})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(mixed.status, StatusCode::CREATED, "{}", mixed.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_name_one_person_once() {
    let (engine, _) = engine(false);
    let tokens = BearerTokens::new().token("s3cret", LEAD);
    let router = server(&engine, standard())
        .authenticator(tokens.or(TrustedHeader::new()))
        .router();
    let addr = serve(router).await;
    let with = |pairs: Vec<(&'static str, String)>| async move {
        request(addr, Method::GET, "/api/runs", &pairs, Vec::new()).await
    };
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let answer = with(vec![("authorization", format!("{scheme} s3cret"))]).await;
        assert_eq!(answer.status, StatusCode::OK, "{scheme}: {}", answer.body);
    }
    let twice = with(vec![
        ("authorization", "Bearer s3cret".to_owned()),
        ("authorization", "Bearer other".to_owned()),
    ])
    .await;
    assert_eq!(
        (twice.status, twice.code()),
        (
            StatusCode::BAD_REQUEST,
            "duplicate_authorization".to_owned()
        )
    );
    // What a proxy merging two header lines sends is two people, not one.
    let merged = with(vec![("x-forwarded-user", format!("{OUTSIDER}, {LEAD}"))]).await;
    assert_eq!(
        (merged.status, merged.code()),
        (StatusCode::BAD_REQUEST, "invalid_identity".to_owned())
    );
    // The trusted header still signs people in after the tokens.
    assert_eq!(
        with(vec![("x-forwarded-user", LEAD.to_owned())])
            .await
            .status,
        StatusCode::OK
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbox_with_no_tasks_is_503_when_the_policy_cannot_answer() {
    let (engine, _) = engine(false);
    let down = |_: &Caller, _: Action, _: &Target<'_>| -> Result<Verdict, PolicyError> {
        Err(PolicyError("the directory is down".into()))
    };
    let router = Server::new(engine.clone())
        .authenticator(TrustedHeader::new())
        .permissions(down)
        .router();
    let addr = serve(router).await;
    for path in ["/inbox", "/api/tasks"] {
        let answer = get(addr, path, Some(OUTSIDER)).await;
        assert_eq!(
            answer.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{path}: {}",
            answer.body
        );
        assert!(
            answer.body.contains("policy_unavailable"),
            "{path}: {}",
            answer.body
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_payloads_failure_messages_and_searches_reveal_nothing() {
    let (engine, desk) = engine(true);
    desk.broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = start(addr, "T-4111", "locked out").await;
    wait_for_task(&engine, run, "approve_alert").await;
    let decided = post_json(
        addr,
        &format!("/api/runs/{run}/tasks/approve_alert"),
        Some(LEAD),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    wait_for_status(&engine, run, RunStatus::Failed).await;
    let secret = "the alert service refused the alert";

    // The operator has `payloads` on Triage: everything shows.
    let detail = get(addr, &format!("/api/runs/{run}"), Some(OPERATOR))
        .await
        .body;
    assert!(detail.contains(secret), "{detail}");
    let letters = get(addr, "/api/dead-letters", Some(OPERATOR)).await.body;
    assert!(letters.contains(secret), "{letters}");
    let found = get(addr, "/api/runs?where=ticket_id:T-4111", Some(OPERATOR))
        .await
        .json();
    assert_eq!(found["runs"].as_array().unwrap().len(), 1, "{found}");

    // The viewer does not: the run's note, its timeline, the dead letter and the page say
    // `(redacted)` and why; a search by an input's value finds nothing.
    let detail = get(addr, &format!("/api/runs/{run}"), Some(VIEWER)).await;
    assert_eq!(detail.status, StatusCode::OK);
    assert!(!detail.body.contains(secret), "{}", detail.body);
    let json = detail.json();
    assert_eq!(json["note"], "failed: (redacted)", "{json}");
    assert!(
        json["redacted"]
            .as_str()
            .unwrap()
            .contains("`payloads` role"),
        "{json}"
    );
    let list = get(addr, "/api/runs?status=failed", Some(VIEWER))
        .await
        .body;
    assert!(
        list.contains(&run.to_string()) && !list.contains(secret),
        "{list}"
    );
    let letters = get(addr, "/api/dead-letters", Some(VIEWER)).await.json();
    assert_eq!(
        letters["dead_letters"][0]["message"], "(redacted)",
        "{letters}"
    );
    let page = get(addr, &format!("/inbox/runs/{run}"), Some(VIEWER))
        .await
        .body;
    assert!(!page.contains(secret), "{page}");
    assert!(page.contains("id=\"redacted\""), "{page}");
    let found = get(addr, "/api/runs?where=ticket_id:T-4111", Some(VIEWER))
        .await
        .json();
    assert_eq!(found["runs"], json!([]), "{found}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_answer_without_a_sign_in_and_say_nothing_else() {
    use std::sync::Arc;
    use workflow_core::store::{MemoryStore, StoreError};
    use workflow_core::testing::{FaultyStore, Write};

    let store = FaultyStore::new(Arc::new(MemoryStore::new()));
    let (engine, _) = engine_on(store.clone(), false);
    let addr = serve(server(&engine, standard()).router()).await;
    let health = get(addr, "/healthz", None).await;
    assert_eq!(
        (health.status, health.body.as_str()),
        (StatusCode::OK, "ok")
    );
    let ready = get(addr, "/readyz", None).await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (StatusCode::OK, "ready")
    );
    // The store stops answering: not ready (the process still lives), and the answer
    // names no error.
    store.fail_always(
        Write::ListRuns,
        StoreError::Io("connection refused to 10.0.0.5".into()),
    );
    let ready = get(addr, "/readyz", None).await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    );
    assert_eq!(get(addr, "/healthz", None).await.status, StatusCode::OK);
    store.heal();
    assert_eq!(get(addr, "/readyz", None).await.status, StatusCode::OK);
    // A draining engine is alive but takes no more work: not ready, and says why.
    let drained = engine.drain(std::time::Duration::from_secs(1)).await;
    assert!(drained.released);
    let ready = get(addr, "/readyz", None).await;
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "draining")
    );
    assert_eq!(get(addr, "/healthz", None).await.status, StatusCode::OK);
}

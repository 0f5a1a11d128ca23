//! The JSON API over real loopback TCP: each status and stable code it answers.

mod common;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::json;
use workflow_core::store::RunStatus;

async fn started(addr: std::net::SocketAddr, key: &str, text: &str) -> workflow_core::RunId {
    let answer = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({
            "workflow": "Triage",
            "input": { "ticket": { "ticket_id": key, "text": text } },
            "idempotency_key": key,
        }),
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.body);
    run_id(&answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_identity_the_api_is_401() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    for path in [
        "/api/runs",
        "/api/tasks",
        "/api/dead-letters",
        "/api/runs/run-1",
    ] {
        let answer = get(addr, path, None).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(answer.code(), "unauthenticated");
    }
    let answer = post_json(addr, "/api/runs", None, json!({"workflow": "Triage"})).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    // A server without an authenticator admits nobody.
    let bare = serve(workflow_server::Server::new(engine.clone()).router()).await;
    assert_eq!(
        get(bare, "/api/runs", Some(LEAD)).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_is_idempotent_and_runs_list_by_status_workflow_and_page() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let first = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": "T-1", "text": "hi"}}, "idempotency_key": "k-1"}),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let again = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": "T-1", "text": "hi"}}, "idempotency_key": "k-1"}),
    )
    .await;
    assert_eq!(
        (again.status, run_id(&again)),
        (StatusCode::OK, run_id(&first))
    );
    for n in 2..=5 {
        started(addr, &format!("k-{n}"), "hi").await;
    }
    let unknown = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Nope", "input": {}}),
    )
    .await;
    assert_eq!(
        (unknown.status, unknown.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_workflow")
    );
    let bad_input = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Triage", "input": {"ticket": 3}}),
    )
    .await;
    assert_eq!(
        (bad_input.status, bad_input.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input")
    );
    let not_json = request(
        addr,
        Method::POST,
        "/api/runs",
        &[
            ("x-forwarded-user", LEAD.into()),
            ("content-type", "application/json".into()),
        ],
        b"{".to_vec(),
    )
    .await;
    assert_eq!(not_json.code(), "invalid_json");
    assert_eq!(run_count(&engine).await, 5);

    let page = get(addr, "/api/runs?limit=2", Some(LEAD)).await.json();
    let ids: Vec<&str> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["run-5", "run-4"]);
    assert_eq!(page["next_before"], "run-4");
    let next = get(addr, "/api/runs?limit=2&before=run-4", Some(LEAD))
        .await
        .json();
    assert_eq!(next["runs"][0]["run"], "run-3");
    let running = get(addr, "/api/runs?status=running&workflow=Triage", Some(LEAD))
        .await
        .json();
    assert_eq!(running["runs"].as_array().unwrap().len(), 5);
    let none = get(addr, "/api/runs?workflow=Shipment", Some(LEAD))
        .await
        .json();
    assert_eq!(none["runs"].as_array().unwrap().len(), 0);
    let bad = get(addr, "/api/runs?status=sleeping", Some(LEAD)).await;
    assert_eq!(
        (bad.status, bad.code().as_str()),
        (StatusCode::BAD_REQUEST, "bad_request")
    );
    // Found by the spec's `search: [ticket.ticket_id]`.
    let found = get(addr, "/api/runs?where=ticket_id:k-3", Some(LEAD))
        .await
        .json();
    let found: Vec<&str> = found["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run"].as_str().unwrap())
        .collect();
    assert_eq!(found, ["run-3"]);
    let both = get(
        addr,
        "/api/runs?where=ticket_id:k-3&where=ticket_id:k-4",
        Some(LEAD),
    )
    .await
    .json();
    assert_eq!(both["runs"].as_array().unwrap().len(), 0);
    let bad = get(addr, "/api/runs?where=ticket_id", Some(LEAD)).await;
    assert_eq!(
        (bad.status, bad.code().as_str()),
        (StatusCode::BAD_REQUEST, "bad_request")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_answer_403_404_409_and_the_run_shows_its_audit() {
    let (engine, desk) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = started(addr, "T-7", "locked out").await;
    wait_for_task(&engine, run, "approve_alert").await;

    let tasks = get(addr, "/api/tasks", Some(LEAD)).await.json();
    assert_eq!(tasks["tasks"][0]["step"], "approve_alert");
    assert_eq!(tasks["tasks"][0]["run"], run.to_string());
    let none = get(addr, "/api/tasks", Some(OUTSIDER)).await.json();
    assert_eq!(none["tasks"].as_array().unwrap().len(), 0);

    let path = format!("/api/runs/{run}/tasks/approve_alert");
    // The outsider may not see the run: it does not exist for them.
    let outsider = post_json(addr, &path, Some(OUTSIDER), json!({"approved": true})).await;
    assert_eq!(
        (outsider.status, outsider.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_run")
    );
    // The operator sees it, but the engine's authorizer does not admit them.
    let operator = post_json(addr, &path, Some(OPERATOR), json!({"approved": true})).await;
    assert_eq!(
        (operator.status, operator.code().as_str()),
        (StatusCode::FORBIDDEN, "not_admitted")
    );
    let unknown_run = post_json(
        addr,
        "/api/runs/run-999/tasks/approve_alert",
        Some(LEAD),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(
        (unknown_run.status, unknown_run.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_run")
    );
    let unknown_task = post_json(
        addr,
        &format!("/api/runs/{run}/tasks/nope"),
        Some(LEAD),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(
        (unknown_task.status, unknown_task.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_task")
    );
    let wrong = post_json(addr, &path, Some(LEAD), json!({"decision": 12})).await;
    assert_eq!(
        (wrong.status, wrong.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "wrong_type")
    );
    let neither = post_json(addr, &path, Some(LEAD), json!({})).await;
    assert_eq!(neither.status, StatusCode::BAD_REQUEST);

    let ok = post_json(
        addr,
        &path,
        Some(LEAD),
        json!({"approved": true, "comment": "<script>alert(1)</script>"}),
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
    let late = post_json(
        addr,
        &path,
        Some("ana@support_leads"),
        json!({"approved": false}),
    )
    .await;
    assert_eq!(
        (late.status, late.code().as_str()),
        (StatusCode::CONFLICT, "already_decided")
    );
    wait_for_status(&engine, run, RunStatus::Completed).await;
    assert_eq!(desk.alerts.load(std::sync::atomic::Ordering::SeqCst), 1);

    let detail = get(addr, &format!("/api/runs/{run}"), Some(LEAD))
        .await
        .json();
    assert_eq!(detail["status"], "completed");
    let steps: Vec<(&str, &str, u64)> = detail["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap(),
                s["mark"].as_str().unwrap(),
                s["attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("classify", "done", 1),
            ("approve_alert", "done", 0),
            ("send_alert", "done", 1)
        ]
    );
    let actions: Vec<&str> = detail["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["started", "opened", "decided"]);
    assert!(detail["timeline"].as_array().unwrap().len() >= 6);
    // Payloads are redacted: the engine does not log them.
    assert!(detail["input"].is_null());
    assert!(!detail.to_string().contains("locked out"), "{detail}");

    let svg = get(addr, &format!("/api/runs/{run}/diagram.svg"), Some(LEAD)).await;
    assert_eq!(svg.status, StatusCode::OK);
    assert_eq!(svg.headers["content-type"], "image/svg+xml");
    assert!(
        svg.body.contains("<svg") && svg.body.contains("state-done"),
        "{}",
        svg.body
    );

    let missing = get(addr, "/api/runs/run-999", Some(LEAD)).await;
    assert_eq!(
        (missing.status, missing.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_run")
    );
    let garbage = get(addr, "/api/runs/xyz", Some(LEAD)).await;
    assert_eq!(garbage.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_cancel_and_dead_letters_go_through_the_engine() {
    let (engine, desk) = engine(true);
    let addr = serve(server(&engine, standard()).router()).await;

    // An event into a waiting run, then the same event again (taken once).
    let shipment = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Shipment", "input": {"order": "o-1"}}),
    )
    .await;
    let shipment = run_id(&shipment);
    let path = format!("/api/runs/{shipment}/events/shipped");
    let sent = post_json(
        addr,
        &path,
        Some(LEAD),
        json!({"event_id": "ship-1", "payload": "by truck"}),
    )
    .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.body);
    wait_for_status(&engine, shipment, RunStatus::Completed).await;
    let detail = get(addr, &format!("/api/runs/{shipment}"), Some(LEAD))
        .await
        .json();
    assert!(
        detail.to_string().contains("o-1: by truck"),
        "payloads shown: {detail}"
    );
    let finished = post_json(
        addr,
        &path,
        Some(LEAD),
        json!({"event_id": "ship-2", "payload": "x"}),
    )
    .await;
    assert_eq!(
        (finished.status, finished.code().as_str()),
        (StatusCode::CONFLICT, "finished")
    );
    let other = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Shipment", "input": {"order": "o-2"}}),
    )
    .await;
    let other = run_id(&other);
    let unknown = post_json(
        addr,
        &format!("/api/runs/{other}/events/nope"),
        Some(LEAD),
        json!({"event_id": "e"}),
    )
    .await;
    assert_eq!(
        (unknown.status, unknown.code().as_str()),
        (StatusCode::NOT_FOUND, "unknown_event")
    );
    let wrong = post_json(
        addr,
        &format!("/api/runs/{other}/events/shipped"),
        Some(LEAD),
        json!({"event_id": "e", "payload": 5}),
    )
    .await;
    assert_eq!(
        (wrong.status, wrong.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "wrong_type")
    );

    // Cancel, then cancel again: 409.
    let cancel = post_json(
        addr,
        &format!("/api/runs/{other}/cancel"),
        Some(LEAD),
        json!({}),
    )
    .await;
    assert_eq!(cancel.status, StatusCode::OK, "{}", cancel.body);
    wait_for_status(&engine, other, RunStatus::Cancelled).await;
    let again = post_json(
        addr,
        &format!("/api/runs/{other}/cancel"),
        Some(LEAD),
        json!({}),
    )
    .await;
    assert_eq!(
        (again.status, again.code().as_str()),
        (StatusCode::CONFLICT, "finished")
    );

    // A run whose alert fails goes to the dead letters; retried once fixed, it completes.
    desk.broken.store(true, std::sync::atomic::Ordering::SeqCst);
    let run = started(addr, "T-9", "locked out").await;
    wait_for_task(&engine, run, "approve_alert").await;
    let ok = post_json(
        addr,
        &format!("/api/runs/{run}/tasks/approve_alert"),
        Some(LEAD),
        json!({"approved": true}),
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK);
    wait_for_status(&engine, run, RunStatus::Failed).await;
    let letters = get(addr, "/api/dead-letters", Some(LEAD)).await.json();
    assert_eq!(letters["dead_letters"][0]["run"], run.to_string());
    assert_eq!(letters["dead_letters"][0]["step"], "send_alert");
    let not_failed = post_json(
        addr,
        &format!("/api/dead-letters/{shipment}/retry"),
        Some(LEAD),
        json!({}),
    )
    .await;
    assert_eq!(
        (not_failed.status, not_failed.code().as_str()),
        (StatusCode::CONFLICT, "not_failed")
    );
    desk.broken
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let retried = post_json(
        addr,
        &format!("/api/dead-letters/{run}/retry"),
        Some(LEAD),
        json!({}),
    )
    .await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.body);
    wait_for_status(&engine, run, RunStatus::Completed).await;
    let letters = get(addr, "/api/dead-letters", Some(LEAD)).await.json();
    assert_eq!(letters["dead_letters"].as_array().unwrap().len(), 0);
    let detail = get(addr, &format!("/api/runs/{run}"), Some(LEAD))
        .await
        .json();
    let actions: Vec<&str> = detail["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["started", "opened", "decided", "retried"]);
}

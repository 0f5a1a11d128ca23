//! A server over an intake-only engine: `POST /api/runs` and webhook deliveries queue runs
//! (nobody drives them, the API says they are queued) until a worker engine over the same
//! store admits and drives them.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::*;
use serde_json::json;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::Engine;

/// A worker engine over `store` with the tests' workflows registered.
fn engine_on_shared(store: &Arc<dyn Store>) -> (Engine, Desk) {
    let engine = Engine::builder().shared_store(Arc::clone(store)).build();
    let desk = Desk::default();
    engine.register::<Triage>(desk.clone()).unwrap();
    engine.register::<Shipment>(desk.clone()).unwrap();
    (engine, desk)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intake_only_server_queues_starts_for_a_worker() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let intake = Engine::builder()
        .shared_store(Arc::clone(&store))
        .intake_only()
        .build();
    let addr = serve(server(&intake, standard()).router()).await;
    let start = json!({
        "workflow": "Triage",
        "input": { "ticket": { "ticket_id": "T-1", "text": "printer on fire" } },
        "idempotency_key": "k-1",
    });

    // No worker recorded Triage's spec yet: the server knows no such workflow.
    let answer = post_json(addr, "/api/runs", Some(LEAD), start.clone()).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{}", answer.body);
    assert_eq!(answer.code(), "unknown_workflow");

    // A worker recorded the spec (and stopped): starts are queued on it.
    let (first, _) = engine_on_shared(&store);
    first.resume_all().await.unwrap();
    first.shutdown();
    let answer = post_json(addr, "/api/runs", Some(LEAD), start.clone()).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let run = run_id(&answer);
    let again = post_json(addr, "/api/runs", Some(LEAD), start).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(run_id(&again), run, "the key names the queued run");
    let wrong = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({ "workflow": "Triage", "input": { "tickets": 3 } }),
    )
    .await;
    assert_eq!(
        wrong.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        wrong.body
    );
    assert_eq!(wrong.code(), "invalid_input");

    // A verified delivery is queued too.
    let now = now_secs(&intake);
    let body = body("evt_1", "T-2", "urgent: outage");
    let headers = standard().sign("evt_1", now, &body);
    let delivered = deliver(addr, &headers, body).await;
    assert_eq!(delivered.status, StatusCode::CREATED, "{}", delivered.body);
    let hooked = run_id(&delivered);

    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for queued in [run, hooked] {
        let detail = get(addr, &format!("/api/runs/{queued}"), Some(LEAD)).await;
        assert_eq!(detail.status, StatusCode::OK, "{}", detail.body);
        assert_eq!(detail.json()["status"], "running");
        assert_eq!(detail.json()["queued"], true, "{}", detail.body);
        let stored = store.load(queued).await.unwrap().unwrap();
        assert_eq!(stored.record.owner, None);
        assert!(
            stored.is_queued(),
            "nothing but the start: {:?}",
            stored.events
        );
    }

    // A worker admits both and drives them to their human step.
    let (worker, _) = engine_on_shared(&store);
    assert_eq!(worker.resume_all().await.unwrap(), 2);
    for queued in [run, hooked] {
        wait_for_task(&worker, queued, "approve_alert").await;
        let detail = get(addr, &format!("/api/runs/{queued}"), Some(LEAD)).await;
        assert_eq!(detail.json()["queued"], false, "{}", detail.body);
        let record = store.load(queued).await.unwrap().unwrap().record;
        assert_eq!(record.owner.as_deref(), Some(worker.owner()));
        assert_eq!(record.status, RunStatus::Running);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_server_can_be_told_to_queue_its_starts() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (worker, _) = engine_on_shared(&store);
    // Registered, but not admitting (no `resume_all`, no poller): starts stay queued.
    let addr = serve(server(&worker, standard()).enqueue_starts(true).router()).await;
    let answer = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({
            "workflow": "Triage",
            "input": { "ticket": { "ticket_id": "T-9", "text": "hello" } },
        }),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let run = run_id(&answer);
    // The engine's own background task admits what it queued.
    wait_for_task(&worker, run, "approve_alert").await;
    let events = store.load(run).await.unwrap().unwrap().events;
    assert!(events.len() > 1, "begun by the worker");
}

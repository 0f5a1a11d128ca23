//! Start idempotency keys scoped per intake and workflow, conflicts on the same id with
//! other inputs, and length caps, over real loopback TCP. Every refusal journals nothing.

mod common;

use std::net::SocketAddr;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::{Engine, RunId};
use workflow_server::{Server, WebhookConfig};

/// A Standard Webhooks endpoint and a GitHub one, both starting Triage.
async fn two_intakes(engine: &Engine) -> (SocketAddr, WebhookConfig, WebhookConfig) {
    let standard = standard();
    let github = WebhookConfig::github("gh-secret").unwrap();
    let router = server(engine, standard.clone())
        .webhook::<Triage, Ticket>("/hooks/github", github.clone(), |ticket| TriageInput {
            ticket,
        })
        .router();
    (serve(router).await, standard, github)
}

async fn deliver_to(
    addr: SocketAddr,
    path: &str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
) -> Answer {
    let mut all: Vec<(&str, String)> = vec![("content-type", "application/json".into())];
    all.extend(headers);
    request(addr, Method::POST, path, &all, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sources_ids_neither_collide_with_nor_preclaim_anothers() {
    let (engine, _) = engine(false);
    let (addr, standard, github) = two_intakes(&engine).await;
    let now = now_secs(&engine);
    let body = body("x", "T-1", "fine");

    let first = deliver(addr, &standard.sign("msg_1", now, &body), body.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    // GitHub's delivery id is not signed: the same id there is another event.
    let collide = deliver_to(
        addr,
        "/hooks/github",
        github.sign("msg_1", now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(collide.status, StatusCode::CREATED, "{}", collide.body);
    assert_ne!(run_id(&collide), run_id(&first));
    // Pre-claiming a future id from GitHub does not swallow the real delivery.
    let claim = deliver_to(
        addr,
        "/hooks/github",
        github.sign("msg_2", now, &body),
        body.clone(),
    )
    .await;
    assert_eq!(claim.status, StatusCode::CREATED);
    let real = deliver(addr, &standard.sign("msg_2", now, &body), body.clone()).await;
    assert_eq!(real.status, StatusCode::CREATED, "{}", real.body);
    assert_ne!(run_id(&real), run_id(&claim));
    // And the API's keys are their own too.
    let api = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": "T-1", "text": "fine"}},
               "idempotency_key": "msg_1"}),
    )
    .await;
    assert_eq!(api.status, StatusCode::CREATED, "{}", api.body);
    assert_eq!(run_count(&engine).await, 5);
    // A redelivery on each intake still finds its own run.
    let again = deliver(addr, &standard.sign("msg_1", now, &body), body.clone()).await;
    assert_eq!(
        (again.status, run_id(&again)),
        (StatusCode::OK, run_id(&first))
    );
    let record = engine.inspect(run_id(&first)).await.unwrap().record;
    assert_eq!(
        record.idempotency_key.as_deref(),
        Some("webhook /hooks/tickets Triage msg_1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_id_with_other_inputs_is_a_conflict_naming_the_run() {
    let (engine, _) = engine(false);
    let (addr, standard, _) = two_intakes(&engine).await;
    let now = now_secs(&engine);
    let first_body = body("evt_9", "T-9", "fine");
    let first = deliver(
        addr,
        &standard.sign("evt_9", now, &first_body),
        first_body.clone(),
    )
    .await;
    assert_eq!(first.status, StatusCode::CREATED);
    let run = run_id(&first);
    let other = body("evt_9", "T-9", "actually, refund everything");
    let answer = deliver(addr, &standard.sign("evt_9", now, &other), other).await;
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (StatusCode::CONFLICT, "idempotency_conflict"),
        "{}",
        answer.body
    );
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&run.to_string()),
        "{}",
        answer.body
    );
    assert_eq!(run_count(&engine).await, 1);

    let start = |text: &str| {
        json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": "T-8", "text": text}},
               "idempotency_key": "k-8"})
    };
    let api = post_json(addr, "/api/runs", Some(LEAD), start("a")).await;
    assert_eq!(api.status, StatusCode::CREATED);
    let same = post_json(addr, "/api/runs", Some(LEAD), start("a")).await;
    assert_eq!((same.status, run_id(&same)), (StatusCode::OK, run_id(&api)));
    let conflict = post_json(addr, "/api/runs", Some(LEAD), start("b")).await;
    assert_eq!(
        (conflict.status, conflict.code().as_str()),
        (StatusCode::CONFLICT, "idempotency_conflict")
    );
    assert!(conflict.body.contains(&run_id(&api).to_string()));
    assert_eq!(run_count(&engine).await, 2);
}

async fn decisions(engine: &Engine, run: RunId) -> usize {
    engine
        .events(run)
        .await
        .unwrap()
        .iter()
        .filter(|e| matches!(e, Event::TaskDecided { .. }))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lengths_past_the_caps_are_refused_with_a_code() {
    let (engine, _) = engine(false);
    let (addr, standard, _) = two_intakes(&engine).await;
    let now = now_secs(&engine);
    // A 60 KB event id.
    let long_id = "e".repeat(60_000);
    let body_of = body("x", "T-1", "fine");
    let answer = deliver(addr, &standard.sign(&long_id, now, &body_of), body_of).await;
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (StatusCode::BAD_REQUEST, "event_id_too_long")
    );
    assert_eq!(run_count(&engine).await, 0);
    let key = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": "T", "text": "x"}},
               "idempotency_key": "k".repeat(300)}),
    )
    .await;
    assert_eq!(
        (key.status, key.code().as_str()),
        (StatusCode::BAD_REQUEST, "idempotency_key_too_long")
    );
    assert_eq!(run_count(&engine).await, 0);

    let run = engine
        .start::<Triage>(TriageInput {
            ticket: Ticket {
                ticket_id: "T-2".into(),
                text: "locked out".into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_task(&engine, run, "approve_alert").await;
    let shipment = engine
        .start::<Shipment>(ShipmentInput {
            order: "O-2".into(),
        })
        .await
        .unwrap()
        .id();
    let before = engine.events(shipment).await.unwrap().len();
    let event = post_json(
        addr,
        &format!("/api/runs/{shipment}/events/shipped"),
        Some(LEAD),
        json!({"event_id": "e".repeat(300), "payload": "x"}),
    )
    .await;
    assert_eq!(
        (event.status, event.code().as_str()),
        (StatusCode::BAD_REQUEST, "event_id_too_long")
    );
    // A 1.5 MB comment, over the API and the inbox.
    let path = format!("/api/runs/{run}/tasks/approve_alert");
    let comment = "c".repeat(1_500_000);
    let answer = post_json(
        addr,
        &path,
        Some(LEAD),
        json!({"approved": true, "comment": comment}),
    )
    .await;
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "comment_too_long")
    );
    let decision = post_json(
        addr,
        &path,
        Some(LEAD),
        json!({"decision": {"approved": true, "by": "x", "note": "n".repeat(20_000)}}),
    )
    .await;
    assert_eq!(
        (decision.status, decision.code().as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "decision_too_large")
    );
    let token =
        workflow_server::Csrf::new([42; 32]).token(&workflow_server::Identity(LEAD.to_owned()));
    let inbox = format!("/inbox/runs/{run}/tasks/approve_alert");
    for (size, code) in [(5_000, "comment_too_long"), (100_000, "body_too_large")] {
        let form = format!("csrf={token}&verdict=approve&comment={}", "c".repeat(size));
        let answer = request(
            addr,
            Method::POST,
            &inbox,
            &[
                ("x-forwarded-user", LEAD.to_owned()),
                (
                    "content-type",
                    "application/x-www-form-urlencoded".to_owned(),
                ),
            ],
            form.into_bytes(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE, "{size}");
        assert!(answer.body.contains(code), "{size}: {}", answer.body);
    }
    assert_eq!(decisions(&engine, run).await, 0);
    assert_eq!(engine.events(shipment).await.unwrap().len(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripe_event_without_an_id_is_400_missing_event_id() {
    let (engine, _) = engine(false);
    let stripe = WebhookConfig::stripe("whsec_stripe").unwrap();
    let router = Server::new(engine.clone())
        .webhook::<Triage, Ticket>("/hooks/stripe", stripe.clone(), |ticket| TriageInput {
            ticket,
        })
        .router();
    let addr = serve(router).await;
    let now = now_secs(&engine);
    for body in [
        json!({"ticket_id": "T", "text": "x"}),
        json!({"id": 7, "ticket_id": "T", "text": "x"}),
        json!({"id": "", "ticket_id": "T", "text": "x"}),
    ] {
        let body = body.to_string().into_bytes();
        let answer = deliver_to(addr, "/hooks/stripe", stripe.sign("", now, &body), body).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::BAD_REQUEST, "missing_event_id"),
            "{}",
            answer.body
        );
    }
    let body = b"not json".to_vec();
    let answer = deliver_to(addr, "/hooks/stripe", stripe.sign("", now, &body), body).await;
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_payload")
    );
    assert_eq!(run_count(&engine).await, 0);
}

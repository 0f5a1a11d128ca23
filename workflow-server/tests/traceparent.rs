//! A start through the API or a webhook continues the caller's trace: a valid W3C
//! `traceparent` header is journaled with the run (its trace id and parent span), shown by
//! the run's detail and page as it is; an invalid one is ignored, not refused, and the run
//! starts a trace of its own.

mod common;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::RunId;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN: &str = "00f067aa0ba902b7";

async fn journaled(engine: &workflow_core::Engine, run: RunId) -> (String, Option<String>) {
    let events = engine.events(run).await.unwrap();
    match events.first() {
        Some(Event::RunStarted {
            trace_id,
            parent_span,
            ..
        }) => (trace_id.clone(), parent_span.clone()),
        other => panic!("the journal starts with {other:?}"),
    }
}

async fn api_start(addr: std::net::SocketAddr, key: &str, traceparent: Option<&str>) -> RunId {
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("x-forwarded-user", LEAD.to_owned()),
    ];
    if let Some(value) = traceparent {
        headers.push(("traceparent", value.to_owned()));
    }
    let body = json!({
        "workflow": "Triage",
        "input": { "ticket": { "ticket_id": key, "text": "hi" } },
        "idempotency_key": key,
    });
    let answer = request(
        addr,
        Method::POST,
        "/api/runs",
        &headers,
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    run_id(&answer)
}

fn is_trace_id(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_start_continues_a_valid_traceparent_and_ignores_an_invalid_one() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;

    let header = format!("00-{TRACE}-{SPAN}-01");
    let traced = api_start(addr, "k-1", Some(&header)).await;
    assert_eq!(
        journaled(&engine, traced).await,
        (TRACE.to_owned(), Some(SPAN.to_owned()))
    );
    // The run's detail and page print the trace id as it is.
    let detail = get(addr, &format!("/api/runs/{traced}"), Some(LEAD)).await;
    assert_eq!(detail.json()["trace_id"], TRACE, "{}", detail.body);
    let page = get(addr, &format!("/inbox/runs/{traced}"), Some(LEAD)).await;
    assert!(
        page.body
            .contains(&format!("<code id=\"trace\">{TRACE}</code>")),
        "{}",
        page.body
    );

    for (n, invalid) in [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "not a traceparent",
    ]
    .into_iter()
    .enumerate()
    {
        let run = api_start(addr, &format!("bad-{n}"), Some(invalid)).await;
        let (trace, parent) = journaled(&engine, run).await;
        assert!(is_trace_id(&trace), "{trace}");
        assert_ne!(trace, TRACE);
        assert_eq!(parent, None, "{invalid}");
    }
    let plain = api_start(addr, "plain", None).await;
    let (trace, parent) = journaled(&engine, plain).await;
    assert!(is_trace_id(&trace) && parent.is_none(), "{trace}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_start_continues_the_deliverys_traceparent() {
    let (engine, _) = engine(false);
    let config = standard();
    let addr = serve(server(&engine, config.clone()).router()).await;

    let body = body("evt_1", "T-1", "hi");
    let mut headers = config.sign("evt_1", now_secs(&engine), &body);
    headers.push(("traceparent", format!("00-{TRACE}-{SPAN}-01")));
    let answer = deliver(addr, &headers, body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    assert_eq!(
        journaled(&engine, run_id(&answer)).await,
        (TRACE.to_owned(), Some(SPAN.to_owned()))
    );

    let body = self::body("evt_2", "T-2", "hi");
    let mut headers = config.sign("evt_2", now_secs(&engine), &body);
    headers.push(("traceparent", "00-zz-yy-01".to_owned()));
    let answer = deliver(addr, &headers, body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let (trace, parent) = journaled(&engine, run_id(&answer)).await;
    assert!(is_trace_id(&trace) && parent.is_none(), "{trace}");
}

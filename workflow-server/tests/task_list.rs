//! Task lists from the store's open-task index: `GET /api/tasks` pages the caller's tasks
//! soonest deadline first with a cursor, and the inbox counts and pages the same tasks.

mod common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_tasks_are_paged_from_the_index_with_a_cursor() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let mut runs = Vec::new();
    for n in 0..3 {
        let answer = post_json(
            addr,
            "/api/runs",
            Some(LEAD),
            json!({
                "workflow": "Triage",
                "input": { "ticket": { "ticket_id": format!("T-{n}"), "text": "locked out" } },
                "idempotency_key": format!("T-{n}"),
            }),
        )
        .await;
        assert!(answer.status.is_success(), "{}", answer.body);
        let run = run_id(&answer);
        wait_for_task(&engine, run, "approve_alert").await;
        runs.push(run.to_string());
    }

    let first = get(addr, "/api/tasks?limit=2", Some(LEAD)).await.json();
    assert_eq!(first["total"], 3);
    let page: Vec<&str> = first["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["run"].as_str().unwrap())
        .collect();
    assert_eq!(
        page,
        [runs[0].as_str(), runs[1].as_str()],
        "soonest deadline first"
    );
    let next = first["next"].as_str().expect("a cursor to the next page");
    let second = get(
        addr,
        &format!("/api/tasks?limit=2&after={next}"),
        Some(LEAD),
    )
    .await
    .json();
    assert_eq!(second["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(second["tasks"][0]["run"], runs[2]);
    assert_eq!(second["tasks"][0]["step"], "approve_alert");
    assert!(second["next"].is_null());

    let other = get(addr, "/api/tasks?workflow=Shipment", Some(LEAD))
        .await
        .json();
    assert_eq!(other["total"], 0);
    let outsider = get(addr, "/api/tasks", Some(OUTSIDER)).await.json();
    assert_eq!(
        (outsider["total"].clone(), outsider["next"].clone()),
        (json!(0), json!(null))
    );
    assert_eq!(outsider["tasks"].as_array().unwrap().len(), 0);
    let bad = get(addr, "/api/tasks?after=soon", Some(LEAD)).await;
    assert_eq!(
        (bad.status, bad.code().as_str()),
        (StatusCode::BAD_REQUEST, "bad_request")
    );

    // The inbox counts the same tasks; deciding one takes it off both.
    let inbox = get(addr, "/inbox", Some(LEAD)).await;
    assert!(inbox.body.contains("3 open tasks"), "{}", inbox.body);
    let decided = post_json(
        addr,
        &format!("/api/runs/{}/tasks/approve_alert", runs[1]),
        Some(LEAD),
        json!({"approved": false}),
    )
    .await;
    assert!(decided.status.is_success(), "{}", decided.body);
    let after = get(addr, "/api/tasks", Some(LEAD)).await.json();
    assert_eq!(after["total"], 2);
    let inbox = get(addr, "/inbox", Some(LEAD)).await;
    assert!(inbox.body.contains("2 open tasks"), "{}", inbox.body);
}

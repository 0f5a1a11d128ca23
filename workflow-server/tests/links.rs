//! Signed single-use decision links over real loopback TCP: a link decides its task once,
//! as its identity, and every other use is refused with its code, nothing journaled.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::store::{RunStatus, Store};
use workflow_core::{Engine, RunId};
use workflow_server::{DecisionLink, DecisionLinks, LinkVerdict};
use workflow_sqlite::SqliteStore;

const KEY: [u8; 32] = [9; 32];

async fn started(addr: SocketAddr, key: &str) -> RunId {
    let answer = post_json(
        addr,
        "/api/runs",
        Some(LEAD),
        json!({
            "workflow": "Triage",
            "input": { "ticket": { "ticket_id": key, "text": "locked out" } },
            "idempotency_key": key,
        }),
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.body);
    run_id(&answer)
}

fn link(engine: &Engine, run: RunId, by: &str, verdict: LinkVerdict) -> DecisionLink {
    DecisionLink {
        run,
        step: "approve_alert".to_owned(),
        by: by.to_owned(),
        verdict,
        expires_at: engine.now() + 3_600_000,
    }
}

fn path(token: &str) -> String {
    format!("/links/{token}")
}

async fn post_link(addr: SocketAddr, token: &str, form: &str) -> Answer {
    request(
        addr,
        Method::POST,
        &path(token),
        &[(
            "content-type",
            "application/x-www-form-urlencoded".to_owned(),
        )],
        form.as_bytes().to_vec(),
    )
    .await
}

fn refused(answer: &Answer, status: StatusCode, code: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    assert!(answer.body.contains(code), "no `{code}` in {}", answer.body);
}

async fn decisions(engine: &Engine, run: RunId) -> Vec<String> {
    let stored = engine.store().load(run).await.unwrap().unwrap();
    stored
        .events
        .iter()
        .filter_map(|event| match event {
            Event::TaskDecided { by, .. } => Some(by.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_decides_its_task_once_as_its_identity() {
    let (engine, desk) = engine(false);
    let links = DecisionLinks::new(KEY);
    let addr = serve(
        server(&engine, standard())
            .decision_links(links.clone())
            .router(),
    )
    .await;
    let run = started(addr, "T-1").await;
    wait_for_task(&engine, run, "approve_alert").await;
    let url = links.url(
        &format!("http://{addr}"),
        &link(&engine, run, LEAD, LinkVerdict::Approve),
    );
    let token = url.rsplit('/').next().unwrap().to_owned();

    // Opening the link (as a mail scanner would) shows the task and decides nothing.
    let page = get(addr, &path(&token), None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(LEAD) && page.body.contains("value=\"approve\""));
    assert!(!page.body.contains("value=\"reject\""));
    assert!(decisions(&engine, run).await.is_empty());

    let decided = post_link(addr, &token, "comment=from+my+phone").await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    assert!(decided.body.contains("Approved task"), "{}", decided.body);
    wait_for_status(&engine, run, RunStatus::Completed).await;
    assert_eq!(decisions(&engine, run).await, [LEAD]);
    assert_eq!(desk.alerts.load(std::sync::atomic::Ordering::SeqCst), 1);
    let stored = engine.store().load(run).await.unwrap().unwrap();
    let comment = stored.events.iter().find_map(|event| match event {
        Event::TaskDecided { decision, .. } => decision["comment"].as_str().map(str::to_owned),
        _ => None,
    });
    assert_eq!(comment.as_deref(), Some("from my phone"));

    // Used: refused here, and by another server (a restart, another replica) with the
    // same key on the same store.
    refused(
        &post_link(addr, &token, "").await,
        StatusCode::CONFLICT,
        "link_used",
    );
    refused(
        &get(addr, &path(&token), None).await,
        StatusCode::CONFLICT,
        "link_used",
    );
    let other = serve(
        workflow_server::Server::new(engine.clone())
            .decision_links(DecisionLinks::new(KEY))
            .router(),
    )
    .await;
    refused(
        &post_link(other, &token, "").await,
        StatusCode::CONFLICT,
        "link_used",
    );
    assert_eq!(decisions(&engine, run).await, [LEAD]);
}

/// How each decision of `run` was made, as journaled.
async fn vias(engine: &Engine, run: RunId) -> Vec<Option<String>> {
    let stored = engine.store().load(run).await.unwrap().unwrap();
    stored
        .events
        .iter()
        .filter_map(|event| match event {
            Event::TaskDecided { via, .. } => Some(via.clone()),
            _ => None,
        })
        .collect()
}

fn token_of(url: &str) -> String {
    url.rsplit('/').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_decision_is_journaled_via_link_and_an_api_decision_is_not() {
    let (engine, _) = engine(false);
    let links = DecisionLinks::new(KEY);
    let addr = serve(
        server(&engine, standard())
            .decision_links(links.clone())
            .router(),
    )
    .await;
    let by_link = started(addr, "T-via-1").await;
    let by_api = started(addr, "T-via-2").await;
    wait_for_task(&engine, by_link, "approve_alert").await;
    wait_for_task(&engine, by_api, "approve_alert").await;

    let url = links.url(
        &format!("http://{addr}"),
        &link(&engine, by_link, LEAD, LinkVerdict::Approve),
    );
    let decided = post_link(addr, &token_of(&url), "").await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    let answer = post_json(
        addr,
        &format!("/api/runs/{by_api}/tasks/approve_alert"),
        Some(LEAD),
        json!({ "approved": true }),
    )
    .await;
    assert!(answer.status.is_success(), "{}", answer.body);
    wait_for_status(&engine, by_link, RunStatus::Completed).await;
    wait_for_status(&engine, by_api, RunStatus::Completed).await;
    assert_eq!(vias(&engine, by_link).await, [Some("link".to_owned())]);
    assert_eq!(vias(&engine, by_api).await, [None]);

    // Shown where the decider is: the run page and the run's audit trail in the API.
    let page = get(addr, &format!("/inbox/runs/{by_link}"), Some(LEAD)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(
        page.body.contains(&format!("{LEAD} via link")),
        "{}",
        page.body
    );
    let page = get(addr, &format!("/inbox/runs/{by_api}"), Some(LEAD)).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains("via link"), "{}", page.body);
    let detail = get(addr, &format!("/api/runs/{by_link}"), Some(LEAD))
        .await
        .json();
    let decided = detail["audit"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["action"] == "decided")
        .cloned()
        .unwrap();
    assert_eq!(decided["who"], LEAD);
    assert_eq!(decided["via"], "link");
    let detail = get(addr, &format!("/api/runs/{by_api}"), Some(LEAD))
        .await
        .json();
    assert!(detail["audit"]
        .as_array()
        .unwrap()
        .iter()
        .all(|entry| entry.get("via").is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_decision_for_a_run_another_engine_drives_is_journaled_via_link() {
    // The server's engine drives nothing: the decision goes through the run's inbox (in
    // a store other processes share) to the worker that drives it, whose machine
    // journals it.
    let dir = std::env::temp_dir().join(format!("wf-server-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runs.db");
    let _ = std::fs::remove_file(&path);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    let worker = Engine::builder().shared_store(Arc::clone(&store)).build();
    worker.register::<Triage>(Desk::default()).unwrap();
    let front = Engine::builder()
        .shared_store(Arc::clone(&store))
        .intake_only()
        .build();
    let worker_addr = serve(server(&worker, standard()).router()).await;
    let links = DecisionLinks::new(KEY);
    let addr = serve(
        server(&front, standard())
            .decision_links(links.clone())
            .router(),
    )
    .await;
    let run = started(worker_addr, "T-via-3").await;
    wait_for_task(&worker, run, "approve_alert").await;
    let url = links.url(
        &format!("http://{addr}"),
        &link(&front, run, LEAD, LinkVerdict::Approve),
    );
    let decided = post_link(addr, &token_of(&url), "").await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
    wait_for_status(&worker, run, RunStatus::Completed).await;
    let stored = store.load(run).await.unwrap().unwrap();
    let journaled = stored.events.iter().find_map(|event| match event {
        Event::TaskDecided { by, via, inbox, .. } => {
            Some((by.clone(), via.clone(), inbox.is_some()))
        }
        _ => None,
    });
    assert_eq!(
        journaled,
        Some((LEAD.to_owned(), Some("link".to_owned()), true)),
        "taken in from the inbox, marked via link"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_expired_foreign_and_late_links_are_refused_with_their_codes() {
    let (engine, _) = engine(false);
    let links = DecisionLinks::new(KEY);
    let addr = serve(
        server(&engine, standard())
            .decision_links(links.clone())
            .router(),
    )
    .await;
    let run = started(addr, "T-2").await;
    wait_for_task(&engine, run, "approve_alert").await;
    let good = links.token(&link(&engine, run, LEAD, LinkVerdict::Choose));

    refused(
        &post_link(addr, "not-a-link", "verdict=approve").await,
        StatusCode::BAD_REQUEST,
        "link_malformed",
    );
    // Another identity spliced into a signed link: the signature no longer matches.
    let (_, signature) = good.split_once('.').unwrap();
    let tampered = link(&engine, run, APPROVER, LinkVerdict::Choose);
    let spliced = format!(
        "{}.{signature}",
        links.token(&tampered).split_once('.').unwrap().0
    );
    // A link made under another key.
    let forged = DecisionLinks::new([1; 32]).token(&link(&engine, run, LEAD, LinkVerdict::Choose));
    for token in [spliced, forged] {
        refused(
            &post_link(addr, &token, "verdict=approve").await,
            StatusCode::FORBIDDEN,
            "link_invalid",
        );
    }
    let mut old = link(&engine, run, LEAD, LinkVerdict::Approve);
    old.expires_at = engine.now() - 1;
    refused(
        &post_link(addr, &links.token(&old), "").await,
        StatusCode::GONE,
        "link_expired",
    );
    // A reject-only link cannot approve; an identity the authorizer does not admit
    // cannot decide.
    let reject = links.token(&link(&engine, run, LEAD, LinkVerdict::Reject));
    refused(
        &post_link(addr, &reject, "verdict=approve").await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    );
    let outsider = links.token(&link(&engine, run, OUTSIDER, LinkVerdict::Approve));
    refused(
        &post_link(addr, &outsider, "").await,
        StatusCode::FORBIDDEN,
        "not_admitted",
    );
    assert!(
        decisions(&engine, run).await.is_empty(),
        "nothing journaled"
    );

    // Someone else decides: the task is closed for every other link.
    let api = post_json(
        addr,
        &format!("/api/runs/{run}/tasks/approve_alert"),
        Some(APPROVER),
        json!({"approved": false}),
    )
    .await;
    assert!(api.status.is_success(), "{}", api.body);
    refused(
        &post_link(addr, &good, "verdict=approve").await,
        StatusCode::CONFLICT,
        "task_closed",
    );
    assert_eq!(decisions(&engine, run).await, [APPROVER]);

    // A server without a link key serves no links.
    let plain = serve(server(&engine, standard()).router()).await;
    refused(
        &get(plain, &path(&good), None).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

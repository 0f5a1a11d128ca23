//! Approvals with a quorum over HTTP: the initiator from the caller, typed refusals with
//! their codes, delegation, the title and shown values of `GET /api/tasks` and the inbox,
//! and a decision form rendered as inputs and checked field by field.

mod common;

use axum::http::{Method, StatusCode};
use common::{get, post_json, request, serve, wait_for_task, Answer};
use serde::{Deserialize, Serialize};
use serde_json::json;
use workflow_core::prelude::*;
use workflow_core::store::MemoryStore;
use workflow_server::{
    Csrf, DecisionLink, DecisionLinks, Identity, LinkVerdict, Roles, Server, TrustedHeader,
};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Refund {
    amount_cents: u64,
    customer: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, DecisionForm)]
pub enum Reason {
    Damaged,
    Late,
}

#[derive(Clone, Debug, Serialize, Deserialize, DecisionForm)]
pub struct Settlement {
    approved: bool,
    amount_cents: u32,
    reason: Reason,
    note: Option<String>,
}

workflow! {
    pub workflow Refunds(refund: Refund) {
        human approve -> Approval {
            assignee: "finance",
            approvals: 2,
            self_approval: false,
            title: "Refund {refund.amount_cents} for {refund.customer}",
            show: [refund.amount_cents, refund.customer],
            timeout: 24h,
            on_timeout: reject,
        }
        human settle -> Settlement {
            assignee: "finance",
            depends_on: [approve],
            timeout: 24h,
            on_timeout: abort,
        }
    }
}

const ANA: &str = "ana@finance";
const BOB: &str = "bob@finance";
const CY: &str = "cy@finance";
const LEE: &str = "lee@legal";
const DEE: &str = "dee@finance";
const LINK_KEY: [u8; 32] = [9; 32];

async fn started() -> (Engine, std::net::SocketAddr, workflow_core::RunId) {
    let engine = Engine::builder().store(MemoryStore::new()).build();
    engine.register::<Refunds>(()).unwrap();
    let roles = Roles::parse(&format!("{ANA} operator:Refunds payloads:Refunds")).unwrap();
    let router = Server::new(engine.clone())
        .authenticator(TrustedHeader::new())
        .permissions(roles)
        .show_payloads(true)
        .csrf_key([42; 32])
        .decision_links(DecisionLinks::new(LINK_KEY))
        .router();
    let addr = serve(router).await;
    let answer = post_json(
        addr,
        "/api/runs",
        Some(ANA),
        json!({"workflow": "Refunds", "input": {"refund": {"amount_cents": 4200, "customer": "Ada"}}}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let run = common::run_id(&answer);
    wait_for_task(&engine, run, "approve").await;
    (engine, addr, run)
}

fn status(answer: &Answer) -> (StatusCode, String) {
    (answer.status, answer.code())
}

async fn post_form(
    addr: std::net::SocketAddr,
    path: &str,
    who: &str,
    pairs: &[(&str, &str)],
) -> Answer {
    let body = pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    request(
        addr,
        Method::POST,
        path,
        &[
            ("x-forwarded-user", who.to_owned()),
            (
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            ),
        ],
        body.into_bytes(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_over_the_api_refuses_the_initiator_and_a_second_approval() {
    let (engine, addr, run) = started().await;
    let path = format!("/api/runs/{run}/tasks/approve");
    let own = post_json(addr, &path, Some(ANA), json!({"approved": true})).await;
    assert_eq!(
        status(&own),
        (StatusCode::FORBIDDEN, "self_approval".into()),
        "{}",
        own.body
    );
    let first = post_json(addr, &path, Some(BOB), json!({"approved": true})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let again = post_json(addr, &path, Some(BOB), json!({"approved": true})).await;
    assert_eq!(
        status(&again),
        (StatusCode::CONFLICT, "already_approved".into())
    );

    let tasks = get(addr, "/api/tasks", Some(CY)).await.json();
    let task = &tasks["tasks"][0];
    assert_eq!(task["title"], "Refund 4200 for Ada");
    assert_eq!(
        task["shown"],
        json!([
            {"path": "refund.amount_cents", "value": 4200},
            {"path": "refund.customer", "value": "Ada"}
        ])
    );
    assert_eq!(task["approvals"], 2);
    assert_eq!(task["approved_by"], json!([BOB]));

    let inbox = get(addr, "/inbox", Some(CY)).await;
    assert!(inbox.body.contains("Refund 4200 for Ada"), "{}", inbox.body);
    assert!(
        inbox.body.contains("1 of 2 (by bob@finance)"),
        "{}",
        inbox.body
    );

    let second = post_json(addr, &path, Some(CY), json!({"approved": true})).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    wait_for_task(&engine, run, "settle").await;
    let detail = get(addr, &format!("/api/runs/{run}"), Some(ANA)).await.body;
    assert!(
        detail.contains("\"approved\""),
        "the audit lists each approval: {detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_delegated_over_the_api_and_the_delegate_decides_it() {
    let (_engine, addr, run) = started().await;
    let delegate = format!("/api/runs/{run}/tasks/approve/delegate");
    let outsider = post_json(addr, &delegate, Some(LEE), json!({"to": DEE})).await;
    assert_eq!(
        status(&outsider),
        (StatusCode::NOT_FOUND, "unknown_run".into())
    );
    let nobody = post_json(addr, &delegate, Some(BOB), json!({"to": " "})).await;
    assert_eq!(
        status(&nobody),
        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_delegate".into())
    );
    let own = post_json(addr, &delegate, Some(ANA), json!({"to": DEE})).await;
    assert_eq!(
        status(&own),
        (StatusCode::FORBIDDEN, "self_approval".into())
    );
    let handed = post_json(addr, &delegate, Some(BOB), json!({"to": DEE})).await;
    assert_eq!(handed.status, StatusCode::OK, "{}", handed.body);
    assert_eq!(handed.json()["to"], DEE);

    let path = format!("/api/runs/{run}/tasks/approve");
    let former = post_json(addr, &path, Some(CY), json!({"approved": true})).await;
    assert_eq!(status(&former).0, StatusCode::FORBIDDEN, "{}", former.body);
    let tasks = get(addr, "/api/tasks", Some(DEE)).await.json();
    assert_eq!(tasks["tasks"][0]["assignee"], DEE, "{tasks}");
    // The delegate sees the run of the task handed to them, on every route.
    for route in [
        format!("/api/runs/{run}"),
        format!("/api/runs/{run}/diagram.svg"),
        format!("/inbox/runs/{run}"),
    ] {
        let seen = get(addr, &route, Some(DEE)).await;
        assert_eq!(seen.status, StatusCode::OK, "{route}: {}", seen.body);
    }
    let decided = post_json(addr, &path, Some(DEE), json!({"approved": false})).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_keeps_four_eyes_over_http() {
    let (engine, addr, run) = started().await;
    let path = format!("/api/runs/{run}/tasks/approve");
    let delegate = format!("{path}/delegate");
    let first = post_json(addr, &path, Some(BOB), json!({"approved": true})).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    // One approver and a name he chose would complete the quorum: refused.
    let cases = [
        (BOB, CY, StatusCode::FORBIDDEN, "approver_may_not_delegate"),
        (
            CY,
            BOB,
            StatusCode::UNPROCESSABLE_ENTITY,
            "delegate_approved",
        ),
        (
            CY,
            ANA,
            StatusCode::UNPROCESSABLE_ENTITY,
            "delegate_is_initiator",
        ),
        (
            CY,
            LEE,
            StatusCode::UNPROCESSABLE_ENTITY,
            "delegate_not_admitted",
        ),
        (
            CY,
            "legal",
            StatusCode::UNPROCESSABLE_ENTITY,
            "delegate_not_admitted",
        ),
    ];
    for (by, to, code_status, code) in cases {
        let answer = post_json(addr, &delegate, Some(by), json!({"to": to})).await;
        assert_eq!(
            status(&answer),
            (code_status, code.into()),
            "{by} → {to}: {}",
            answer.body
        );
    }
    let events = engine.events(run).await.unwrap();
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, workflow_core::journal::Event::TaskDelegated { .. })),
        "nothing was handed on"
    );
    // The inbox shows those who may not act why, with no buttons: the approver, and the
    // initiator of a `self_approval: false` step.
    for (who, why) in [
        (BOB, "You approved this already"),
        (ANA, "You started this run"),
    ] {
        let page = get(addr, "/inbox", Some(who)).await.body;
        assert!(page.contains(why), "{who}: {page}");
        assert!(!page.contains("value=\"approve\""), "{who}: {page}");
        assert!(!page.contains("name=\"to\""), "{who}: {page}");
    }
    let page = get(addr, "/inbox", Some(CY)).await.body;
    assert!(page.contains("value=\"approve\""), "{page}");
    // A member who has not approved may still hand it on, to another member.
    let handed = post_json(addr, &delegate, Some(CY), json!({"to": DEE})).await;
    assert_eq!(handed.status, StatusCode::OK, "{}", handed.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_asks_once_and_each_action_has_its_own_form() {
    let (engine, addr, run) = started().await;
    let page = get(addr, "/inbox", Some(BOB)).await.body;
    // Two forms per card: the decision, and the delegation (with its own verdict).
    let card = &page[page.find("class=\"task\"").expect("a card")..];
    assert_eq!(card.matches("<form method=\"post\"").count(), 2, "{card}");
    let delegate_form = &card[card.find("class=\"delegate\"").expect("delegate form")..];
    assert!(delegate_form.contains("name=\"verdict\" value=\"delegate\""));
    assert!(page.contains("class=\"reject\">Reject"), "{page}");
    let csrf = Csrf::new([42; 32]).token(&Identity(BOB.to_owned()));
    let form = format!("/inbox/runs/{run}/tasks/approve");
    let asked = post_form(
        addr,
        &form,
        BOB,
        &[
            ("csrf", &csrf),
            ("confirm", "ask"),
            ("verdict", "approve"),
            ("comment", "fine"),
        ],
    )
    .await;
    assert_eq!(asked.status, StatusCode::OK, "{}", asked.body);
    assert!(
        asked
            .body
            .contains("<title>Approve refund 4200 for Ada?</title>"),
        "{}",
        asked.body
    );
    assert!(asked.body.contains("1 of 2") || asked.body.contains("0 of 2"));
    assert!(!asked.body.contains("name=\"confirm\""), "{}", asked.body);
    assert!(
        !engine
            .events(run)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(e, workflow_core::journal::Event::TaskApproved { .. })),
        "asking records nothing"
    );
    let answered = post_form(
        addr,
        &form,
        BOB,
        &[("csrf", &csrf), ("verdict", "approve"), ("comment", "fine")],
    )
    .await;
    assert_eq!(answered.status, StatusCode::SEE_OTHER, "{}", answered.body);
    let handed = post_form(
        addr,
        &form,
        CY,
        &[
            ("csrf", &Csrf::new([42; 32]).token(&Identity(CY.to_owned()))),
            ("confirm", "ask"),
            ("verdict", "delegate"),
            ("to", DEE),
        ],
    )
    .await;
    assert!(
        handed.body.contains(&format!(
            "<title>Hand refund 4200 for Ada to {DEE}?</title>"
        )),
        "{}",
        handed.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_form_is_rendered_as_inputs_and_checked_field_by_field() {
    let (engine, addr, run) = started().await;
    let path = format!("/api/runs/{run}/tasks/approve");
    for who in [BOB, CY] {
        let answer = post_json(addr, &path, Some(who), json!({"approved": true})).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    wait_for_task(&engine, run, "settle").await;
    let page = get(addr, "/inbox", Some(BOB)).await.body;
    for input in [
        "name=\"field.amount_cents\" min=\"0\" max=\"4294967295\"",
        "<select name=\"field.reason\" required><option value=\"Damaged\">",
        "type=\"checkbox\" name=\"field.approved\"",
        "<input name=\"field.note\">",
    ] {
        assert!(page.contains(input), "{input} in {page}");
    }
    let settle = format!("/api/runs/{run}/tasks/settle");
    let wrong = post_json(
        addr,
        &settle,
        Some(BOB),
        json!({"decision": {"approved": true, "amount_cents": -5, "reason": "Late"}}),
    )
    .await;
    assert_eq!(
        status(&wrong),
        (StatusCode::UNPROCESSABLE_ENTITY, "wrong_type".into())
    );
    assert!(wrong.body.contains("amount_cents"), "{}", wrong.body);

    let csrf = Csrf::new([42; 32]).token(&Identity(BOB.to_owned()));
    let form = format!("/inbox/runs/{run}/tasks/settle");
    let bad = post_form(
        addr,
        &form,
        BOB,
        &[
            ("csrf", &csrf),
            ("verdict", "form"),
            ("field.amount_cents", "lots"),
            ("field.reason", "Late"),
        ],
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    assert!(bad.body.contains("amount_cents"), "{}", bad.body);
    let good = post_form(
        addr,
        &form,
        BOB,
        &[
            ("csrf", &csrf),
            ("verdict", "form"),
            ("field.approved", "true"),
            ("field.amount_cents", "4000"),
            ("field.reason", "Damaged"),
            ("field.note", ""),
        ],
    )
    .await;
    assert_eq!(good.status, StatusCode::SEE_OTHER, "{}", good.body);
    let events = engine.events(run).await.unwrap();
    let decided = events.iter().rev().find_map(|event| match event {
        workflow_core::journal::Event::TaskDecided { decision, .. } => Some(decision.clone()),
        _ => None,
    });
    assert_eq!(
        decided,
        Some(json!({"approved": true, "amount_cents": 4000, "reason": "Damaged", "note": null})),
        "the journal keeps the typed value"
    );
}

/// One request of the refusal matrix: a route, given the run, the step and whether its
/// body (or form) is malformed.
type Route = fn(&str, &str, bool) -> (Method, String, Vec<(&'static str, String)>, Vec<u8>);

fn json_body(value: serde_json::Value) -> (Vec<(&'static str, String)>, Vec<u8>) {
    (
        vec![("content-type", "application/json".to_owned())],
        value.to_string().into_bytes(),
    )
}

const ROUTES: [(&str, Route); 9] = [
    ("run", |run, _, _| {
        (Method::GET, format!("/api/runs/{run}"), vec![], vec![])
    }),
    ("diagram", |run, _, _| {
        (
            Method::GET,
            format!("/api/runs/{run}/diagram.svg"),
            vec![],
            vec![],
        )
    }),
    ("cancel", |run, _, bad| {
        let (headers, body) = json_body(if bad { json!([1]) } else { json!({}) });
        (
            Method::POST,
            format!("/api/runs/{run}/cancel"),
            headers,
            body,
        )
    }),
    ("event", |run, step, bad| {
        let body = if bad {
            json!({"event_id": 5})
        } else {
            json!({"event_id": "e1", "payload": {}})
        };
        let (headers, body) = json_body(body);
        (
            Method::POST,
            format!("/api/runs/{run}/events/{step}"),
            headers,
            body,
        )
    }),
    ("decide", |run, step, bad| {
        let body = if bad {
            json!({"decision": {"amount_cents": "lots"}, "approved": true})
        } else {
            json!({"approved": true})
        };
        let (headers, body) = json_body(body);
        (
            Method::POST,
            format!("/api/runs/{run}/tasks/{step}"),
            headers,
            body,
        )
    }),
    ("delegate", |run, step, bad| {
        let (headers, body) = json_body(json!({"to": if bad { "" } else { DEE }}));
        (
            Method::POST,
            format!("/api/runs/{run}/tasks/{step}/delegate"),
            headers,
            body,
        )
    }),
    ("retry", |run, _, _| {
        let (headers, body) = json_body(json!({}));
        (
            Method::POST,
            format!("/api/dead-letters/{run}/retry"),
            headers,
            body,
        )
    }),
    ("run page", |run, _, _| {
        (Method::GET, format!("/inbox/runs/{run}"), vec![], vec![])
    }),
    ("inbox decision", |run, step, bad| {
        let fields = if bad {
            "verdict=form&field.amount_cents=lots"
        } else {
            "verdict=approve"
        };
        (
            Method::POST,
            format!("/inbox/runs/{run}/tasks/{step}"),
            vec![(
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            )],
            format!("{fields}&csrf=CSRF").into_bytes(),
        )
    }),
];

/// `route` as `who` would send it (the form's CSRF token theirs).
async fn ask(
    addr: std::net::SocketAddr,
    route: Route,
    who: &str,
    run: &str,
    step: &str,
    bad: bool,
) -> Answer {
    let (method, path, mut headers, body) = route(run, step, bad);
    headers.push(("x-forwarded-user", who.to_owned()));
    let csrf = Csrf::new([42; 32]).token(&Identity(who.to_owned()));
    let body = String::from_utf8(body).unwrap().replace("CSRF", &csrf);
    request(addr, method, &path, &headers, body.into_bytes()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_a_hidden_run_exactly_as_a_missing_one() {
    let (engine, addr, run) = started().await;
    let hidden = run.to_string();
    let missing = workflow_core::RunId(run.0 + 1000).to_string();
    for (name, route) in ROUTES {
        for step in ["approve", "settle", "nope"] {
            for bad in [false, true] {
                let case = format!("{name} step={step} bad={bad}");
                let seen = ask(addr, route, LEE, &hidden, step, bad).await;
                let absent = ask(addr, route, LEE, &missing, step, bad).await;
                assert_eq!(seen.status, StatusCode::NOT_FOUND, "{case}: {}", seen.body);
                assert_eq!(
                    (seen.status, seen.body.replace(&hidden, "RUN")),
                    (absent.status, absent.body.replace(&missing, "RUN")),
                    "{case}"
                );
                assert!(seen.body.contains("unknown_run"), "{case}: {}", seen.body);
                // Someone who may see the run gets the step's or the form's own answer.
                if bad || step == "nope" {
                    let visible = ask(addr, route, BOB, &hidden, step, bad).await;
                    let refusal = visible.status.is_client_error();
                    assert!(
                        !visible.body.contains("unknown_run"),
                        "{case}: {}",
                        visible.body
                    );
                    if name != "run" && name != "diagram" && name != "run page" {
                        assert!(refusal, "{case}: {} {}", visible.status, visible.body);
                    }
                }
            }
        }
    }
    let events = engine.events(run).await.unwrap();
    assert!(
        !events.iter().any(|e| matches!(
            e,
            workflow_core::journal::Event::TaskApproved { .. }
                | workflow_core::journal::Event::TaskDecided { .. }
                | workflow_core::journal::Event::TaskDelegated { .. }
                | workflow_core::journal::Event::Cancelled { .. }
        )),
        "no refused request changed the run"
    );

    // A decision link to a run that does not exist, or to a step it does not have, reads
    // the same: the task is not open.
    let links = DecisionLinks::new(LINK_KEY);
    let link = |run, step: &str| {
        links.url(
            "",
            &DecisionLink {
                run,
                step: step.to_owned(),
                by: BOB.to_owned(),
                verdict: LinkVerdict::Approve,
                expires_at: engine.now() + 3_600_000,
            },
        )
    };
    for (target, step) in [
        (workflow_core::RunId(run.0 + 1000), "approve"),
        (run, "nope"),
    ] {
        let opened = get(addr, &link(target, step), None).await;
        assert_eq!(opened.status, StatusCode::CONFLICT, "{}", opened.body);
        assert!(opened.body.contains("task_closed"), "{}", opened.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_shows_what_it_decides_and_is_spent_by_an_approval_towards_a_quorum() {
    let (engine, addr, run) = started().await;
    let url = DecisionLinks::new(LINK_KEY).url(
        "",
        &DecisionLink {
            run,
            step: "approve".into(),
            by: BOB.into(),
            verdict: LinkVerdict::Approve,
            expires_at: engine.now() + 3_600_000,
        },
    );
    let page = get(addr, &url, None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for shown in [
        "<title>Refund 4200 for Ada</title>",
        "refund.amount_cents",
        "4200",
        "id=\"approvals\">0 of 2",
    ] {
        assert!(page.body.contains(shown), "{shown} in {}", page.body);
    }
    let used = request(
        addr,
        Method::POST,
        &url,
        &[(
            "content-type",
            "application/x-www-form-urlencoded".to_owned(),
        )],
        b"comment=ok".to_vec(),
    )
    .await;
    assert!(
        used.status.is_success() || used.status.is_redirection(),
        "{}",
        used.body
    );
    wait_for(&engine, run).await;
    // One approval of two: the task is still open, and the link is spent.
    let again = get(addr, &url, None).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert!(again.body.contains("link_used"), "{}", again.body);
}

/// Waits (bounded) until the run's journal holds an approval.
async fn wait_for(engine: &Engine, run: workflow_core::RunId) {
    for _ in 0..200 {
        let events = engine.events(run).await.unwrap();
        if events
            .iter()
            .any(|e| matches!(e, workflow_core::journal::Event::TaskApproved { .. }))
        {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("no approval was journaled");
}

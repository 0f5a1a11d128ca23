//! One permission policy for every API route and inbox page, over real loopback TCP: the
//! matrix of every route (runs, tasks and their delegation, dead letters, schedules,
//! `/metrics`, `/healthz` and `/readyz`, the inbox, signed decision links) × {anonymous, outsider, approver,
//! viewer, operator, another workflow's operator}, lists filtered to what the caller may
//! see, a run the caller may not see answering exactly as one that does not exist, and a
//! policy that cannot answer answering 503 with nothing changed.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use axum::http::{Method, StatusCode};
use common::*;
use serde_json::json;
use workflow_core::schedule::Schedule;
use workflow_core::store::RunStatus;
use workflow_core::{Approval, Engine, RunId};
use workflow_server::{
    Action, Csrf, DecisionLink, DecisionLinks, Identity, LinkVerdict, PolicyError, Roles, Server,
    TrustedHeader,
};

/// The runs every caller meets: two Triage runs waiting for a lead (one decided over the
/// API, one in the inbox), a Triage run that failed (a dead letter) and a Shipment run
/// waiting for its event.
struct Fixture {
    engine: Engine,
    addr: SocketAddr,
    waiting: RunId,
    inbox: RunId,
    failed: RunId,
    shipment: RunId,
    /// A Triage run waiting for a lead, for delegation.
    delegated: RunId,
    /// A Triage run waiting for a lead, decided through a signed link.
    linked: RunId,
}

/// The key of the fixture's decision links.
const LINK_KEY: [u8; 32] = [7; 32];

async fn fixture() -> Fixture {
    let (engine, desk) = engine(false);
    let addr = serve(
        server(&engine, standard())
            .decision_links(DecisionLinks::new(LINK_KEY))
            .router(),
    )
    .await;
    let start = |text: &'static str| {
        let engine = engine.clone();
        async move {
            let input = TriageInput {
                ticket: Ticket {
                    ticket_id: "T-1".into(),
                    text: text.into(),
                },
            };
            engine.start::<Triage>(input).await.unwrap().id()
        }
    };
    let waiting = start("locked out").await;
    let inbox = start("locked out").await;
    let failed = start("locked out").await;
    let delegated = start("locked out").await;
    let linked = start("locked out").await;
    for run in [waiting, inbox, failed, delegated, linked] {
        wait_for_task(&engine, run, "approve_alert").await;
    }
    desk.broken.store(true, Ordering::SeqCst);
    engine
        .decide(
            failed,
            "approve_alert",
            LEAD,
            serde_json::to_value(Approval::approve(None)).unwrap(),
        )
        .await
        .unwrap();
    wait_for_status(&engine, failed, RunStatus::Failed).await;
    desk.broken.store(false, Ordering::SeqCst);
    // A schedule of Nightly (Triage's viewer sees it, its operator changes it) that fires
    // only on New Year's Day.
    engine
        .schedules()
        .create(SCHEDULE, "Nightly", Schedule::new("0 0 1 1 *"))
        .await
        .unwrap();
    let shipment = engine
        .start::<Shipment>(ShipmentInput {
            order: "O-1".into(),
        })
        .await
        .unwrap()
        .id();
    Fixture {
        engine,
        addr,
        waiting,
        inbox,
        failed,
        shipment,
        delegated,
        linked,
    }
}

/// The fixture's schedule.
const SCHEDULE: &str = "nightly-report";

const CALLERS: [Option<&str>; 6] = [
    None,
    Some(OUTSIDER),
    Some(APPROVER),
    Some(VIEWER),
    Some(OPERATOR),
    Some(OTHER_OPERATOR),
];

fn name(who: Option<&str>) -> &str {
    who.unwrap_or("anonymous")
}

async fn call(
    addr: SocketAddr,
    method: Method,
    path: &str,
    who: Option<&str>,
    body: Option<serde_json::Value>,
) -> Answer {
    let mut headers = Vec::new();
    if let Some(who) = who {
        headers.push(("x-forwarded-user", who.to_owned()));
    }
    let bytes = match body {
        Some(body) => {
            headers.push(("content-type", "application/json".to_owned()));
            body.to_string().into_bytes()
        }
        None if method == Method::POST => {
            headers.push(("content-type", "application/json".to_owned()));
            Vec::new()
        }
        None => Vec::new(),
    };
    request(addr, method, path, &headers, bytes).await
}

fn code(answer: &Answer) -> String {
    if answer.status.is_success() || answer.status.is_redirection() {
        return String::new();
    }
    if answer.headers[axum::http::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/html")
    {
        // An inbox page says `<status> <code>: ...`.
        let start = answer.body.find("id=\"error\">").expect("an error page") + 11;
        let text = &answer.body[start..];
        return text.split([' ', ':']).nth(1).unwrap_or("").to_owned();
    }
    answer.code()
}

/// The expected `(status, code)` per caller, in the order of [`CALLERS`].
type Row = [(u16, &'static str); 6];

const UNAUTH: (u16, &str) = (401, "unauthenticated");
const HIDDEN: (u16, &str) = (404, "unknown_run");
const FORBIDDEN: (u16, &str) = (403, "forbidden");
const OK: (u16, &str) = (200, "");
const NO_SCHEDULE: (u16, &str) = (404, "unknown_schedule");

fn check(route: &str, who: Option<&str>, answer: &Answer, expected: (u16, &str)) {
    assert_eq!(
        (answer.status.as_u16(), code(answer).as_str()),
        expected,
        "{route} as {}: {}",
        name(who),
        answer.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_caller_by_the_policy() {
    // One fixture per caller, so what one caller changes does not move the next's answers.
    for (column, who) in CALLERS.into_iter().enumerate() {
        let f = fixture().await;
        let (addr, a, b, failed, ship) = (f.addr, f.waiting, f.inbox, f.failed, f.shipment);
        let get_rows: Vec<(String, Row)> = vec![
            (
                format!("/api/runs/{a}"),
                [UNAUTH, HIDDEN, OK, OK, OK, HIDDEN],
            ),
            (
                format!("/api/runs/{a}/diagram.svg"),
                [UNAUTH, HIDDEN, OK, OK, OK, HIDDEN],
            ),
            (
                format!("/api/runs/{ship}"),
                [UNAUTH, HIDDEN, HIDDEN, HIDDEN, HIDDEN, OK],
            ),
            ("/api/runs".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            ("/api/tasks".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            ("/api/dead-letters".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            ("/inbox".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            (
                format!("/inbox/runs/{a}"),
                [UNAUTH, HIDDEN, OK, OK, OK, HIDDEN],
            ),
            ("/api/schedules".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            // The console: lists hold what the caller may see; a run it may not view is
            // a 404 as on the API; an action's confirmation is the action's permission.
            ("/console/runs".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            (
                "/console/runs?status=failed&where=ticket_id:T-1".into(),
                [UNAUTH, OK, OK, OK, OK, OK],
            ),
            (
                "/console/runs/bulk?action=cancel".into(),
                [UNAUTH, OK, OK, OK, OK, OK],
            ),
            (
                "/console/runs/bulk?action=retry".into(),
                [UNAUTH, OK, OK, OK, OK, OK],
            ),
            (
                format!("/console/runs/{a}"),
                [UNAUTH, HIDDEN, OK, OK, OK, HIDDEN],
            ),
            (
                format!("/console/runs/{ship}"),
                [UNAUTH, HIDDEN, HIDDEN, HIDDEN, HIDDEN, OK],
            ),
            (
                format!("/console/runs/{a}/cancel"),
                [UNAUTH, HIDDEN, FORBIDDEN, FORBIDDEN, OK, HIDDEN],
            ),
            (
                format!("/console/runs/{failed}/retry"),
                [UNAUTH, HIDDEN, FORBIDDEN, FORBIDDEN, OK, HIDDEN],
            ),
            (
                format!("/console/runs/{failed}/restart"),
                [UNAUTH, HIDDEN, FORBIDDEN, FORBIDDEN, OK, HIDDEN],
            ),
            // Evidence shows payloads; this server serves none, which only those who may
            // see them learn.
            (
                format!("/console/runs/{a}/evidence/classify/1/failure-1.png"),
                [
                    UNAUTH,
                    HIDDEN,
                    (404, "no_evidence"),
                    FORBIDDEN,
                    (404, "no_evidence"),
                    HIDDEN,
                ],
            ),
            // A finished run's live stream says `end` at once and closes.
            (
                format!("/console/runs/{failed}/live"),
                [UNAUTH, HIDDEN, OK, OK, OK, HIDDEN],
            ),
            ("/console/dead-letters".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            ("/console/schedules".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            (
                format!("/console/schedules/{SCHEDULE}/backfill?from=2026-01-01&to=2026-01-02"),
                [UNAUTH, NO_SCHEDULE, NO_SCHEDULE, FORBIDDEN, OK, NO_SCHEDULE],
            ),
            ("/console/flow".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            ("/console/workers".into(), [UNAUTH, OK, OK, OK, OK, OK]),
            // `/console` sends everyone to the runs page, which then asks who they are.
            ("/console".into(), [(303, ""); 6]),
            // The script is static and names nothing; it answers everyone.
            ("/console/static/console.js".into(), [OK; 6]),
            (
                format!("/api/schedules/{SCHEDULE}"),
                [UNAUTH, NO_SCHEDULE, NO_SCHEDULE, OK, OK, NO_SCHEDULE],
            ),
            (
                format!("/api/schedules/{SCHEDULE}/missed"),
                [UNAUTH, NO_SCHEDULE, NO_SCHEDULE, OK, OK, NO_SCHEDULE],
            ),
            // Metrics span every workflow: only a role on `*` reads them.
            (
                "/metrics".into(),
                [
                    UNAUTH, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN,
                ],
            ),
            // A supervisor's probes need no sign-in and say nothing of runs.
            ("/healthz".into(), [OK; 6]),
            ("/readyz".into(), [OK; 6]),
        ];
        for (path, row) in &get_rows {
            let answer = call(addr, Method::GET, path, who, None).await;
            check(&format!("GET {path}"), who, &answer, row[column]);
        }

        // Lists hold what the caller may see, and only that.
        if who.is_some() {
            let runs = call(addr, Method::GET, "/api/runs", who, None).await.json();
            let mut seen: Vec<String> = runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["run"].as_str().unwrap().to_owned())
                .collect();
            seen.sort();
            let triage = {
                let mut all = vec![
                    a.to_string(),
                    b.to_string(),
                    failed.to_string(),
                    f.delegated.to_string(),
                    f.linked.to_string(),
                ];
                all.sort();
                all
            };
            let expected: Vec<Vec<String>> = vec![
                vec![],
                vec![],
                triage.clone(),
                triage.clone(),
                triage.clone(),
                vec![ship.to_string()],
            ];
            assert_eq!(seen, expected[column], "runs of {}", name(who));
            let tasks = call(addr, Method::GET, "/api/tasks", who, None)
                .await
                .json();
            let tasks = tasks["tasks"].as_array().unwrap().len();
            assert_eq!(tasks, [0, 0, 4, 0, 0, 0][column], "tasks of {}", name(who));
            let letters = call(addr, Method::GET, "/api/dead-letters", who, None)
                .await
                .json();
            let letters = letters["dead_letters"].as_array().unwrap().len();
            assert_eq!(
                letters,
                [0, 0, 1, 1, 1, 0][column],
                "dead letters of {}",
                name(who)
            );
            let schedules = call(addr, Method::GET, "/api/schedules", who, None)
                .await
                .json();
            let schedules = schedules["schedules"].as_array().unwrap().len();
            assert_eq!(
                schedules,
                [0, 0, 0, 1, 1, 0][column],
                "schedules of {}",
                name(who)
            );
            let inbox = call(addr, Method::GET, "/inbox", who, None).await.body;
            assert_eq!(
                inbox.contains(&format!("task-{a}-approve_alert")),
                column == 2,
                "inbox of {}",
                name(who)
            );
        }

        // State changes, each on a run of its own where one caller could change it twice.
        let decide = json!({"approved": false, "comment": "no"});
        let post_rows: Vec<(String, Option<serde_json::Value>, Row)> = vec![
            (
                "/api/runs".into(),
                Some(
                    json!({"workflow": "Triage", "input": {"ticket": {"ticket_id": "T-2", "text": "hi"}}}),
                ),
                [
                    UNAUTH,
                    FORBIDDEN,
                    FORBIDDEN,
                    FORBIDDEN,
                    (201, ""),
                    FORBIDDEN,
                ],
            ),
            (
                format!("/api/runs/{a}/events/approve_alert"),
                Some(json!({"event_id": "e-1", "payload": "x"})),
                [
                    UNAUTH,
                    HIDDEN,
                    FORBIDDEN,
                    FORBIDDEN,
                    (404, "unknown_event"),
                    HIDDEN,
                ],
            ),
            (
                format!("/api/runs/{ship}/events/shipped"),
                Some(json!({"event_id": "e-1", "payload": "by sea"})),
                [UNAUTH, HIDDEN, HIDDEN, HIDDEN, HIDDEN, (202, "")],
            ),
            (
                format!("/api/runs/{a}/tasks/approve_alert"),
                Some(decide.clone()),
                [
                    UNAUTH,
                    HIDDEN,
                    OK,
                    (403, "not_admitted"),
                    (403, "not_admitted"),
                    HIDDEN,
                ],
            ),
            (
                format!("/api/runs/{b}/cancel"),
                None,
                [UNAUTH, HIDDEN, FORBIDDEN, FORBIDDEN, OK, HIDDEN],
            ),
            (
                format!("/api/dead-letters/{failed}/retry"),
                None,
                [UNAUTH, HIDDEN, FORBIDDEN, FORBIDDEN, OK, HIDDEN],
            ),
        ];
        for (path, body, row) in post_rows {
            let answer = call(addr, Method::POST, &path, who, body).await;
            check(&format!("POST {path}"), who, &answer, row[column]);
        }
        // Delegating takes what deciding takes: a caller the authorizer admits for the task.
        let d = f.delegated;
        let path = format!("/api/runs/{d}/tasks/approve_alert/delegate");
        let answer = call(addr, Method::POST, &path, who, Some(json!({"to": LEAD}))).await;
        let row: Row = [
            UNAUTH,
            HIDDEN,
            OK,
            (403, "not_admitted"),
            (403, "not_admitted"),
            HIDDEN,
        ];
        check(&format!("POST {path}"), who, &answer, row[column]);
        let delegated_to = f
            .engine
            .events(d)
            .await
            .unwrap()
            .iter()
            .find_map(|e| match e {
                workflow_core::journal::Event::TaskDelegated { to, .. } => Some(to.clone()),
                _ => None,
            });
        let expected = (column == 2).then(|| LEAD.to_owned());
        assert_eq!(delegated_to, expected, "delegation by {}", name(who));

        // A signed link is its own credential: whoever holds it (signed in or not, with any
        // role) gets the same answers, and a forged one decides nothing.
        let links = DecisionLinks::new(LINK_KEY);
        let link = DecisionLink {
            run: f.linked,
            step: "approve_alert".into(),
            by: LEAD.into(),
            verdict: LinkVerdict::Approve,
            expires_at: f.engine.now() + 3_600_000,
        };
        let token = links.token(&link);
        let forged = DecisionLinks::new([8; 32]).token(&link);
        let form = |who: Option<&str>, token: String| {
            let mut headers = vec![(
                "content-type",
                "application/x-www-form-urlencoded".to_owned(),
            )];
            if let Some(who) = who {
                headers.push(("x-forwarded-user", who.to_owned()));
            }
            async move {
                request(
                    addr,
                    Method::POST,
                    &format!("/links/{token}"),
                    &headers,
                    b"verdict=approve".to_vec(),
                )
                .await
            }
        };
        let same = |answer: (u16, &'static str)| -> Row { [answer; 6] };
        let answer = call(addr, Method::GET, &format!("/links/{token}"), who, None).await;
        check("GET /links/{token}", who, &answer, same(OK)[column]);
        let answer = call(addr, Method::GET, &format!("/links/{forged}"), who, None).await;
        check(
            "GET /links/{forged}",
            who,
            &answer,
            same((403, "link_invalid"))[column],
        );
        let answer = form(who, forged).await;
        check(
            "POST /links/{forged}",
            who,
            &answer,
            same((403, "link_invalid"))[column],
        );
        let answer = form(who, token.clone()).await;
        check("POST /links/{token}", who, &answer, same(OK)[column]);
        let answer = form(who, token.clone()).await;
        check(
            "POST /links/{token} again",
            who,
            &answer,
            same((409, "link_used"))[column],
        );
        let answer = call(addr, Method::GET, &format!("/links/{token}"), who, None).await;
        check(
            "GET /links/{used}",
            who,
            &answer,
            same((409, "link_used"))[column],
        );
        let deciders: Vec<String> = f
            .engine
            .events(f.linked)
            .await
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                workflow_core::journal::Event::TaskDecided { by, .. } => Some(by.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(deciders, [LEAD], "one decision, as the link's identity");
        // Schedules: seeing one takes a viewer of its workflow, changing it an operator;
        // one the caller may not see answers as a missing one.
        let change: Row = [UNAUTH, NO_SCHEDULE, NO_SCHEDULE, FORBIDDEN, OK, NO_SCHEDULE];
        let started: Row = [
            UNAUTH,
            NO_SCHEDULE,
            NO_SCHEDULE,
            FORBIDDEN,
            (201, ""),
            NO_SCHEDULE,
        ];
        let week =
            json!({"from": "2026-03-02T00:00:00Z", "to": "2026-03-09T00:00:00Z", "dry_run": true});
        let schedule_rows: Vec<(Method, String, Option<serde_json::Value>, Row)> = vec![
            (
                Method::POST,
                format!("/api/schedules/{SCHEDULE}/pause"),
                None,
                change,
            ),
            (
                Method::POST,
                format!("/api/schedules/{SCHEDULE}/resume"),
                None,
                change,
            ),
            (
                Method::POST,
                format!("/api/schedules/{SCHEDULE}/trigger"),
                None,
                started,
            ),
            (
                Method::POST,
                format!("/api/schedules/{SCHEDULE}/backfill"),
                Some(week),
                change,
            ),
            (
                Method::POST,
                "/api/schedules".into(),
                Some(json!({"id": "made-over-http", "workflow": "Nightly", "cron": "0 3 * * *"})),
                [
                    UNAUTH,
                    FORBIDDEN,
                    FORBIDDEN,
                    FORBIDDEN,
                    (201, ""),
                    FORBIDDEN,
                ],
            ),
            (
                Method::DELETE,
                format!("/api/schedules/{SCHEDULE}"),
                Some(json!({})),
                change,
            ),
        ];
        for (method, path, body, row) in schedule_rows {
            let answer = call(addr, method.clone(), &path, who, body).await;
            check(&format!("{method} {path}"), who, &answer, row[column]);
        }
        // Whoever was refused changed no schedule and started no run of it.
        let schedules = f.engine.schedules().list(1).await.unwrap();
        let ids: Vec<&str> = schedules.iter().map(|s| s.row.id.as_str()).collect();
        let nightly_runs = f
            .engine
            .runs(workflow_core::store::RunFilter {
                workflow: Some("Nightly".into()),
                ..Default::default()
            })
            .await
            .unwrap()
            .len();
        if column == 4 {
            assert_eq!(ids, ["made-over-http"], "the operator's changes");
            assert_eq!(nightly_runs, 1, "the operator's trigger");
        } else {
            assert_eq!(ids, [SCHEDULE], "{}", name(who));
            assert!(!schedules[0].row.paused, "{}", name(who));
            assert_eq!(nightly_runs, 0, "{}", name(who));
        }
        // The inbox's decision form, with the caller's own CSRF token; `b` is cancelled
        // only by the operator, who is not admitted anyway.
        let c = f.engine.clone();
        let target = if column == 4 { a } else { b };
        let csrf = who.map_or_else(String::new, |who| {
            Csrf::new([42; 32]).token(&Identity(who.to_owned()))
        });
        let mut headers = vec![(
            "content-type",
            "application/x-www-form-urlencoded".to_owned(),
        )];
        if let Some(who) = who {
            headers.push(("x-forwarded-user", who.to_owned()));
        }
        let path = format!("/inbox/runs/{target}/tasks/approve_alert");
        let answer = request(
            addr,
            Method::POST,
            &path,
            &headers,
            format!("csrf={csrf}&verdict=approve").into_bytes(),
        )
        .await;
        let row: Row = [
            UNAUTH,
            HIDDEN,
            (303, ""),
            (403, "not_admitted"),
            (403, "not_admitted"),
            HIDDEN,
        ];
        check(&format!("POST {path}"), who, &answer, row[column]);
        // Whoever was refused changed nothing: the runs still wait as they did.
        let status = |run| {
            let c = c.clone();
            async move { c.inspect(run).await.unwrap().record.status }
        };
        if column != 4 {
            assert_eq!(status(failed).await, RunStatus::Failed, "{}", name(who));
            if column != 2 {
                assert_eq!(status(b).await, RunStatus::Running, "{}", name(who));
            }
        }
        if column != 5 {
            let events = c.events(ship).await.unwrap();
            assert!(
                !events.iter().any(|e| format!("{e:?}").contains("by sea")),
                "{}",
                name(who)
            );
        }
        if column != 2 {
            let decided = c
                .events(a)
                .await
                .unwrap()
                .iter()
                .any(|e| matches!(e, workflow_core::journal::Event::TaskDecided { .. }));
            assert!(!decided, "{} decided", name(who));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_the_caller_may_not_see_answers_as_a_missing_one() {
    let f = fixture().await;
    let a = f.waiting;
    for (suffix, method) in [
        ("", Method::GET),
        ("/diagram.svg", Method::GET),
        ("/cancel", Method::POST),
        ("/tasks/approve_alert", Method::POST),
    ] {
        let body = (method == Method::POST).then(|| json!({"approved": true}));
        let hidden = call(
            f.addr,
            method.clone(),
            &format!("/api/runs/{a}{suffix}"),
            Some(OUTSIDER),
            body.clone(),
        )
        .await;
        let missing = call(
            f.addr,
            method,
            &format!("/api/runs/run-999{suffix}"),
            Some(OUTSIDER),
            body,
        )
        .await;
        assert_eq!(hidden.status, missing.status, "{suffix}");
        assert_eq!(
            hidden.body.replace(&a.to_string(), "run-999"),
            missing.body,
            "{suffix}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_are_a_role_of_their_own() {
    let (engine, _) = engine(true);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = engine
        .start::<Triage>(TriageInput {
            ticket: Ticket {
                ticket_id: "T-3".into(),
                text: "locked out, secret 4242".into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_task(&engine, run, "approve_alert").await;
    let path = format!("/api/runs/{run}");
    // The operator holds `payloads`, the viewer does not; the approver sees what it decides.
    for (who, shown) in [(OPERATOR, true), (VIEWER, false), (APPROVER, true)] {
        let detail = get(addr, &path, Some(who)).await.json();
        assert_eq!(detail["input"].is_object(), shown, "{who}: {detail}");
        assert_eq!(detail.to_string().contains("secret 4242"), shown, "{who}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_cannot_answer_is_503_and_changes_nothing() {
    let (engine, _) = engine(false);
    let run = engine
        .start::<Triage>(TriageInput {
            ticket: Ticket {
                ticket_id: "T-4".into(),
                text: "locked out".into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_task(&engine, run, "approve_alert").await;
    let down = |_: &workflow_server::Caller, _: Action, _: &workflow_server::Target<'_>| {
        Err(PolicyError("the directory is unreachable".into()))
    };
    let server = Server::new(engine.clone())
        .authenticator(TrustedHeader::new())
        .permissions(down)
        .csrf_key([42; 32]);
    let addr = serve(server.router()).await;
    for (method, path) in [
        (Method::GET, "/api/runs".to_owned()),
        (Method::GET, format!("/api/runs/{run}")),
        (Method::GET, "/api/tasks".to_owned()),
        (Method::GET, "/inbox".to_owned()),
        (Method::GET, format!("/inbox/runs/{run}")),
        (Method::POST, format!("/api/runs/{run}/cancel")),
        (Method::POST, "/api/runs".to_owned()),
    ] {
        let body = (path == "/api/runs" && method == Method::POST)
            .then(|| json!({"workflow": "Triage", "input": {}}));
        let answer = call(addr, method.clone(), &path, Some(LEAD), body).await;
        assert_eq!(
            (answer.status, code(&answer).as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "policy_unavailable"),
            "{method} {path}: {}",
            answer.body
        );
    }
    assert_eq!(
        engine.inspect(run).await.unwrap().record.status,
        RunStatus::Running
    );
    assert_eq!(run_count(&engine).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_from_a_header_carry_roles() {
    let (engine, _) = engine(false);
    let run = engine
        .start::<Shipment>(ShipmentInput {
            order: "O-9".into(),
        })
        .await
        .unwrap()
        .id();
    let server = Server::new(engine.clone())
        .authenticator(
            TrustedHeader::new()
                .groups_header("X-Forwarded-Groups")
                .unwrap(),
        )
        .permissions(Roles::parse("group:shipping operator:Shipment").unwrap());
    let addr = serve(server.router()).await;
    let path = format!("/api/runs/{run}");
    let as_member = request(
        addr,
        Method::GET,
        &path,
        &[
            ("x-forwarded-user", "sam".to_owned()),
            ("x-forwarded-groups", "billing, shipping".to_owned()),
        ],
        Vec::new(),
    )
    .await;
    assert_eq!(as_member.status, StatusCode::OK, "{}", as_member.body);
    let as_other = request(
        addr,
        Method::GET,
        &path,
        &[
            ("x-forwarded-user", "sam".to_owned()),
            ("x-forwarded-groups", "billing".to_owned()),
        ],
        Vec::new(),
    )
    .await;
    assert_eq!(as_other.status, StatusCode::NOT_FOUND);
}

/// A policy that asks a directory (here: after yielding, as a lookup would), which may be
/// down.
struct Directory {
    roles: Roles,
    down: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl workflow_server::Permissions for Directory {
    fn check<'a>(
        &'a self,
        caller: &'a workflow_server::Caller,
        action: Action,
        target: workflow_server::Target<'a>,
    ) -> workflow_server::permissions::BoxFuture<'a, Result<workflow_server::Verdict, PolicyError>>
    {
        Box::pin(async move {
            tokio::task::yield_now().await;
            if self.down.load(Ordering::SeqCst) {
                return Err(PolicyError("ldap://directory: connection refused".into()));
            }
            Ok(self.roles.verdict(caller, action, &target))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asynchronous_policy_answers_and_its_outage_is_503() {
    let (engine, _) = engine(false);
    let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = Server::new(engine.clone())
        .authenticator(TrustedHeader::new())
        .permissions(Directory {
            roles: roles(),
            down: down.clone(),
        })
        .csrf_key([42; 32]);
    let addr = serve(server.router()).await;
    let run = engine
        .start::<Shipment>(ShipmentInput {
            order: "O-5".into(),
        })
        .await
        .unwrap()
        .id();
    let path = format!("/api/runs/{run}");
    assert_eq!(
        get(addr, &path, Some(OTHER_OPERATOR)).await.status,
        StatusCode::OK
    );
    assert_eq!(
        get(addr, &path, Some(OPERATOR)).await.status,
        StatusCode::NOT_FOUND
    );
    down.store(true, Ordering::SeqCst);
    for who in [OTHER_OPERATOR, OPERATOR] {
        let answer = get(addr, &path, Some(who)).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "policy_unavailable"),
            "{who}"
        );
        assert!(answer.body.contains("connection refused"));
    }
    let cancel = call(
        addr,
        Method::POST,
        &format!("/api/runs/{run}/cancel"),
        Some(OTHER_OPERATOR),
        None,
    )
    .await;
    assert_eq!(cancel.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        engine.inspect(run).await.unwrap().record.status,
        RunStatus::Running
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_runs_is_filled_with_runs_the_caller_may_see() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let ship = |order: &'static str| {
        let engine = engine.clone();
        async move {
            engine
                .start::<Shipment>(ShipmentInput {
                    order: order.into(),
                })
                .await
                .unwrap()
                .id()
        }
    };
    let older = ship("O-old").await;
    for n in 0..5 {
        engine
            .start::<Triage>(TriageInput {
                ticket: Ticket {
                    ticket_id: format!("T-{n}"),
                    text: "fine".into(),
                },
            })
            .await
            .unwrap();
    }
    let newer = ship("O-new").await;
    let ids = |page: &serde_json::Value| -> Vec<String> {
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run"].as_str().unwrap().to_owned())
            .collect()
    };
    // Shipment's operator: both its runs on one page, past the five it may not see.
    let page = get(addr, "/api/runs?limit=2", Some(OTHER_OPERATOR))
        .await
        .json();
    assert_eq!(ids(&page), [newer.to_string(), older.to_string()]);
    let next = page["next_before"].as_str().unwrap().to_owned();
    assert_eq!(next, older.to_string());
    let rest = get(
        addr,
        &format!("/api/runs?limit=2&before={next}"),
        Some(OTHER_OPERATOR),
    )
    .await
    .json();
    assert!(ids(&rest).is_empty());
    assert!(rest["next_before"].is_null());
    // Triage's viewer pages through its five, two at a time.
    let mut seen = Vec::new();
    let mut path = "/api/runs?limit=2".to_owned();
    loop {
        let page = get(addr, &path, Some(VIEWER)).await.json();
        seen.extend(ids(&page));
        match page["next_before"].as_str() {
            Some(next) => path = format!("/api/runs?limit=2&before={next}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(!seen.contains(&older.to_string()) && !seen.contains(&newer.to_string()));
}

//! The approval inbox over real loopback TCP: 401 without an identity, the person's tasks
//! only, CSRF-protected forms, escaped text, redacted payloads, 404 for runs an outsider may not see.

mod common;

use axum::http::{Method, StatusCode};
use common::*;
use workflow_core::store::RunStatus;
use workflow_server::{BearerTokens, Csrf, Identity, Server};

fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn post_form(addr: std::net::SocketAddr, path: &str, who: &str, body: Vec<u8>) -> Answer {
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
        body,
    )
    .await
}

/// The CSRF token the tests' server (key `[42; 32]`) puts in `who`'s forms.
fn token(who: &str) -> String {
    Csrf::new([42; 32]).token(&Identity(who.to_owned()))
}

async fn run_waiting(
    engine: &workflow_core::Engine,
    addr: std::net::SocketAddr,
) -> workflow_core::RunId {
    let config = standard();
    let body = body(
        "evt_1",
        "T-91",
        "Locked out <script>alert('payload')</script>",
    );
    let answer = deliver(addr, &config.sign("evt_1", now_secs(engine), &body), body).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let run = run_id(&answer);
    wait_for_task(engine, run, "approve_alert").await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_lists_the_persons_tasks_escaped_with_redacted_context() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = run_waiting(&engine, addr).await;

    let unauthenticated = get(addr, "/inbox", None).await;
    assert_eq!(unauthenticated.status, StatusCode::UNAUTHORIZED);
    assert!(unauthenticated.body.contains("Sign in first"));

    let inbox = get(addr, "/inbox", Some(LEAD)).await;
    assert_eq!(inbox.status, StatusCode::OK);
    assert_eq!(inbox.headers["content-type"], "text/html; charset=utf-8");
    let page = &inbox.body;
    assert!(
        page.contains(&format!("task-{run}-approve_alert")),
        "{page}"
    );
    // The prompt's markup shows as text.
    assert!(!page.contains("<script>"), "{page}");
    assert!(
        page.contains("Send the urgent alert? &lt;script&gt;alert('prompt')&lt;/script&gt;"),
        "{page}"
    );
    assert!(page.contains("escalates to on_call"), "{page}");
    assert!(page.contains("support_leads"));
    // A title that says what to do and for whom; times relative, absolute on hover.
    assert!(
        page.contains("<h2 class=\"title\">Approve alert for support_leads</h2>"),
        "{page}"
    );
    assert!(
        page.contains(&format!("Triage · {run} · due <time datetime=\"")),
        "{page}"
    );
    assert!(
        page.contains("\">in 2 h</time>") || page.contains("\">in 1 h</time>"),
        "{page}"
    );
    assert!(page.contains("<th>Waiting since</th><td><time"), "{page}");
    assert!(page.contains("\">now</time>"), "{page}");
    // The engine does not log payloads: the context is redacted.
    assert!(page.contains("redacted"), "{page}");
    assert!(!page.contains("Locked out"), "{page}");
    assert!(page.contains(&format!("value=\"{}\"", token(LEAD))));

    let outsider = get(addr, "/inbox", Some(OUTSIDER)).await;
    assert_eq!(outsider.status, StatusCode::OK);
    assert!(outsider.body.contains("No open tasks for you."));
    assert!(!outsider.body.contains("approve_alert"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_show_escaped_when_the_engine_logs_them() {
    let (engine, _) = engine(true);
    let addr = serve(server(&engine, standard()).router()).await;
    let _run = run_waiting(&engine, addr).await;
    let page = get(addr, "/inbox", Some(LEAD)).await.body;
    assert!(
        page.contains("Locked out &lt;script&gt;alert('payload')&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script>"), "{page}");
    assert!(!page.contains("redacted"), "{page}");
    // The inputs read as fields, the classifier's verdict as a value.
    assert!(
        page.contains("<tr><th>ticket.ticket_id</th><td>T-91</td></tr>"),
        "{page}"
    );
    assert!(
        page.contains("<tr><th>classify</th><td><span class=\"value\">true</span></td></tr>"),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_need_the_persons_csrf_token_and_outsiders_get_404() {
    let (engine, desk) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = run_waiting(&engine, addr).await;
    let path = format!("/inbox/runs/{run}/tasks/approve_alert");

    for (case, csrf) in [
        ("no token", String::new()),
        ("someone else's", token("ana@support_leads")),
        (
            "another key's",
            Csrf::new([1; 32]).token(&Identity(LEAD.into())),
        ),
        ("garbage", "!!".to_owned()),
    ] {
        let answer = post_form(
            addr,
            &path,
            LEAD,
            form(&[("csrf", &csrf), ("verdict", "approve")]),
        )
        .await;
        assert_eq!(
            answer.status,
            StatusCode::FORBIDDEN,
            "{case}: {}",
            answer.body
        );
        assert!(answer.body.contains("csrf"), "{case}");
    }
    // The outsider, with their own valid token, may not see the run: a 404, as for a run
    // that does not exist.
    let outsider = post_form(
        addr,
        &path,
        OUTSIDER,
        form(&[("csrf", &token(OUTSIDER)), ("verdict", "approve")]),
    )
    .await;
    assert_eq!(outsider.status, StatusCode::NOT_FOUND);
    assert!(outsider.body.contains("unknown_run"));
    let page = get(addr, &format!("/inbox/runs/{run}"), Some(OUTSIDER)).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    let missing = get(addr, "/inbox/runs/run-999", Some(OUTSIDER)).await;
    assert_eq!(
        page.body.replace(&run.to_string(), "run-999"),
        missing.body,
        "an invisible run answers as a missing one"
    );
    // The operator sees the run, but the engine's authorizer does not admit them.
    let operator = post_form(
        addr,
        &path,
        OPERATOR,
        form(&[("csrf", &token(OPERATOR)), ("verdict", "approve")]),
    )
    .await;
    assert_eq!(operator.status, StatusCode::FORBIDDEN);
    assert!(operator.body.contains("not_admitted"));
    assert!(engine.inspect(run).await.unwrap().record.status == RunStatus::Running);
    assert_eq!(
        engine
            .events(run)
            .await
            .unwrap()
            .iter()
            .filter(|e| matches!(e, workflow_core::journal::Event::TaskDecided { .. }))
            .count(),
        0
    );

    let comment = "call them <script>alert('comment')</script>";
    let approved = post_form(
        addr,
        &path,
        LEAD,
        form(&[
            ("csrf", &token(LEAD)),
            ("verdict", "approve"),
            ("comment", comment),
        ]),
    )
    .await;
    assert_eq!(approved.status, StatusCode::SEE_OTHER, "{}", approved.body);
    assert_eq!(
        approved.headers["location"],
        format!("/inbox/runs/{run}?decided=approve_alert")
    );
    // The page the form answers with confirms what was decided.
    let confirmed = get(
        addr,
        approved.headers["location"].to_str().unwrap(),
        Some(LEAD),
    )
    .await;
    assert!(
        confirmed
            .body
            .contains("Done: you decided “Approve alert”: approved"),
        "{}",
        confirmed.body
    );
    assert!(confirmed.body.contains("id=\"confirmation\""));
    wait_for_status(&engine, run, RunStatus::Completed).await;
    assert_eq!(desk.alerts.load(std::sync::atomic::Ordering::SeqCst), 1);

    let late = post_form(
        addr,
        &path,
        LEAD,
        form(&[("csrf", &token(LEAD)), ("verdict", "reject")]),
    )
    .await;
    assert_eq!(late.status, StatusCode::CONFLICT);
    assert!(late.body.contains("already_decided"));

    let page = get(addr, &format!("/inbox/runs/{run}"), Some(LEAD)).await;
    assert_eq!(page.status, StatusCode::OK);
    let body = &page.body;
    assert!(
        body.contains("<span class=\"status\" id=\"status\">completed</span>"),
        "{body}"
    );
    assert!(body.contains("<svg"), "{body}");
    assert!(!body.contains("<script>"), "{body}");
    assert!(
        body.contains(
            "approved (&quot;call them &lt;script&gt;alert('comment')&lt;/script&gt;&quot;)"
        ),
        "{body}"
    );
    assert!(body.contains(LEAD));
    // The human step says who decided it, not "0 attempts".
    let steps = &body[body.find("id=\"steps\"").unwrap()..];
    let steps = &steps[..steps.find("</table>").unwrap()];
    assert!(
        steps.contains("approve_alert</td><td>succeeded</td><td>approved (&quot;call them"),
        "{steps}"
    );
    assert!(steps.contains(&format!("by {LEAD} <time")), "{steps}");
    assert!(
        steps.contains("send_alert</td><td>succeeded</td><td>1 attempt</td>"),
        "{steps}"
    );
    let missing = get(addr, "/inbox/runs/run-99", Some(LEAD)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_pages_tasks_soonest_deadline_first() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let mut runs = Vec::new();
    for n in 0..(workflow_server::inbox::PAGE + 5) {
        let run = engine
            .start::<Triage>(TriageInput {
                ticket: Ticket {
                    ticket_id: format!("T-{n}"),
                    text: "locked out".into(),
                },
            })
            .await
            .unwrap()
            .id();
        runs.push(run);
    }
    for run in &runs {
        wait_for_task(&engine, *run, "approve_alert").await;
    }
    let cards = |body: &str| body.matches("<section class=\"task\"").count();
    let first = get(addr, "/inbox", Some(LEAD)).await.body;
    assert_eq!(cards(&first), workflow_server::inbox::PAGE);
    assert!(first.contains("25 open tasks"), "{first}");
    assert!(first.contains("Page 1 of 2"), "{first}");
    assert!(first.contains("href=\"/inbox?page=2\""), "{first}");
    let second = get(addr, "/inbox?page=2", Some(LEAD)).await.body;
    assert_eq!(cards(&second), 5);
    assert!(second.contains("href=\"/inbox?page=1\""), "{second}");
    // Every task is on exactly one page.
    for run in &runs {
        let id = format!("id=\"task-{run}-approve_alert\"");
        assert_eq!(
            first.contains(&id) as u8 + second.contains(&id) as u8,
            1,
            "{run}"
        );
    }
    // A page past the end shows the last one.
    let past = get(addr, "/inbox?page=9", Some(LEAD)).await.body;
    assert_eq!(cards(&past), 5);
    // Filtered by a search value: the one run with it.
    let found = get(addr, "/inbox?where=ticket_id:T-7", Some(LEAD))
        .await
        .body;
    assert_eq!(cards(&found), 1, "{found}");
    assert!(found.contains(&format!("id=\"task-{}-approve_alert\"", runs[7])));
    assert!(found.contains("value=\"ticket_id:T-7\""), "{found}");
    let none = get(addr, "/inbox?where=ticket_id:T-99", Some(LEAD))
        .await
        .body;
    assert_eq!(cards(&none), 0);
    let bad = get(addr, "/inbox?where=nonsense", Some(LEAD)).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_sign_people_in() {
    let (engine, _) = engine(false);
    let tokens = BearerTokens::new().token("t-lee", LEAD);
    let addr = serve(Server::new(engine.clone()).authenticator(tokens).router()).await;
    let with = |token: &str| vec![("authorization", format!("Bearer {token}"))];
    let ok = request(addr, Method::GET, "/inbox", &with("t-lee"), Vec::new()).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert!(ok.body.contains(LEAD));
    let bad = request(
        addr,
        Method::GET,
        "/api/tasks",
        &with("t-nobody"),
        Vec::new(),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
}

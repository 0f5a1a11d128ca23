//! No state change from a cross-site page, over real loopback TCP: with an ambient identity
//! (a reverse proxy's trusted header), an API state change must be JSON and must not come
//! from another origin; the inbox's forms need their CSRF token and the same origin too;
//! a bearer token is not ambient. A duplicated identity header is refused, and the header
//! is trusted only from the listed proxies.

mod common;

use std::net::SocketAddr;

use axum::http::{Method, StatusCode};
use common::*;
use workflow_core::journal::Event;
use workflow_core::store::RunStatus;
use workflow_core::{Engine, RunId};
use workflow_server::{BearerTokens, Csrf, Identity, Roles, TrustedHeader};

async fn waiting_run(engine: &Engine) -> RunId {
    let run = engine
        .start::<Triage>(TriageInput {
            ticket: Ticket {
                ticket_id: "T-5".into(),
                text: "locked out".into(),
            },
        })
        .await
        .unwrap()
        .id();
    wait_for_task(engine, run, "approve_alert").await;
    run
}

async fn post(
    addr: SocketAddr,
    path: &str,
    who: &str,
    headers: &[(&'static str, &str)],
    body: &str,
) -> Answer {
    let mut all = vec![("x-forwarded-user", who.to_owned())];
    all.extend(headers.iter().map(|(n, v)| (*n, (*v).to_owned())));
    request(addr, Method::POST, path, &all, body.as_bytes().to_vec()).await
}

async fn unchanged(engine: &Engine, run: RunId, count: usize) {
    assert_eq!(
        engine.inspect(run).await.unwrap().record.status,
        RunStatus::Running
    );
    assert!(!engine
        .events(run)
        .await
        .unwrap()
        .iter()
        .any(|e| matches!(e, Event::TaskDecided { .. })));
    assert_eq!(run_count(engine).await, count);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_state_changes_need_json_and_the_servers_own_origin() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = waiting_run(&engine).await;
    let cancel = format!("/api/runs/{run}/cancel");
    let decide = format!("/api/runs/{run}/tasks/approve_alert");
    let start = r#"{"workflow":"Triage","input":{"ticket":{"ticket_id":"T-6","text":"hi"}}}"#;
    let evil = "http://127.0.0.1:1";
    // What a form on another site can send: no JSON content type.
    for (path, content_type, body) in [
        (cancel.as_str(), "application/x-www-form-urlencoded", "a=1"),
        (cancel.as_str(), "text/plain", ""),
        (cancel.as_str(), "multipart/form-data; boundary=x", ""),
        (decide.as_str(), "text/plain", r#"{"approved":true}"#),
        ("/api/runs", "text/plain", start),
    ] {
        let answer = post(addr, path, LEAD, &[("content-type", content_type)], body).await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "json_required"),
            "{path} as {content_type}"
        );
    }
    let bare = post(addr, &cancel, LEAD, &[], "").await;
    assert_eq!(bare.code(), "json_required");
    // JSON, but from another origin or site (as a browser marks it).
    for headers in [
        vec![("origin", evil)],
        vec![("origin", "null")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
        vec![("origin", evil), ("sec-fetch-site", "same-origin")],
    ] {
        let mut all = vec![("content-type", "application/json")];
        all.extend(headers.iter().copied());
        for (path, body) in [
            (cancel.as_str(), "{}"),
            (decide.as_str(), r#"{"approved":true}"#),
            ("/api/runs", start),
        ] {
            let answer = post(addr, path, LEAD, &all, body).await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (StatusCode::FORBIDDEN, "cross_site"),
                "{path} with {headers:?}"
            );
        }
    }
    unchanged(&engine, run, 1).await;
    // Reading is not a state change: another origin may read what the caller may see.
    let read = request(
        addr,
        Method::GET,
        &format!("/api/runs/{run}"),
        &[
            ("x-forwarded-user", LEAD.to_owned()),
            ("origin", evil.to_owned()),
        ],
        Vec::new(),
    )
    .await;
    assert_eq!(read.status, StatusCode::OK);
    // The server's own origin, as a browser on its pages sends it, is accepted.
    let own = format!("http://{addr}");
    let answer = post(
        addr,
        &cancel,
        LEAD,
        &[
            ("content-type", "application/json"),
            ("origin", &own),
            ("sec-fetch-site", "same-origin"),
        ],
        "{}",
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_passes_and_bearer_tokens_are_not_ambient() {
    let (engine, _) = engine(false);
    let router = server(&engine, standard())
        .allowed_origin("https://ops.example.com/")
        .router();
    let addr = serve(router).await;
    let run = waiting_run(&engine).await;
    let answer = post(
        addr,
        &format!("/api/runs/{run}/cancel"),
        LEAD,
        &[
            ("content-type", "application/json"),
            ("origin", "https://ops.example.com"),
        ],
        "{}",
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);

    // A bearer token is sent on purpose: no JSON or origin needed.
    let run = waiting_run(&engine).await;
    let bearer = workflow_server::Server::new(engine.clone())
        .authenticator(BearerTokens::new().token("t0k", OPERATOR))
        .permissions(roles());
    let addr = serve(bearer.router()).await;
    let answer = request(
        addr,
        Method::POST,
        &format!("/api/runs/{run}/cancel"),
        &[
            ("authorization", "Bearer t0k".to_owned()),
            ("origin", "http://elsewhere.example".to_owned()),
        ],
        Vec::new(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbox_forms_need_their_token_and_the_same_origin() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = waiting_run(&engine).await;
    let path = format!("/inbox/runs/{run}/tasks/approve_alert");
    let token = Csrf::new([42; 32]).token(&Identity(LEAD.into()));
    let form = format!("csrf={token}&verdict=approve");
    let form_type = ("content-type", "application/x-www-form-urlencoded");
    for headers in [
        vec![form_type, ("origin", "http://127.0.0.1:1")],
        vec![form_type, ("sec-fetch-site", "cross-site")],
    ] {
        let answer = post(addr, &path, LEAD, &headers, &form).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{headers:?}");
        assert!(answer.body.contains("cross_site"), "{}", answer.body);
    }
    // Without the token, from the same origin: still refused.
    let own = format!("http://{addr}");
    let answer = post(
        addr,
        &path,
        LEAD,
        &[form_type, ("origin", &own)],
        "verdict=approve",
    )
    .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(answer.body.contains("csrf"));
    unchanged(&engine, run, 1).await;
    let answer = post(addr, &path, LEAD, &[form_type, ("origin", &own)], &form).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicated_identity_header_is_refused() {
    let (engine, _) = engine(false);
    let addr = serve(server(&engine, standard()).router()).await;
    let run = waiting_run(&engine).await;
    let twice = [
        ("x-forwarded-user", LEAD.to_owned()),
        ("x-forwarded-user", OUTSIDER.to_owned()),
    ];
    for path in [
        "/api/runs".to_owned(),
        "/inbox".to_owned(),
        format!("/inbox/runs/{run}"),
    ] {
        let answer = request(addr, Method::GET, &path, &twice, Vec::new()).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path}");
        assert!(
            answer.body.contains("duplicate_identity_header"),
            "{path}: {}",
            answer.body
        );
    }
    let mut headers = twice.to_vec();
    headers.push(("content-type", "application/json".to_owned()));
    let answer = request(
        addr,
        Method::POST,
        &format!("/api/runs/{run}/cancel"),
        &headers,
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(answer.code(), "duplicate_identity_header");
    unchanged(&engine, run, 1).await;
    // An identity past the cap is refused too.
    let long = "a".repeat(workflow_server::auth::MAX_IDENTITY + 1);
    let answer = get(addr, "/api/runs", Some(&long)).await;
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (StatusCode::BAD_REQUEST, "identity_too_long")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_is_trusted_only_from_the_listed_proxies() {
    let (engine, _) = engine(false);
    let serve_with = |proxies: Vec<std::net::IpAddr>| {
        let server = workflow_server::Server::new(engine.clone())
            .authenticator(TrustedHeader::new().trusted_proxies(proxies))
            .permissions(Roles::new().grant(
                workflow_server::Principal::Identity(LEAD.into()),
                workflow_server::Role::Viewer,
                "*",
            ));
        async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(server.serve(listener));
            addr
        }
    };
    let trusted = serve_with(vec!["127.0.0.1".parse().unwrap()]).await;
    assert_eq!(
        get(trusted, "/api/runs", Some(LEAD)).await.status,
        StatusCode::OK
    );
    let elsewhere = serve_with(vec!["10.0.0.7".parse().unwrap()]).await;
    let answer = get(elsewhere, "/api/runs", Some(LEAD)).await;
    assert_eq!(
        (answer.status, answer.code().as_str()),
        (StatusCode::UNAUTHORIZED, "unauthenticated")
    );
    // Mounted without the peer address, nobody is trusted.
    let server = workflow_server::Server::new(engine.clone())
        .authenticator(TrustedHeader::new().trusted_proxies(["127.0.0.1".parse().unwrap()]));
    let bare = serve(server.router()).await;
    assert_eq!(
        get(bare, "/api/runs", Some(LEAD)).await.status,
        StatusCode::UNAUTHORIZED
    );
}

//! What the HTTP tests share: the workflows, an engine with them, a server on a loopback
//! port, and a small HTTP/1.1 client.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::TaskInfo;
use workflow_server::{Server, TrustedHeader, WebhookConfig};

/// The Standard Webhooks secret of the tests' sender.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// A support lead, admitted for `support_leads` by the default authorizer.
pub const LEAD: &str = "lee@support_leads";
/// Someone admitted for nothing.
pub const OUTSIDER: &str = "mallory@elsewhere";
/// An operator of Triage (with its payloads), not an approver.
pub const OPERATOR: &str = "ana@ops";
/// A viewer of Triage, not an approver.
pub const VIEWER: &str = "vic@audit";
/// An approver of Triage (admitted for `support_leads`) with no role.
pub const APPROVER: &str = "pat@support_leads";
/// An operator of Shipment only.
pub const OTHER_OPERATOR: &str = "oscar@shipping";

/// The roles of the tests: the lead operates everything (and approves Triage), the others
/// as named.
pub fn roles() -> workflow_server::Roles {
    workflow_server::Roles::parse(&format!(
        "{LEAD} operator:* payloads:*\n\
         {OPERATOR} operator:Triage payloads:Triage\n\
         {VIEWER} viewer:Triage\n\
         {OTHER_OPERATOR} operator:Shipment payloads:Shipment\n\
         {OPERATOR} operator:Nightly\n\
         {VIEWER} viewer:Nightly\n"
    ))
    .expect("the tests' roles parse")
}

/// A support ticket, as the helpdesk's webhook carries it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    pub ticket_id: String,
    pub text: String,
}

/// The helpdesk: counts the alerts it sends.
#[derive(Debug, Default, Clone)]
pub struct Desk {
    pub alerts: Arc<AtomicUsize>,
    pub broken: Arc<AtomicBool>,
}

pub mod desk {
    use super::*;

    pub async fn classify(ticket: Ticket) -> Result<bool, StepError> {
        Ok(ticket.text.to_lowercase().contains("locked out"))
    }

    pub async fn send_alert(env: &Desk, ticket: Ticket) -> Result<String, StepError> {
        if env.broken.load(Ordering::SeqCst) {
            return Err(StepError::permanent("the alert service refused the alert"));
        }
        let n = env.alerts.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(format!("alert-{n} for {}", ticket.ticket_id))
    }

    pub async fn report(tick: workflow_core::Tick) -> Result<u64, StepError> {
        Ok(tick.scheduled)
    }

    pub async fn record(order: String, shipped: Option<String>) -> Result<String, StepError> {
        Ok(format!("{order}: {}", shipped.unwrap_or_default()))
    }
}

workflow! {
    /// Triage a ticket; an urgent alert needs a lead's approval.
    pub workflow Triage(ticket: Ticket) env Desk {
        search: [ticket.ticket_id],
        step classify -> bool {
            action: desk::classify(ticket),
        }
        human approve_alert -> Approval {
            assignee: "support_leads",
            depends_on: [classify],
            timeout: 2h,
            on_timeout: escalate("on_call"),
            prompt: "Send the urgent alert? <script>alert('prompt')</script>",
        }
        step send_alert -> String {
            action: desk::send_alert(env, ticket),
            depends_on: [approve_alert],
            condition: approve_alert.approved,
        }
    }
}

workflow! {
    /// Waits for a shipment's confirmation.
    pub workflow Shipment(order: String) env Desk {
        event shipped -> String {
            timeout: 1h,
            on_timeout: continue,
        }
        step record -> String {
            action: desk::record(order, shipped),
        }
    }
}

workflow! {
    /// A nightly report, started by schedules.
    pub workflow Nightly(tick: workflow_core::Tick) env Desk {
        step report -> u64 {
            action: desk::report(tick),
        }
    }
}

/// The webhook body of a ticket, with a Stripe-style `id` too.
pub fn body(event_id: &str, ticket_id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id,
        "ticket_id": ticket_id,
        "text": text,
    }))
    .unwrap()
}

/// An engine with `Triage` registered.
pub fn engine(log_payloads: bool) -> (Engine, Desk) {
    engine_on(MemoryStore::new(), log_payloads)
}

pub fn engine_on(store: impl Store, log_payloads: bool) -> (Engine, Desk) {
    let engine = Engine::builder()
        .store(store)
        .log_payloads(log_payloads)
        .build();
    let desk = Desk::default();
    engine.register::<Triage>(desk.clone()).expect("registers");
    engine
        .register::<Shipment>(desk.clone())
        .expect("registers");
    engine.register::<Nightly>(desk.clone()).expect("registers");
    (engine, desk)
}

/// The server of the tests: the ticket webhook (Standard Webhooks), trusted-header auth.
pub fn server(engine: &Engine, config: WebhookConfig) -> Server {
    Server::new(engine.clone())
        .webhook::<Triage, Ticket>("/hooks/tickets", config, |ticket| TriageInput { ticket })
        .authenticator(TrustedHeader::new())
        .permissions(roles())
        .csrf_key([42; 32])
}

pub fn standard() -> WebhookConfig {
    WebhookConfig::standard(SECRET).unwrap().max_body(4096)
}

/// Serves `router` on a loopback port.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}

/// An answer.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    /// The stable code of an error answer.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {}", self.body))
            .to_owned()
    }
}

/// One request over a fresh loopback connection.
pub async fn request(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Answer {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (name, value) in headers {
        builder = builder.header(*name, value);
    }
    let request = builder.body(Full::new(Bytes::from(body))).unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(addr: SocketAddr, path: &str, who: Option<&str>) -> Answer {
    let headers: Vec<(&str, String)> = who
        .map(|who| ("x-forwarded-user", who.to_owned()))
        .into_iter()
        .collect();
    request(addr, Method::GET, path, &headers, Vec::new()).await
}

pub async fn post_json(
    addr: SocketAddr,
    path: &str,
    who: Option<&str>,
    body: serde_json::Value,
) -> Answer {
    let mut headers = vec![("content-type", "application/json".to_owned())];
    if let Some(who) = who {
        headers.push(("x-forwarded-user", who.to_owned()));
    }
    request(
        addr,
        Method::POST,
        path,
        &headers,
        body.to_string().into_bytes(),
    )
    .await
}

/// Delivers a webhook with the given headers.
pub async fn deliver(
    addr: SocketAddr,
    headers: &[(&'static str, String)],
    body: Vec<u8>,
) -> Answer {
    let mut all: Vec<(&str, String)> = vec![("content-type", "application/json".to_owned())];
    all.extend(headers.iter().map(|(n, v)| (*n, v.clone())));
    request(addr, Method::POST, "/hooks/tickets", &all, body).await
}

/// Now, in unix seconds, by the engine's clock.
pub fn now_secs(engine: &Engine) -> i64 {
    (engine.now() / 1000) as i64
}

/// Waits (bounded) until `run` has an open task `step`.
pub async fn wait_for_task(engine: &Engine, run: RunId, step: &str) -> TaskInfo {
    for _ in 0..500 {
        let tasks = workflow_core::admin::open_tasks(&**engine.store())
            .await
            .unwrap();
        if let Some(task) = tasks.into_iter().find(|t| t.run == run && t.step == step) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no open task {step} on {run} within 5 s");
}

/// Waits (bounded) until `run`'s status is `status`.
pub async fn wait_for_status(engine: &Engine, run: RunId, status: RunStatus) {
    for _ in 0..500 {
        let record = engine.inspect(run).await.unwrap().record;
        if record.status == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{run} did not become {} within 5 s", status.as_str());
}

pub async fn run_count(engine: &Engine) -> usize {
    engine.runs(Default::default()).await.unwrap().len()
}

pub fn run_id(answer: &Answer) -> RunId {
    answer.json()["run"].as_str().unwrap().parse().unwrap()
}

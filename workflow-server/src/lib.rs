//! The HTTP front door of typed workflows: verified webhook intake, a JSON API over the
//! engine, and a console and an approval inbox in the browser, as an axum [`Router`] you
//! mount in your own service.
//!
//! ```no_run
//! # use workflow_core::prelude::*;
//! # use workflow_server::{Roles, Server, TrustedHeader, WebhookConfig};
//! # workflow! { pub workflow Intake(ticket: String) env () {
//! #     step note -> String { action: note(ticket) }
//! # } }
//! # async fn note(t: String) -> Result<String, StepError> { Ok(t) }
//! # #[derive(serde::Deserialize)] struct Payload { text: String }
//! # async fn demo(engine: Engine) -> Result<(), Box<dyn std::error::Error>> {
//! let router = Server::new(engine)
//!     .webhook::<Intake, Payload>(
//!         "/hooks/tickets",
//!         WebhookConfig::standard("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?,
//!         |payload| IntakeInput { ticket: payload.text },
//!     )
//!     .authenticator(TrustedHeader::new())
//!     // Who may do what: ana operates Intake runs; everyone else sees only the runs
//!     // whose tasks the engine's authorizer admits them for.
//!     .permissions(Roles::parse("ana@ops operator:Intake payloads:Intake")?)
//!     .router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, router).await?;
//! # Ok(()) }
//! ```
//!
//! - [`intake`]: `POST <path>` per webhook: the signature is verified on the raw bytes
//!   before the body is parsed, the payload mapped to the workflow's input and the event id,
//!   scoped to the endpoint and workflow, used as the start's idempotency key.
//! - [`api`]: `/api/...`: runs, run detail, tasks, decisions, events, cancel, dead letters,
//!   diagrams; errors are [`ApiError`]s with stable codes.
//! - [`schedules`]: `/api/schedules/...`: schedules with their next fire times; create,
//!   pause, resume, trigger, backfill, delete; the ticks they missed.
//! - [`console`]: `/console/...`: every run in the browser: runs filtered and paged with
//!   bulk actions, a run on its spec's diagram with live step states, dead letters,
//!   schedules, flow control and workers, as HTML (the inbox is one of its pages).
//! - [`inbox`]: `/inbox/...`: the signed-in person's tasks and the run pages, as HTML.
//! - [`links`]: `/links/...`: signed single-use decision links, for approvals by email.
//! - [`auth`]: who is asking ([`Authenticator`]) and the forms' CSRF tokens.
//! - [`health`]: `/healthz` and `/readyz`, unauthenticated, for supervisors.
//! - [`headers`]: the security headers of every answer (no framing, no sniffing, no
//!   caching, no referrer).
//! - [`permissions`]: what they may do: one [`Caller`], one [`Action`], one policy
//!   ([`Permissions`], by default [`Roles`]) for every API route and inbox page.
//!
//! Every rule of run policy is the engine's: the server calls it and reports its answer.

#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod access;
pub mod api;
pub mod auth;
pub mod console;
mod error;
mod form;
pub mod headers;
pub mod health;
mod html;
pub mod inbox;
pub mod intake;
mod json;
pub mod links;
pub mod metrics;
pub mod permissions;
mod present;
pub mod schedules;
mod tasks;
mod view;

use std::fmt;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::Router;
use serde::de::DeserializeOwned;
use workflow_core::{Engine, Workflow};

pub use crate::auth::{
    check_identity, AuthError, Authenticator, Authenticators, BearerTokens, Csrf, Identity,
    TokenFile, TokenFileError, TrustedHeader,
};
pub use crate::error::ApiError;
pub use crate::intake::verify::{Scheme, SecretError, VerifyError, WebhookConfig};
pub use crate::links::{DecisionLink, DecisionLinks, LinkError, LinkVerdict};
pub use crate::permissions::{
    Action, Caller, Credential, Permissions, PolicyError, Principal, Role, Roles, Target, Verdict,
};
pub use crate::view::{AuditEntry, RunDetail, StepDetail, TimelineEntry};

/// Completes when the process is asked to stop: SIGTERM (what a supervisor or Kubernetes
/// sends) or SIGINT (Ctrl-C); on other platforms, Ctrl-C. For [`Server::serve_until`], or
/// for a worker that drains its engine itself.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the server");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Builds the router: the engine, the webhooks, who may sign in.
///
/// ```
/// use workflow_core::Engine;
/// use workflow_server::{Roles, Server, TrustedHeader};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let engine = Engine::builder().build();
/// let router = Server::new(engine)
///     // Behind a proxy that signs people in and names them in `X-Forwarded-User`.
///     .authenticator(TrustedHeader::new())
///     // ana operates every workflow and sees payloads; others see what the authorizer
///     // admits them for.
///     .permissions(Roles::parse("ana@ops operator:* payloads:*")?)
///     .router();
/// // Serve it with `axum::serve`, or `Server::serve` / `Server::serve_until`.
/// # let _ = router;
/// # Ok(()) }
/// ```
pub struct Server {
    engine: Engine,
    authenticator: Option<Arc<dyn Authenticator>>,
    permissions: Arc<dyn Permissions>,
    origins: Vec<String>,
    csrf: Option<Csrf>,
    base: String,
    show_payloads: Option<bool>,
    webhooks: Vec<intake::Route>,
    metrics: Option<metrics::PrometheusHandle>,
    links: Option<DecisionLinks>,
    enqueue_starts: Option<bool>,
    trace_url: Option<String>,
    evidence_dir: Option<std::path::PathBuf>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("engine", &self.engine)
            .field("authenticator", &self.authenticator.is_some())
            .field("origins", &self.origins)
            .field("base", &self.base)
            .field("webhooks", &self.webhooks.len())
            .finish_non_exhaustive()
    }
}

/// What every handler shares.
pub(crate) struct App {
    pub(crate) engine: Engine,
    pub(crate) authenticator: Option<Arc<dyn Authenticator>>,
    pub(crate) permissions: Arc<dyn Permissions>,
    pub(crate) origins: Vec<String>,
    pub(crate) csrf: Csrf,
    pub(crate) base: String,
    pub(crate) show_payloads: bool,
    pub(crate) metrics: Option<metrics::PrometheusHandle>,
    pub(crate) links: Option<DecisionLinks>,
    /// Whether starts (the API's and webhooks') are queued for workers.
    pub(crate) enqueue_starts: bool,
    /// The link of a trace id on the console's run pages: a URL with `{trace_id}`.
    pub(crate) trace_url: Option<String>,
    /// The browser steps' artifacts directory the console serves evidence from.
    pub(crate) evidence_dir: Option<std::path::PathBuf>,
}

pub(crate) type Shared = Arc<App>;

impl Server {
    /// A server over `engine`, with no webhooks and no authenticator (the API and the
    /// inbox answer 401 until one is set), and [`Roles`] granting nothing (only approvers
    /// see the runs of their tasks until [`Server::permissions`] grants more).
    pub fn new(engine: Engine) -> Self {
        Server {
            engine,
            authenticator: None,
            permissions: Arc::new(Roles::new()),
            origins: Vec::new(),
            csrf: None,
            base: String::new(),
            show_payloads: None,
            webhooks: Vec::new(),
            metrics: None,
            links: None,
            enqueue_starts: None,
            trace_url: None,
            evidence_dir: None,
        }
    }

    /// Serves the evidence of failed browser steps (their screenshots and pages' HTML) on
    /// the console's run pages from `dir`, the artifacts directory the steps' browser
    /// writes to (`<dir>/run-<id>/<step>/attempt-<n>/`), to callers who may see the run's
    /// payloads. Only files of that layout, named in a failed attempt's message, are
    /// linked; a page's HTML is served as text, never rendered.
    pub fn evidence_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.evidence_dir = Some(dir.into());
        self
    }

    /// Links a run's trace id on the console's run page through `template`, a URL in which
    /// `{trace_id}` stands for the id (32 hex digits), such as
    /// `https://grafana.example.com/explore?traceId={trace_id}` or
    /// `http://jaeger:16686/trace/{trace_id}`. Without one the id shows as text.
    pub fn trace_url(mut self, template: &str) -> Self {
        self.trace_url = Some(template.to_owned());
        self
    }

    /// Serves signed decision links (`/links/{token}`, see [`links`]) made with `links`'
    /// key: whoever holds one decides its task as its identity, once, until it expires.
    pub fn decision_links(mut self, links: DecisionLinks) -> Self {
        self.links = Some(links);
        self
    }

    /// Serves `GET /metrics` from `handle` (see [`metrics::install_recorder`]): the
    /// engine's metrics in Prometheus' text format, its gauges read from the store before
    /// each scrape, for callers the permission policy grants [`Action::ViewMetrics`].
    pub fn metrics(mut self, handle: metrics::PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }

    /// Who is asking, for the API and the inbox (webhooks are verified by signature).
    pub fn authenticator(mut self, authenticator: impl Authenticator) -> Self {
        self.authenticator = Some(Arc::new(authenticator));
        self
    }

    /// The permission policy of every API route and inbox page (default: [`Roles`] with
    /// no grants).
    pub fn permissions(mut self, permissions: impl Permissions) -> Self {
        self.permissions = Arc::new(permissions);
        self
    }

    /// An origin (`https://ops.example.com`) other than the request's own `Host` from
    /// which browsers may change state, for a proxy that rewrites `Host`.
    pub fn allowed_origin(mut self, origin: &str) -> Self {
        self.origins.push(origin.trim_end_matches('/').to_owned());
        self
    }

    /// The key of the forms' CSRF tokens (default: random per process, so forms made
    /// before a restart, or by another replica, stop verifying; set one to share).
    pub fn csrf_key(mut self, key: [u8; 32]) -> Self {
        self.csrf = Some(Csrf::new(key));
        self
    }

    /// The path the router is mounted under (`/workflow` for
    /// `Router::new().nest("/workflow", server.router())`), for the inbox's links.
    pub fn base_path(mut self, base: &str) -> Self {
        self.base = base.trim_end_matches('/').to_owned();
        self
    }

    /// Whether `POST /api/runs` and the webhooks queue their runs for workers
    /// ([`Engine::enqueue`]) instead of starting them in this process (default: whether
    /// the engine is intake-only, [`Engine::is_intake_only`]). The answers are the same,
    /// `201` with the run; the run is driven by whichever worker admits it.
    pub fn enqueue_starts(mut self, enqueue: bool) -> Self {
        self.enqueue_starts = Some(enqueue);
        self
    }

    /// Whether the inbox and the console show runs' inputs and outputs (a task's inputs and
    /// upstream outputs, a run's inputs and its steps' outputs) to callers the policy lets
    /// see them (default: whether the engine logs payloads, [`Engine::logs_payloads`]);
    /// otherwise they are redacted.
    pub fn show_payloads(mut self, show: bool) -> Self {
        self.show_payloads = Some(show);
        self
    }

    /// A webhook endpoint starting runs of `W`: `POST path` is verified with `config` on
    /// its raw bytes, then its body is parsed as `P` (a 422 if it does not parse), mapped to
    /// `W`'s input with `map`, and started with the delivery's event id as idempotency key
    /// (scoped to `path` and `W`, [`intake::scoped_key`]), so a redelivery answers 200 with
    /// the run the first one started, and the same id with other inputs 409
    /// `idempotency_conflict`. `path` holds no whitespace.
    pub fn webhook<W, P>(
        mut self,
        path: &str,
        config: WebhookConfig,
        map: impl Fn(P) -> W::Input + Send + Sync + 'static,
    ) -> Self
    where
        W: Workflow,
        P: DeserializeOwned + 'static,
    {
        self.webhooks
            .push(intake::Route::new::<W, P>(path, config, map));
        self
    }

    /// Serves [`Server::router`] on `listener` until the process ends (what `workflow
    /// serve` does), with each connection's peer address for
    /// [`TrustedHeader::trusted_proxies`].
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let service = self
            .router()
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        axum::serve(listener, service).await
    }

    /// Serves [`Server::router`] on `listener` until `stop` completes (for instance
    /// [`shutdown_signal`]: SIGTERM or SIGINT), then leaves gracefully: the engine drains
    /// (`Engine::drain` with `drain` as its deadline: `/readyz` answers 503 `draining` at
    /// once, the runs it drives are handed over to other workers as their attempts
    /// finish), then the requests in flight are answered and the server returns.
    pub async fn serve_until(
        self,
        listener: tokio::net::TcpListener,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
        drain: std::time::Duration,
    ) -> std::io::Result<()> {
        let engine = self.engine.clone();
        let service = self
            .router()
            .into_make_service_with_connect_info::<std::net::SocketAddr>();
        axum::serve(listener, service)
            .with_graceful_shutdown(async move {
                stop.await;
                tracing::info!("stopping: draining the engine, then the server");
                let drained = engine.drain(drain).await;
                tracing::info!(
                    handed_over = drained.handed_over.len(),
                    stopped = drained.stopped.len(),
                    "the engine drained"
                );
            })
            .await
    }

    /// The router: the webhooks, `/api/...`, `/console/...` and `/inbox/...`.
    ///
    /// # Panics
    ///
    /// Only when no CSRF key was set and the system's random source fails.
    pub fn router(self) -> Router {
        let csrf = match self.csrf {
            Some(csrf) => csrf,
            None => match Csrf::random() {
                Ok(csrf) => csrf,
                Err(error) => panic!("no random CSRF key: {error}; set one with csrf_key"),
            },
        };
        let show_payloads = self
            .show_payloads
            .unwrap_or_else(|| self.engine.logs_payloads());
        let enqueue_starts = self
            .enqueue_starts
            .unwrap_or_else(|| self.engine.is_intake_only());
        let app = Arc::new(App {
            engine: self.engine,
            authenticator: self.authenticator,
            permissions: self.permissions,
            origins: self.origins,
            csrf,
            base: self.base,
            show_payloads,
            metrics: self.metrics,
            links: self.links,
            enqueue_starts,
            trace_url: self.trace_url,
            evidence_dir: self.evidence_dir,
        });
        let mut router = Router::new()
            .merge(api::routes())
            .merge(inbox::routes())
            .merge(console::routes())
            .merge(metrics::routes())
            .merge(health::routes())
            .merge(links::routes())
            .merge(schedules::routes());
        for webhook in self.webhooks {
            router = webhook.mount(router);
        }
        router
            .fallback(error::no_route)
            .method_not_allowed_fallback(error::no_method)
            .with_state(app)
            .layer(axum::middleware::map_response(headers::secure))
    }
}

/// The caller of an API request ([`access::caller`]); a state change must also be sent as
/// JSON unless a bearer token signs it ([`access::json_required`]).
#[derive(Debug, Clone)]
pub(crate) struct ApiCaller(pub(crate) Caller);

impl FromRequestParts<Shared> for ApiCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, ApiError> {
        let caller = access::caller(parts, app)?;
        access::json_required(parts, &caller)?;
        Ok(ApiCaller(caller))
    }
}

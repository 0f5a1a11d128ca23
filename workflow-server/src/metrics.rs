//! `GET /metrics`: the engine's metrics in Prometheus' text format, for a scraper.
//!
//! The application installs the Prometheus recorder once ([`install_recorder`]) and gives
//! its handle to [`Server::metrics`](crate::Server::metrics). Before each scrape the
//! engine's gauges are read from the store ([`Engine::record_gauges`]). The route is
//! checked like the API: a caller needs [`Action::ViewMetrics`] on every workflow (the
//! default [`Roles`](crate::Roles) grant it to `viewer:*` and `operator:*`).
//!
//! [`Engine::record_gauges`]: workflow_core::Engine::record_gauges

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
pub use metrics_exporter_prometheus::PrometheusHandle;

use crate::error::ApiError;
use crate::permissions::Action;
use crate::Shared;

/// Why the recorder could not be installed.
#[derive(Debug, thiserror::Error)]
#[error("cannot install the Prometheus recorder: {0}")]
pub struct InstallError(String);

/// Installs the Prometheus recorder as the process's metrics recorder and describes the
/// engine's metrics (`# HELP` lines). Call it once, before the engine runs; keep the
/// handle for [`Server::metrics`](crate::Server::metrics).
pub fn install_recorder() -> Result<PrometheusHandle, InstallError> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| InstallError(e.to_string()))?;
    workflow_core::telemetry::describe();
    Ok(handle)
}

pub(crate) fn routes() -> Router<Shared> {
    Router::new().route("/metrics", get(scrape))
}

/// The caller of `/metrics`: a GET, so no JSON body is asked for.
struct MetricsCaller(crate::Caller);

impl FromRequestParts<Shared> for MetricsCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &Shared) -> Result<Self, ApiError> {
        crate::access::caller(parts, app).map(MetricsCaller)
    }
}

async fn scrape(
    State(app): State<Shared>,
    MetricsCaller(caller): MetricsCaller,
) -> Result<Response, ApiError> {
    app.require(&caller, Action::ViewMetrics, "*", false)
        .await?;
    let Some(handle) = &app.metrics else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no_metrics",
            "this server exports no metrics (Server::metrics was not given a handle)",
        ));
    };
    if let Err(error) = app.engine.record_gauges().await {
        tracing::warn!(%error, "cannot read the gauges from the store");
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response())
}

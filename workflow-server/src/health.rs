//! `GET /healthz` and `GET /readyz`, for a supervisor or a load balancer: unauthenticated,
//! and saying nothing but whether the process lives and whether it is ready.
//!
//! - `/healthz`: 200 `ok` while the process answers at all.
//! - `/readyz`: 200 `ready` when the store answers a read within [`READY_WITHIN`] and
//!   the engine does not drain; 503 `not ready` otherwise (the store is down or slow),
//!   503 `draining` once the engine drains (`Engine::drain`), so a balancer stops sending
//!   traffic here.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use workflow_core::store::RunFilter;

use crate::Shared;

/// How long `/readyz` waits for the store.
pub const READY_WITHIN: Duration = Duration::from_secs(2);

pub(crate) fn routes() -> Router<Shared> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(app): State<Shared>) -> (StatusCode, &'static str) {
    if app.engine.is_draining() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining");
    }
    let probe = app.engine.store().runs(RunFilter {
        limit: Some(1),
        ..RunFilter::default()
    });
    match tokio::time::timeout(READY_WITHIN, probe).await {
        Ok(Ok(_)) => (StatusCode::OK, "ready"),
        Ok(Err(error)) => {
            tracing::warn!(%error, "not ready: the store does not answer");
            (StatusCode::SERVICE_UNAVAILABLE, "not ready")
        }
        Err(_) => {
            tracing::warn!("not ready: the store did not answer within {READY_WITHIN:?}");
            (StatusCode::SERVICE_UNAVAILABLE, "not ready")
        }
    }
}

//! Webhook intake: `POST <path>` per webhook. In order, and nothing is journaled until the
//! last step:
//!
//! 1. the body is read as bytes, up to the endpoint's limit (413 `body_too_large` past it);
//! 2. the signature is verified on those bytes ([`verify`]; 401 `missing_signature`,
//!    `malformed_signature`, `bad_signature` or `stale_timestamp`);
//! 3. only then is the body parsed, as the endpoint's payload type (422
//!    `invalid_payload`), and its event id found (400 `missing_event_id`);
//! 4. the payload is mapped to the workflow's input and the run started with the event id
//!    as idempotency key: 201 `{"run": "run-1", "created": true}` for a new run, 200 with
//!    the same run and `"created": false` for a redelivery.

pub mod verify;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use workflow_core::{StartOptions, Workflow};

use self::verify::{Scheme, WebhookConfig};
use crate::error::ApiError;
use crate::Shared;

/// Maps a verified, parsed payload to a workflow's input, as JSON.
type Mapper = dyn Fn(&Value) -> Result<Value, String> + Send + Sync;

/// One webhook endpoint.
pub(crate) struct Route {
    path: String,
    intake: Arc<Intake>,
}

struct Intake {
    config: WebhookConfig,
    workflow: &'static str,
    map: Box<Mapper>,
}

impl Route {
    pub(crate) fn new<W, P>(
        path: &str,
        config: WebhookConfig,
        map: impl Fn(P) -> W::Input + Send + Sync + 'static,
    ) -> Self
    where
        W: Workflow,
        P: DeserializeOwned + 'static,
    {
        let map = move |payload: &Value| -> Result<Value, String> {
            let parsed = P::deserialize(payload).map_err(|error| error.to_string())?;
            serde_json::to_value(map(parsed)).map_err(|error| error.to_string())
        };
        Route {
            path: path.to_owned(),
            intake: Arc::new(Intake {
                config,
                workflow: W::NAME,
                map: Box::new(map),
            }),
        }
    }

    pub(crate) fn mount(self, router: Router<Shared>) -> Router<Shared> {
        let limit = self.intake.config.body_limit();
        let intake = self.intake;
        let handler = move |State(app): State<Shared>,
                            headers: HeaderMap,
                            body: Result<Bytes, BytesRejection>| {
            let intake = Arc::clone(&intake);
            async move { intake.receive(&app, &headers, body).await }
        };
        router.route(
            &self.path,
            post(handler).layer(DefaultBodyLimit::max(limit)),
        )
    }
}

impl Intake {
    async fn receive(
        &self,
        app: &Shared,
        headers: &HeaderMap,
        body: Result<Bytes, BytesRejection>,
    ) -> Result<(StatusCode, Json<Value>), ApiError> {
        let body = body.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large(self.config.body_limit())
            } else {
                ApiError::bad_request(rejection.body_text())
            }
        })?;
        let now = i64::try_from(app.engine.now() / 1000).unwrap_or(i64::MAX);
        let header_id = self.config.verify(headers, &body, now).map_err(|error| {
            tracing::warn!(
                workflow = self.workflow,
                code = error.code(),
                "webhook refused"
            );
            ApiError::from(error)
        })?;
        // Verified: now, and only now, the body is parsed.
        let payload: Value = serde_json::from_slice(&body)
            .map_err(|error| ApiError::invalid_payload(format!("the body is not JSON: {error}")))?;
        let event_id = match self.config.scheme() {
            Scheme::Stripe => payload
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| ApiError::invalid_payload("the Stripe event has no string `id`"))?,
            _ => header_id.ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "missing_event_id",
                    "the delivery carries no event id header",
                )
            })?,
        };
        let input = (self.map)(&payload).map_err(|error| {
            ApiError::invalid_payload(format!(
                "the payload does not match what `{}` takes: {error}",
                self.workflow
            ))
        })?;
        let (run, created) = app
            .engine
            .start_json(self.workflow, input, StartOptions::key(event_id.clone()))
            .await?;
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok((
            status,
            Json(json!({ "run": run.to_string(), "created": created, "event_id": event_id })),
        ))
    }
}

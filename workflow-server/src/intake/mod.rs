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
use axum::Router;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use workflow_core::{Engine, RunError, RunId, StartOptions, Workflow};

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

use self::verify::{Scheme, WebhookConfig};
use crate::error::ApiError;
use crate::json::Json;
use crate::Shared;

/// What a start returns: the run, and whether this start created it.
type Started = BoxFuture<'static, Result<(RunId, bool), RunError>>;

/// Parses a verified body as the endpoint's payload type, maps it to the workflow's input
/// and returns the start (keyed by the event id) to await; `Err` when it does not parse.
type Starter = dyn Fn(&Engine, &[u8], String) -> Result<Started, String> + Send + Sync;

/// The id of a Stripe event, from its payload.
#[derive(serde::Deserialize)]
struct StripeEvent {
    id: String,
}

/// One webhook endpoint.
pub(crate) struct Route {
    path: String,
    intake: Arc<Intake>,
}

struct Intake {
    config: WebhookConfig,
    workflow: &'static str,
    start: Box<Starter>,
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
        let start = move |engine: &Engine, body: &[u8], key: String| -> Result<Started, String> {
            let payload: P = serde_json::from_slice(body).map_err(|error| error.to_string())?;
            let input = map(payload);
            let engine = engine.clone();
            Ok(Box::pin(async move {
                let run = engine
                    .start_with::<W>(input, StartOptions::key(key))
                    .await?;
                Ok((run.id(), run.was_created()))
            }))
        };
        Route {
            path: path.to_owned(),
            intake: Arc::new(Intake {
                config,
                workflow: W::NAME,
                start: Box::new(start),
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
        let event_id = match self.config.scheme() {
            Scheme::Stripe => serde_json::from_slice::<StripeEvent>(&body)
                .map(|event| event.id)
                .map_err(|error| {
                    ApiError::invalid_payload(format!("not a Stripe event with an `id`: {error}"))
                })?,
            _ => header_id.ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "missing_event_id",
                    "the delivery carries no event id header",
                )
            })?,
        };
        let start = (self.start)(&app.engine, &body, event_id.clone()).map_err(|error| {
            ApiError::invalid_payload(format!(
                "the payload is not what `{}` takes: {error}",
                self.workflow
            ))
        })?;
        let (run, created) = start.await?;
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

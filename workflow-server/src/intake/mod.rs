//! Webhook intake: `POST <path>` per webhook. In order, and nothing is journaled until the
//! last step:
//!
//! 1. the body is read as bytes, up to the endpoint's limit (413 `body_too_large` past it);
//! 2. the signature is verified on those bytes ([`verify`]; 401 `missing_signature`,
//!    `malformed_signature`, `bad_signature` or `stale_timestamp`);
//! 3. only then is the body parsed, as the endpoint's payload type (422
//!    `invalid_payload`), and its event id found (400 `missing_event_id` without one, for
//!    Stripe a payload without a string `id`; 400 `event_id_too_long` past
//!    [`MAX_EVENT_ID`] bytes);
//! 4. the payload is mapped to the workflow's input and the run started with an
//!    idempotency key scoped to this endpoint and workflow ([`scoped_key`]), so one source's
//!    ids can neither collide with nor pre-claim another's: 201 `{"run": "run-1",
//!    "created": true}` for a new run, 200 with the same run and `"created": false` for a
//!    redelivery, and 409 `idempotency_conflict` naming the run when the same event id
//!    comes with a body that maps to other inputs.

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
use workflow_core::journal::Event;
use workflow_core::trace::TraceParent;
use workflow_core::{Engine, RunError, RunId, StartOptions, Workflow};

type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

use self::verify::{Scheme, WebhookConfig};
use crate::error::ApiError;
use crate::json::Json;
use crate::Shared;

/// What a start returns: the run, whether this start created it, and its inputs as
/// journaled.
type Started = BoxFuture<'static, Result<(RunId, bool, Value), RunError>>;

/// Parses a verified body as the endpoint's payload type, maps it to the workflow's input
/// and returns the start (with the given options) to await; `Err` when it does not parse.
/// With `true` (the server's `enqueue_starts`) the run is queued for a worker instead of
/// started here.
type Starter = dyn Fn(&Engine, &[u8], StartOptions, bool) -> Result<Started, String> + Send + Sync;

/// The longest event id (or API idempotency key) accepted, in bytes.
pub const MAX_EVENT_ID: usize = 256;

/// The idempotency key a start through `intake` (`webhook /hooks/tickets`, `api`) of
/// `workflow` is made with for the caller's `id`: `"{intake} {workflow} {id}"`. Neither the
/// intake nor the workflow name holds a space, so distinct triples never make one key.
pub fn scoped_key(intake: &str, workflow: &str, id: &str) -> String {
    format!("{intake} {workflow} {id}")
}

/// The trace a start continues: the request's W3C `traceparent` header, when it has a
/// valid one. An invalid one is ignored (the run starts a trace of its own), not refused.
pub(crate) fn traceparent(headers: &HeaderMap) -> Option<TraceParent> {
    let value = headers.get("traceparent")?;
    let parsed = value.to_str().ok().and_then(TraceParent::parse);
    if parsed.is_none() {
        tracing::debug!("ignored an invalid traceparent header");
    }
    parsed
}

/// 400 `event_id_too_long` past [`MAX_EVENT_ID`].
pub(crate) fn check_event_id(id: &str, code: &'static str) -> Result<(), ApiError> {
    if id.len() > MAX_EVENT_ID {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            code,
            format!(
                "the id is {} bytes long; at most {MAX_EVENT_ID} are accepted",
                id.len()
            ),
        ));
    }
    Ok(())
}

/// After a start that found its key used: 409 `idempotency_conflict` unless the run the key
/// names was started with the same inputs.
pub(crate) async fn same_start(
    engine: &Engine,
    run: RunId,
    id: &str,
    input: &Value,
) -> Result<(), ApiError> {
    let events = engine.events(run).await?;
    let same =
        matches!(events.first(), Some(Event::RunStarted { input: first, .. }) if first == input);
    if same {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::CONFLICT,
            "idempotency_conflict",
            format!("`{id}` already started {run}, with other inputs"),
        ))
    }
}

/// The id of a Stripe event, from its payload.
#[derive(serde::Deserialize)]
struct StripeEvent {
    id: Option<Value>,
}

/// One webhook endpoint.
pub(crate) struct Route {
    path: String,
    intake: Arc<Intake>,
}

struct Intake {
    path: String,
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
        // A delivery has no person behind it: the run's initiator is the intake.
        let initiator = format!("webhook {path}");
        let start = move |engine: &Engine,
                          body: &[u8],
                          options: StartOptions,
                          enqueue: bool|
              -> Result<Started, String> {
            let payload: P = serde_json::from_slice(body).map_err(|error| error.to_string())?;
            let input = map(payload);
            let value = serde_json::to_value(&input).map_err(|error| error.to_string())?;
            let engine = engine.clone();
            let options = options.initiator(initiator.clone());
            Ok(Box::pin(async move {
                let run = if enqueue {
                    engine.enqueue::<W>(input, options).await?
                } else {
                    engine.start_with::<W>(input, options).await?
                };
                Ok((run.id(), run.was_created(), value))
            }))
        };
        Route {
            path: path.to_owned(),
            intake: Arc::new(Intake {
                path: path.to_owned(),
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
        let missing = |why: &str| ApiError::new(StatusCode::BAD_REQUEST, "missing_event_id", why);
        let event_id = match self.config.scheme() {
            Scheme::Stripe => {
                let event = serde_json::from_slice::<StripeEvent>(&body).map_err(|error| {
                    ApiError::invalid_payload(format!("not a Stripe event: {error}"))
                })?;
                match event.id {
                    Some(Value::String(id)) if !id.is_empty() => id,
                    _ => return Err(missing("the Stripe event has no string `id`")),
                }
            }
            _ => header_id
                .filter(|id| !id.is_empty())
                .ok_or_else(|| missing("the delivery carries no event id header"))?,
        };
        check_event_id(&event_id, "event_id_too_long")?;
        let key = scoped_key(&format!("webhook {}", self.path), self.workflow, &event_id);
        let options = StartOptions {
            traceparent: traceparent(headers),
            ..StartOptions::key(key)
        };
        let start =
            (self.start)(&app.engine, &body, options, app.enqueue_starts).map_err(|error| {
                ApiError::invalid_payload(format!(
                    "the payload is not what `{}` takes: {error}",
                    self.workflow
                ))
            })?;
        let (run, created, input) = start.await?;
        if !created {
            same_start(&app.engine, run, &event_id, &input).await?;
        }
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

//! JSON in and out, without axum's `json` feature (which turns on serde_json's
//! `raw_value` for every crate in the build): [`Json`] answers with a JSON body, and as an
//! extractor reads one, refusing with an [`ApiError`] (`invalid_json`).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::ApiError;

/// A JSON body: an answer, or a request's body parsed as `T`.
#[derive(Debug, Clone)]
pub(crate) struct Json<T>(pub(crate) T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(bytes) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                bytes,
            )
                .into_response(),
            Err(error) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot encode the answer: {error}"),
            )
                .into_response(),
        }
    }
}

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| {
                let essence = value.split(';').next().unwrap_or("").trim();
                let essence = essence.to_ascii_lowercase();
                essence == "application/json" || essence.ends_with("+json")
            });
        if !is_json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid_json",
                "send the body as `content-type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                let code = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    "body_too_large"
                } else {
                    "invalid_json"
                };
                ApiError::new(rejection.status(), code, rejection.body_text())
            })?;
        serde_json::from_slice(&bytes).map(Json).map_err(|error| {
            let status = if error.is_data() {
                StatusCode::UNPROCESSABLE_ENTITY
            } else {
                StatusCode::BAD_REQUEST
            };
            ApiError::new(status, "invalid_json", error.to_string())
        })
    }
}

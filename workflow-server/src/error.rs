//! Errors as the API answers them: a status and `{ "error": { "code", "message" } }`, with
//! a stable snake-case code mapped from the engine's typed errors.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use workflow_core::store::StoreError;
use workflow_core::{DecisionError, EventError, RunError};

use crate::auth::AuthError;
use crate::intake::verify::VerifyError;
use crate::json::Json;

/// An error answer of the JSON API and the webhook intake.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code.
    pub code: &'static str,
    /// What happened, in words.
    pub message: String,
}

impl ApiError {
    /// An error with a status, a code and a message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 401 `unauthenticated`.
    pub fn unauthenticated() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthenticated",
            "sign in first: no identity in the request",
        )
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 422 `invalid_payload`.
    pub fn invalid_payload(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_payload", message)
    }

    /// 413 `body_too_large`.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the body is larger than the {limit} bytes accepted"),
        )
    }
}

/// The answer for a path no route serves: 404 `not_found`, as JSON.
pub(crate) async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no such path: {}", uri.path()))
}

/// The answer for a method a path does not take: 405 `method_not_allowed`, as JSON.
pub(crate) async fn no_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {method}", uri.path()),
    )
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, Json(body)).into_response()
    }
}

impl From<VerifyError> for ApiError {
    fn from(error: VerifyError) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, error.code(), error.to_string())
    }
}

impl From<AuthError> for ApiError {
    fn from(error: AuthError) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, error.code(), error.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store", error.to_string())
    }
}

impl From<RunError> for ApiError {
    fn from(error: RunError) -> Self {
        use StatusCode as S;
        let (status, code) = match &error {
            RunError::UnknownRun(_) => (S::NOT_FOUND, "unknown_run"),
            RunError::NotRegistered(_) => (S::NOT_FOUND, "unknown_workflow"),
            RunError::WrongWorkflow { .. } => (S::CONFLICT, "wrong_workflow"),
            RunError::Decode { .. } => (S::UNPROCESSABLE_ENTITY, "invalid_input"),
            RunError::Finished(_)
            | RunError::Failed { .. }
            | RunError::Cancelled(_)
            | RunError::DeadlineExceeded(_)
            | RunError::Absent { .. } => (S::CONFLICT, "finished"),
            RunError::NotFailed(_) => (S::CONFLICT, "not_failed"),
            RunError::NotParked(_) => (S::CONFLICT, "not_parked"),
            RunError::TooSoon { .. } => (S::CONFLICT, "too_soon"),
            RunError::SpecChanged { .. } => (S::CONFLICT, "spec_changed"),
            RunError::Store(_) | RunError::EngineStopped(_) => (S::SERVICE_UNAVAILABLE, "store"),
            _ => (S::INTERNAL_SERVER_ERROR, "internal"),
        };
        ApiError::new(status, code, error.to_string())
    }
}

impl From<DecisionError> for ApiError {
    fn from(error: DecisionError) -> Self {
        use StatusCode as S;
        let status = match &error {
            DecisionError::UnknownRun(_) | DecisionError::UnknownTask { .. } => S::NOT_FOUND,
            DecisionError::Unauthorized { .. }
            | DecisionError::SelfApproval { .. }
            | DecisionError::ApproverDelegating { .. } => S::FORBIDDEN,
            DecisionError::InvalidDelegate { .. }
            | DecisionError::DelegateNotAdmitted { .. }
            | DecisionError::DelegateApproved { .. }
            | DecisionError::DelegateIsInitiator { .. } => S::UNPROCESSABLE_ENTITY,
            DecisionError::AlreadyDecided { .. }
            | DecisionError::AlreadyApproved { .. }
            | DecisionError::Expired { .. }
            | DecisionError::Finished(_) => S::CONFLICT,
            DecisionError::WrongType { .. } => S::UNPROCESSABLE_ENTITY,
            DecisionError::Store(_) => S::SERVICE_UNAVAILABLE,
            _ => S::INTERNAL_SERVER_ERROR,
        };
        let code = match &error {
            DecisionError::Unauthorized { .. } => "not_admitted",
            other => other.code(),
        };
        ApiError::new(status, code, error.to_string())
    }
}

impl From<EventError> for ApiError {
    fn from(error: EventError) -> Self {
        use StatusCode as S;
        let status = match &error {
            EventError::UnknownRun(_) | EventError::UnknownEvent { .. } => S::NOT_FOUND,
            EventError::WrongType { .. } => S::UNPROCESSABLE_ENTITY,
            EventError::Duplicate { .. }
            | EventError::NotWaiting { .. }
            | EventError::Finished(_) => S::CONFLICT,
            EventError::Store(_) => S::SERVICE_UNAVAILABLE,
            _ => S::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, error.code(), error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_core::RunId;

    #[test]
    fn engine_errors_map_to_statuses_and_stable_codes() {
        let run = RunId(7);
        let cases: Vec<(ApiError, StatusCode, &str)> = vec![
            (
                RunError::UnknownRun(run).into(),
                StatusCode::NOT_FOUND,
                "unknown_run",
            ),
            (
                RunError::NotFailed(run).into(),
                StatusCode::CONFLICT,
                "not_failed",
            ),
            (
                DecisionError::AlreadyDecided {
                    run,
                    step: "s".into(),
                    by: "a".into(),
                }
                .into(),
                StatusCode::CONFLICT,
                "already_decided",
            ),
            (
                DecisionError::Expired {
                    run,
                    step: "s".into(),
                }
                .into(),
                StatusCode::CONFLICT,
                "expired",
            ),
            (
                DecisionError::Unauthorized {
                    step: "s".into(),
                    by: "b".into(),
                    assignee: "a".into(),
                }
                .into(),
                StatusCode::FORBIDDEN,
                "not_admitted",
            ),
            (
                EventError::NotWaiting {
                    run,
                    step: "s".into(),
                    reason: "r".into(),
                }
                .into(),
                StatusCode::CONFLICT,
                "not_waiting",
            ),
            (
                VerifyError::BadSignature.into(),
                StatusCode::UNAUTHORIZED,
                "bad_signature",
            ),
        ];
        for (error, status, code) in cases {
            assert_eq!((error.status, error.code), (status, code), "{error}");
        }
    }
}

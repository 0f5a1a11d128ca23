//! The bounded classification of step errors.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What kind of failure a step error is. The set is closed, so it can label metrics
/// (`error_type`) and drive retry decisions without matching on strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The attempt ran out of time (transient).
    Timeout,
    /// The dependency asked us to slow down, maybe with a retry-after (transient).
    RateLimited,
    /// The dependency is temporarily unavailable: connection errors, 5xx (transient).
    Unavailable,
    /// The input or output broke its contract: schema violations, bad data (permanent).
    Validation,
    /// The caller is not allowed to do this (permanent).
    Unauthorized,
    /// The thing acted on does not exist (permanent unless listed in `retry_on`).
    NotFound,
    /// The request is unsafe and must not be carried out automatically (permanent).
    Unsafe,
    /// Anything else: a bug or an unclassified failure (permanent unless listed in `retry_on`).
    Internal,
    /// An external effect was interrupted (a crash) and cannot be repeated safely: it is
    /// neither idempotent nor reconciled, so whether it happened is unknown and a person
    /// must decide (never retried).
    OutcomeUnknown,
    /// The run was cancelled while the attempt ran, and the attempt was stopped: at once
    /// for an internal step, after the cancel's grace period for an external effect that
    /// is idempotent or whose reconcile function found it had not happened (never retried).
    Cancelled,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::Timeout,
        ErrorKind::RateLimited,
        ErrorKind::Unavailable,
        ErrorKind::Validation,
        ErrorKind::Unauthorized,
        ErrorKind::NotFound,
        ErrorKind::Unsafe,
        ErrorKind::Internal,
        ErrorKind::OutcomeUnknown,
        ErrorKind::Cancelled,
    ];

    /// The kinds retried when a policy names no `retry_on`.
    pub const TRANSIENT: [ErrorKind; 3] = [
        ErrorKind::Timeout,
        ErrorKind::RateLimited,
        ErrorKind::Unavailable,
    ];

    /// The snake_case name used in specs, metrics and the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Validation => "validation",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Unsafe => "unsafe",
            ErrorKind::Internal => "internal",
            ErrorKind::OutcomeUnknown => "outcome_unknown",
            ErrorKind::Cancelled => "cancelled",
        }
    }

    /// Whether the kind is transient by default (retried without `retry_on`).
    pub fn is_transient(self) -> bool {
        Self::TRANSIENT.contains(&self)
    }

    /// Whether the kind may never be retried, whatever `retry_on` says: retrying a
    /// validation, authorization or safety failure repeats the risk and the cost.
    pub fn is_never_retried(self) -> bool {
        matches!(
            self,
            ErrorKind::Validation
                | ErrorKind::Unauthorized
                | ErrorKind::Unsafe
                | ErrorKind::OutcomeUnknown
                | ErrorKind::Cancelled
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing an unknown kind name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownKind(pub String);

impl fmt::Display for UnknownKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown error kind `{}`", self.0)
    }
}

impl std::error::Error for UnknownKind {}

impl FromStr for ErrorKind {
    type Err = UnknownKind;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        ErrorKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| UnknownKind(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in ErrorKind::ALL {
            assert_eq!(kind.as_str().parse::<ErrorKind>(), Ok(kind));
        }
        assert!("nope".parse::<ErrorKind>().is_err());
    }
}

//! The default decision of a human checkpoint.

use serde::{Deserialize, Serialize};

/// A yes/no decision with its author and an optional comment: the default output type of a
/// `human` step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// Whether the request was approved.
    pub approved: bool,
    /// Who decided. The engine overwrites it with the authorized approver, so it is
    /// never what the caller claims but who the caller is.
    pub by: String,
    /// An optional comment.
    #[serde(default)]
    pub comment: Option<String>,
}

impl Approval {
    /// An approval.
    pub fn approve(comment: impl Into<Option<String>>) -> Self {
        Approval {
            approved: true,
            by: String::new(),
            comment: comment.into(),
        }
    }

    /// A rejection.
    pub fn reject(comment: impl Into<Option<String>>) -> Self {
        Approval {
            approved: false,
            by: String::new(),
            comment: comment.into(),
        }
    }
}

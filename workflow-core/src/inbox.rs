//! What the machine reads from a store: a run's durable status and the messages of its
//! inbox. The store keeps them ([`crate::store`] re-exports them); the machine rules on
//! them.

use serde::{Deserialize, Serialize};

use crate::error::RunId;
use crate::journal::{Timestamp, Value};

/// The durable status of a run, as listed by the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Not finished: being driven, waiting on a person or a timer, or interrupted.
    Running,
    /// Every step settled.
    Completed,
    /// Aborted after compensations; a dead letter was recorded.
    Failed,
    /// Cancelled by an operator.
    Cancelled,
    /// Not driven: its spec changed since it started, or its outcome needs a person (see
    /// the run's note).
    Parked,
}

impl RunStatus {
    /// Every status.
    pub const ALL: [RunStatus; 5] = [
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
        RunStatus::Parked,
    ];

    /// The name used in the store and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Parked => "parked",
        }
    }

    /// Parses [`RunStatus::as_str`].
    pub fn parse(text: &str) -> Option<Self> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }

    /// Whether the run is over.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    /// Whether an owner drives the run (it is `running`).
    pub fn is_driven(self) -> bool {
        self == RunStatus::Running
    }
}

/// Something sent to a run from outside its engine, kept in the run's inbox until the
/// engine that drives it takes it in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "message", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Message {
    /// A decision of a human task, admitted (or refused) by the owner with its authorizer.
    Decision {
        /// The human step's id.
        step: String,
        /// Who decides.
        by: String,
        /// The decision, as JSON.
        decision: Value,
        /// How it was made, when not through a signed-in page, the API or code (`link`):
        /// journaled with the decision.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
    },
    /// A human task handed to another person or group by someone allowed to decide it,
    /// admitted (or refused) by the owner with its authorizer.
    Delegate {
        /// The human step's id.
        step: String,
        /// Who delegates.
        by: String,
        /// The new assignee.
        to: String,
    },
    /// A request to cancel the run.
    Cancel {
        /// Who asks.
        by: String,
    },
    /// An event for an `event` step.
    Event {
        /// The event step's id.
        step: String,
        /// The sender's id of the event: the same event twice is taken once.
        event_id: String,
        /// The payload, as JSON.
        payload: Value,
    },
}

/// One message of a run's inbox.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxItem {
    /// Its id: increasing across the store.
    pub id: u64,
    /// The run.
    pub run: RunId,
    /// The message.
    pub message: Message,
    /// When it was submitted.
    pub at: Timestamp,
}

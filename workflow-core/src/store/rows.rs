//! The rows a store keeps beside runs and journals: inbox messages, recorded specs, and
//! what a verification found.

use serde::{Deserialize, Serialize};

use crate::error::RunId;
use crate::journal::{Timestamp, Value};

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

/// The answer to [`Store::submit`](super::Store::submit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// Stored with this id.
    New(u64),
    /// The inbox already held a message with the key: this is its id.
    Duplicate(u64),
}

impl Submitted {
    /// The message's id either way.
    pub fn id(self) -> u64 {
        match self {
            Submitted::New(id) | Submitted::Duplicate(id) => id,
        }
    }
}

/// A spec recorded in the store, and when engines registered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecRecord {
    /// The fingerprint.
    pub fingerprint: String,
    /// The workflow's journaled name.
    pub workflow: String,
    /// The spec, as JSON.
    pub spec: String,
    /// When an engine first registered it.
    pub first_registered: Timestamp,
    /// When an engine last registered it.
    pub last_registered: Timestamp,
}

/// What [`Store::verify`](super::Store::verify) found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verification {
    /// What the database's own integrity check reported, when it found problems.
    pub integrity: Vec<String>,
    /// Every damaged row.
    pub damaged: Vec<Damage>,
    /// How many rows were checked.
    pub rows: u64,
}

impl Verification {
    /// Whether nothing is damaged.
    pub fn is_clean(&self) -> bool {
        self.integrity.is_empty() && self.damaged.is_empty()
    }
}

/// One damaged row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    /// The kind of row: `runs`, `journal`, `specs`, `dead_letters`, `inbox`.
    pub table: String,
    /// The run it belongs to, when it belongs to one.
    pub run: Option<RunId>,
    /// Which row: a journal sequence number, a run id, a fingerprint, a message id.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

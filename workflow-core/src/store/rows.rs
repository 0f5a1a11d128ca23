//! The rows a store keeps beside runs and journals: inbox messages, recorded specs, and
//! what a verification found.

use serde::{Deserialize, Serialize};

use crate::error::RunId;
use crate::journal::Timestamp;

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

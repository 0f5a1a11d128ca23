//! Flow control: a workflow's `concurrency`, `priority` and `debounce`, and a step's
//! `concurrency` and `rate`.
//!
//! These keys govern admission (when a run or an attempt may start), not what a run does:
//! they are outside the behavioural fingerprint, so changing a limit never parks a run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The key of a limit: a string literal (one key shared by every run that names it, in any
/// workflow) or a path over the workflow's inputs (and, on a step, upstream outputs), read
/// per run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKey {
    /// `key: "psp"`: one key, shared by every run (of any workflow) that names it.
    Static(String),
    /// `key: order.customer_id`: the path as written, read per run.
    Path(String),
}

/// What a start does when its workflow-level concurrency key is at its limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnLimit {
    /// The run waits until a slot frees (the default).
    #[default]
    Queue,
    /// The start is dropped.
    Skip,
    /// The oldest run in flight with the key is cancelled to make room.
    CancelPrevious,
}

/// `concurrency: { key, limit, on_limit }` on a workflow: runs in flight per key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConcurrency {
    /// The key runs are counted by.
    pub key: LimitKey,
    /// How many runs with one key may be in flight at once (at least 1).
    pub limit: u32,
    /// What a start does when its key is at the limit.
    #[serde(default)]
    pub on_limit: OnLimit,
}

/// `debounce: { key, window, max_wait }`: starts with the same key within `window` of each
/// other collapse into one run (the latest start's input), started once the key has been
/// quiet for `window`, or `max_wait` after the first start of the burst.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Debounce {
    /// The key starts are collapsed by.
    pub key: LimitKey,
    /// How long a key must be quiet before its run starts (more than zero).
    pub window: Duration,
    /// The longest a burst may delay its run, counted from its first start (at least
    /// `window`); `None`: no bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<Duration>,
}

/// `concurrency: { key, limit }` on a step: attempts of this step in flight per key,
/// across all runs and workers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepConcurrency {
    /// The key attempts are counted by.
    pub key: LimitKey,
    /// How many attempts with one key may be in flight at once (at least 1).
    pub limit: u32,
}

/// `rate: { key, limit, per, burst }` on a step: a token bucket per key holding at most
/// `burst` tokens (default 1), refilled at `limit` per `per`; an attempt takes one token.
/// Over any window of length `per`, at most `limit + burst` attempts start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rate {
    /// The key tokens are counted by.
    pub key: LimitKey,
    /// How many tokens are added per `per` (at least 1).
    pub limit: u32,
    /// The period `limit` is counted over (more than zero).
    pub per: Duration,
    /// The most tokens a bucket holds (at least 1; 1 by default).
    #[serde(default = "one")]
    pub burst: u32,
}

fn one() -> u32 {
    1
}

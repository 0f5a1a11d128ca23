//! The spec model behind `workflow!`.
//!
//! This crate is shared by the macro, the runtime and the CLI. It holds:
//! - [`model`]: the checked model of a workflow ([`Spec`], [`Step`], ...);
//! - [`retry`]: retry policies, their validation and their delay schedule;
//! - [`schedule`]: a workflow's `schedule: { ... }`, its cron pattern and zone checks;
//! - [`flow`]: flow control keys (`concurrency`, `priority`, `debounce`, `rate`);
//! - [`title`]: a human step's `title` placeholders, filled in from a run's values;
//! - [`fingerprint`]: the behavioural fingerprint runs are pinned to;
//! - [`graph`]: topological order and cycle finding;
//! - [`render`]: Mermaid, DOT and SVG renderers, pure functions of a [`Spec`];
//! - `parse` (feature `parse`): the syn parser and every compile-time check.
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

pub mod fingerprint;
pub mod flow;
pub mod graph;
pub mod kind;
pub mod model;
pub mod render;
pub mod retry;
pub mod schedule;
pub mod title;

/// The syn parser and the compile-time checks, for the `workflow!` macro and the CLI. Not
/// a stable API: it may change in any release.
#[cfg(feature = "parse")]
#[doc(hidden)]
pub mod parse;

/// Specs in files: seed 003's YAML, lowered onto the spec model and checked by the same
/// checks as an inline spec (`workflow_file!`, `workflow lint`).
#[cfg(feature = "parse")]
pub mod yaml;

pub use flow::{Debounce, LimitKey, OnLimit, Rate, RunConcurrency, StepConcurrency};
pub use kind::ErrorKind;
pub use model::{
    format_duration, ActionStep, Arg, Call, ChildArg, ChildStep, Effect, EventStep, ForEach,
    HumanStep, Input, OnEventTimeout, OnFailure, OnItemFailure, OnTimeout, SearchKey, Spec, Step,
    StepKind, DEFAULT_CONCURRENCY,
};
pub use retry::{Backoff, Jitter, PolicyError, PolicyField, RetryPolicy};
pub use schedule::{Catchup, DstGap, Overlap, Schedule, ScheduleError};

//! Typed workflows, checked at compile time and run by a small durable tokio runtime.
//!
//! Declare a workflow with [`workflow!`]; the compiler rejects unknown or cyclic
//! dependencies, wrong types between steps, unsafe retry settings and human checkpoints
//! without a timeout and an escalation path. Register it with an [`Engine`], start runs,
//! and let the engine run independent steps in parallel, retry transient failures with
//! capped exponential backoff and jitter, wait durably for human decisions, and journal
//! every transition so a crashed process resumes without losing or repeating work.
//!
//! See the `workflow` crate's guide (`workflow::guide`) for a tour of the spec language.
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

pub mod admin;
mod approval;
pub mod clock;
mod context;
mod engine;
mod error;
pub mod flow;
pub mod form;
mod future;
mod inbox;
pub mod journal;
pub mod machine;
pub mod schedule;
pub mod search;
pub mod store;
pub mod telemetry;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod trace;
pub mod upgrade;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use approval::Approval;
pub use context::{Cancellation, Canceller, StepContext, ValidUntil};
pub use engine::human::{
    DecisionOptions, EventHandle, HumanTask, TaskInfo, TIMEOUT_DECIDER, VIA_LINK,
};
pub use engine::workflow::{
    BoxFuture, CallError, ChildStart, Invocation, OutputSource, WithItem, Workflow,
};
#[doc(hidden)]
pub use engine::FaultHook;
pub use engine::{
    default_authorizer, Authorizer, BackfillTick, Drained, Engine, EngineBuilder, Handover,
    RunHandle, RunRef, RunView, ScheduleApiError, Schedules, StartOptions, StepView,
    BATCHES_PER_PASS, DEFAULT_CANCEL_GRACE, DEFAULT_CLOCK_SKEW, DEFAULT_LEASE, PURGE_EVERY,
};
pub use error::{DecisionError, ErrorKind, EventError, RunError, RunId, StepError};
pub use form::DecisionForm;
pub use schedule::Tick;
pub use search::SearchValue;
pub use workflow_macros::workflow;
pub use workflow_macros::workflow_file;
pub use workflow_macros::DecisionForm;
/// The spec model, its checks and the diagram renderers (the `workflow-spec` crate).
pub use workflow_spec as spec;

/// The usual imports: `use workflow_core::prelude::*;`.
pub mod prelude {
    pub use crate::{
        workflow, workflow_file, Approval, DecisionForm, Engine, ErrorKind, RunError, RunHandle,
        RunId, StartOptions, StepContext, StepError, Workflow,
    };
}

//! Typed workflows, checked at compile time and run by a small durable tokio runtime.
//!
//! Declare a workflow with [`workflow!`]; the compiler rejects unknown or cyclic
//! dependencies, wrong types between steps, unsafe retry settings and human checkpoints
//! without a timeout and an escalation path. Register it with an [`Engine`], start runs,
//! and let the engine run independent steps in parallel, retry transient failures with
//! capped exponential backoff and jitter, wait durably for human decisions, and journal
//! every transition so a crashed process resumes without losing or repeating work.
//!
//! See the repository's README for a tour of the spec language.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod approval;
pub mod clock;
mod context;
pub mod engine;
mod error;
mod human;
pub mod journal;
pub mod machine;
pub mod store;
#[cfg(feature = "test-util")]
pub mod testing;
mod workflow;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use approval::Approval;
pub use clock::{Clock, TokioClock};
pub use context::StepContext;
pub use engine::{Engine, EngineBuilder, RunHandle, RunRef, RunView, StartOptions, StepView};
pub use error::{DecisionError, ErrorKind, RunError, RunId, StepError};
pub use human::{HumanTask, TaskInfo, TIMEOUT_DECIDER};
pub use machine::{Command, Machine, Status, StepState};
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::{MemoryStore, Store, StoreError};
pub use workflow::{
    BoxFuture, CallError, ChildStart, Invocation, OutputSource, WithItem, Workflow,
};
pub use workflow_macros::workflow;
pub use workflow_spec::{self as spec, RetryPolicy, Spec};

/// The usual imports: `use workflow_core::prelude::*;`.
pub mod prelude {
    #[cfg(feature = "sqlite")]
    pub use crate::SqliteStore;
    pub use crate::{
        workflow, Approval, Engine, ErrorKind, RunError, RunHandle, RunId, StartOptions,
        StepContext, StepError, Workflow,
    };
}

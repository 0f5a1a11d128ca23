//! Typed handles for the human checkpoints and the events of a run.

use std::marker::PhantomData;

use serde::Serialize;

use crate::approval::Approval;
use crate::engine::RunRef;
use crate::error::{DecisionError, EventError};

pub use crate::machine::{TIMEOUT_DECIDER, VIA_LINK};

/// How a decision is made, beside who makes it and what it is: journaled with it
/// ([`Engine::decide_with`](crate::Engine::decide_with)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecisionOptions {
    /// How the decision reached the run when not through a signed-in page, the API or
    /// code ([`VIA_LINK`]): the `via` of its `TaskDecided` or `TaskApproved` event.
    pub via: Option<String>,
}

impl DecisionOptions {
    /// A decision made through a signed single-use link.
    pub fn via_link() -> DecisionOptions {
        DecisionOptions {
            via: Some(VIA_LINK.to_owned()),
        }
    }
}

pub use crate::admin::TaskInfo;

/// The task of one human step of one run, typed by its decision.
#[derive(Debug)]
pub struct HumanTask<'a, D> {
    run: &'a RunRef,
    step: usize,
    id: &'static str,
    decision: PhantomData<fn(D)>,
}

impl<'a, D: Serialize> HumanTask<'a, D> {
    #[doc(hidden)]
    pub fn new(run: &'a RunRef, step: usize, id: &'static str) -> Self {
        HumanTask {
            run,
            step,
            id,
            decision: PhantomData,
        }
    }

    /// The step id.
    pub fn id(&self) -> &'static str {
        self.id
    }

    /// The step's index in declaration order.
    pub fn index(&self) -> usize {
        self.step
    }

    /// Decides the task as `by`. Accepted once, from an approver the engine's authorizer
    /// admits for the task's assignee, before the deadline; recorded with who and when.
    pub async fn decide(&self, by: &str, decision: D) -> Result<(), DecisionError> {
        let value = serde_json::to_value(&decision).map_err(|error| DecisionError::WrongType {
            step: self.id.to_owned(),
            message: error.to_string(),
        })?;
        self.run
            .engine()
            .decide(self.run.id(), self.id, by, value)
            .await
    }

    /// Hands the task to `to` (a person or a group) as `by`, who must be allowed to decide
    /// it now; journaled, and the delegate decides from then on, before the same deadline.
    pub async fn delegate(&self, by: &str, to: &str) -> Result<(), DecisionError> {
        self.run
            .engine()
            .delegate(self.run.id(), self.id, by, to)
            .await
    }

    /// The task while it is open; `None` before it opens or after it is decided.
    pub async fn info(&self) -> Option<TaskInfo> {
        self.run
            .engine()
            .open_tasks()
            .await
            .ok()?
            .into_iter()
            .find(|task| task.run == self.run.id() && task.step == self.id)
    }
}

impl HumanTask<'_, Approval> {
    /// Approves, with an optional comment.
    pub async fn approve(&self, by: &str, comment: Option<&str>) -> Result<(), DecisionError> {
        self.decide(by, Approval::approve(comment.map(str::to_owned)))
            .await
    }

    /// Rejects, with an optional comment.
    pub async fn reject(&self, by: &str, comment: Option<&str>) -> Result<(), DecisionError> {
        self.decide(by, Approval::reject(comment.map(str::to_owned)))
            .await
    }
}

/// The event step of one run, typed by its payload: `run.payment().send(event_id,
/// payload)`.
#[derive(Debug)]
pub struct EventHandle<'a, T> {
    run: &'a RunRef,
    step: usize,
    id: &'static str,
    payload: PhantomData<fn(T)>,
}

impl<'a, T> EventHandle<'a, T> {
    #[doc(hidden)]
    pub fn new(run: &'a RunRef, step: usize, id: &'static str) -> Self {
        EventHandle {
            run,
            step,
            id,
            payload: PhantomData,
        }
    }

    /// The step id.
    pub fn id(&self) -> &'static str {
        self.id
    }

    /// The step's index in declaration order.
    pub fn index(&self) -> usize {
        self.step
    }
}

impl<T: Serialize> EventHandle<'_, T> {
    /// Sends the event. It is kept in the run's durable inbox until the run waits for it;
    /// the same `event_id` sent again is taken once. Refused when the run is finished, or
    /// the step no longer waits.
    pub async fn send(&self, event_id: &str, payload: T) -> Result<(), EventError> {
        let value = serde_json::to_value(&payload).map_err(|error| EventError::WrongType {
            step: self.id.to_owned(),
            message: error.to_string(),
        })?;
        self.run
            .engine()
            .send_event(self.run.id(), self.id, event_id, value)
            .await
    }
}

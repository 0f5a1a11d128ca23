//! The journal: every transition of a run, appended to the store before the engine acts on
//! it. Replaying a run's events into a fresh [`Machine`](crate::machine::Machine) rebuilds
//! its state exactly.

use serde::{Deserialize, Serialize};

use crate::error::ErrorKind;

pub use crate::clock::{rfc3339, Timestamp};

/// A journaled value: a step output, a workflow input or a decision, as JSON.
pub type Value = serde_json::Value;

/// One transition of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The run was created.
    RunStarted {
        /// The workflow's name.
        workflow: String,
        /// The spec fingerprint it runs under.
        fingerprint: String,
        /// The inputs.
        input: Value,
        /// The jitter seed.
        seed: u64,
        /// The run's W3C / OpenTelemetry trace id: 32 hex digits (16 in journals of older
        /// versions; see [`crate::trace`]).
        trace_id: String,
        /// The span the run's spans are children of (16 hex digits): a `traceparent`'s
        /// parent id, or the parent run's step span; none when the run starts its own trace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_span: Option<String>,
        /// Whether external effects are proposed instead of executed.
        dry_run: bool,
        /// The absolute deadline of the whole run, if any.
        deadline: Option<Timestamp>,
        /// When.
        at: Timestamp,
    },
    /// An attempt of a step began (journaled before the action runs).
    AttemptStarted {
        /// The step index.
        step: usize,
        /// The attempt, from 1.
        attempt: u32,
        /// When.
        at: Timestamp,
    },
    /// An attempt failed.
    AttemptFailed {
        /// The step index.
        step: usize,
        /// The attempt.
        attempt: u32,
        /// The error's kind.
        kind: ErrorKind,
        /// The error's message.
        message: String,
        /// The retry-after the dependency asked for, in ms.
        retry_after: Option<u64>,
        /// For an interrupted external effect whose outcome is unknown: from when its
        /// previous owner can no longer be inside the effect and no request of it is still
        /// applied by a service that checks `valid_until` (its lease ended, plus the
        /// self-fencing margin and twice the clock-skew bound). An operator's retry before then is refused unless insisted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        safe_after: Option<Timestamp>,
        /// When.
        at: Timestamp,
    },
    /// A step succeeded with its output.
    StepSucceeded {
        /// The step index.
        step: usize,
        /// The serialized output.
        output: Value,
        /// When.
        at: Timestamp,
    },
    /// A step failed for good as a whole (a map step whose item failed under
    /// `on_item_failure: abort`, or whose items could not be listed).
    StepFailed {
        /// The step index.
        step: usize,
        /// Attempts made (of the item that failed).
        attempts: u32,
        /// The error's kind.
        kind: ErrorKind,
        /// The error's message.
        message: String,
        /// When.
        at: Timestamp,
    },
    /// A step was skipped (false condition, absent upstream, or a dry-run proposal).
    StepSkipped {
        /// The step index.
        step: usize,
        /// Why.
        reason: String,
        /// When.
        at: Timestamp,
    },
    /// In a dry run, an external effect was proposed instead of executed.
    EffectProposed {
        /// The step index.
        step: usize,
        /// The item, for a map step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<usize>,
        /// The arguments it would have been called with.
        args: Value,
        /// When.
        at: Timestamp,
    },
    /// A human task was opened.
    TaskOpened {
        /// The step index.
        step: usize,
        /// Who may decide.
        assignee: String,
        /// The prompt.
        prompt: Option<String>,
        /// The absolute deadline.
        deadline: Timestamp,
        /// When.
        at: Timestamp,
    },
    /// A human task's deadline passed and it was reassigned.
    TaskEscalated {
        /// The step index.
        step: usize,
        /// The new assignee.
        to: String,
        /// The new deadline.
        deadline: Timestamp,
        /// When.
        at: Timestamp,
    },
    /// A human task was decided (by a person, or by `on_timeout: approve | reject`).
    TaskDecided {
        /// The step index.
        step: usize,
        /// Who decided.
        by: String,
        /// The decision.
        decision: Value,
        /// The inbox message it came from, when another process sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inbox: Option<u64>,
        /// How the decision reached the run when not through a signed-in page, the API or
        /// code: `link` for a signed single-use link. Absent otherwise (and in journals
        /// written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
        /// When.
        at: Timestamp,
    },
    /// A message from the run's inbox was refused (a decision the owner's authorizer did
    /// not admit, a decision of the wrong type, a cancellation of a finished run...).
    MessageRefused {
        /// The inbox message.
        inbox: u64,
        /// The step it named, if any.
        step: Option<usize>,
        /// Who sent it.
        by: String,
        /// A stable code: `unauthorized`, `expired`, `already_decided`, `unknown_task`,
        /// `wrong_type`, `finished`.
        code: String,
        /// Why, in words.
        reason: String,
        /// When.
        at: Timestamp,
    },
    /// A human task's deadline passed with no escalation left: the step fails (`timeout`).
    TaskExpired {
        /// The step index.
        step: usize,
        /// When.
        at: Timestamp,
    },
    /// A compensation began (journaled before it runs, so it runs once at a time and a
    /// crash in the middle is seen on resume).
    CompensationStarted {
        /// The step index whose effect is being undone.
        step: usize,
        /// The item, for a map step (each completed item is compensated).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<usize>,
        /// When.
        at: Timestamp,
    },
    /// A compensation ran.
    Compensated {
        /// The step index whose effect was undone.
        step: usize,
        /// The item, for a map step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<usize>,
        /// The error, if the compensation failed.
        error: Option<String>,
        /// When.
        at: Timestamp,
    },
    /// An event step began waiting for its event, until `deadline`.
    EventAwaited {
        /// The step index.
        step: usize,
        /// When the wait times out.
        deadline: Timestamp,
        /// When.
        at: Timestamp,
    },
    /// An event arrived before its step waited for it: it is kept for when it does.
    EventBuffered {
        /// The step index.
        step: usize,
        /// The sender's id of the event.
        event_id: String,
        /// The payload.
        payload: Value,
        /// The inbox message it came from, when another process sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inbox: Option<u64>,
        /// When.
        at: Timestamp,
    },
    /// The event a step waited for arrived; its payload is the step's output.
    EventReceived {
        /// The step index.
        step: usize,
        /// The sender's id of the event.
        event_id: String,
        /// The payload.
        payload: Value,
        /// The inbox message it came from (none when it was buffered before).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inbox: Option<u64>,
        /// When.
        at: Timestamp,
    },
    /// No event arrived before the deadline.
    EventExpired {
        /// The step index.
        step: usize,
        /// When.
        at: Timestamp,
    },
    /// A map step listed its items.
    MapStarted {
        /// The step index.
        step: usize,
        /// How many items.
        count: usize,
        /// When.
        at: Timestamp,
    },
    /// An attempt of one item of a map step began (journaled before it runs).
    ItemStarted {
        /// The step index.
        step: usize,
        /// The item, from 0, in the source's order.
        item: usize,
        /// The attempt, from 1.
        attempt: u32,
        /// When.
        at: Timestamp,
    },
    /// An attempt of one item failed.
    ItemFailed {
        /// The step index.
        step: usize,
        /// The item.
        item: usize,
        /// The attempt.
        attempt: u32,
        /// The error's kind.
        kind: ErrorKind,
        /// The error's message.
        message: String,
        /// The retry-after the dependency asked for, in ms.
        retry_after: Option<u64>,
        /// When.
        at: Timestamp,
    },
    /// One item of a map step succeeded.
    ItemSucceeded {
        /// The step index.
        step: usize,
        /// The item.
        item: usize,
        /// Its output.
        output: Value,
        /// When.
        at: Timestamp,
    },
    /// A child step started its child run (or found the one it started before a crash).
    ChildStarted {
        /// The step index.
        step: usize,
        /// The child run.
        child: crate::error::RunId,
        /// When.
        at: Timestamp,
    },
    /// The run stopped while a child run was in flight: the child is asked to cancel.
    ChildCancelled {
        /// The step index.
        step: usize,
        /// The child run.
        child: crate::error::RunId,
        /// When.
        at: Timestamp,
    },
    /// The run was cancelled while an attempt of an external effect with a reconcile
    /// function ran, and its cancel's grace period ended: the attempt was stopped, and the
    /// reconcile function is asked whether the effect happened (its answer settles the step).
    AttemptStopped {
        /// The step index.
        step: usize,
        /// The item, for a map step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<usize>,
        /// The attempt that was stopped.
        attempt: u32,
        /// When.
        at: Timestamp,
    },
    /// The workflow-level deadline passed.
    DeadlinePassed {
        /// When.
        at: Timestamp,
    },
    /// An operator cancelled the run.
    Cancelled {
        /// Who.
        by: String,
        /// The inbox message it came from, when another process sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inbox: Option<u64>,
        /// When.
        at: Timestamp,
    },
    /// An operator restarted a failed run from its failed step.
    Retried {
        /// Who.
        by: String,
        /// When.
        at: Timestamp,
    },
    /// Who started the run (the caller's identity for API and webhook starts, or
    /// `StartOptions::initiator`): journaled right after `RunStarted`, in the same
    /// transaction, when known. `self_approval: false` refuses this person.
    Initiated {
        /// The initiator.
        by: String,
        /// When.
        at: Timestamp,
    },
    /// One approval of a human step that needs several (`approvals: N`), before the last:
    /// it counts towards the quorum and leaves the task open.
    TaskApproved {
        /// The step index.
        step: usize,
        /// Who approved.
        by: String,
        /// The decision they made.
        decision: Value,
        /// The inbox message it came from, when another process sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inbox: Option<u64>,
        /// How the decision reached the run when not through a signed-in page, the API or
        /// code: `link` for a signed single-use link. Absent otherwise (and in journals
        /// written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<String>,
        /// When.
        at: Timestamp,
    },
    /// A human task was handed to another person or group by someone allowed to decide
    /// it; the delegate decides it from then on.
    TaskDelegated {
        /// The step index.
        step: usize,
        /// Who delegated.
        by: String,
        /// The new assignee.
        to: String,
        /// The inbox message it came from, when another process sent it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inbox: Option<u64>,
        /// When.
        at: Timestamp,
    },
}

impl Event {
    /// The inbox message this event took in, if it took one in.
    pub fn inbox(&self) -> Option<u64> {
        match self {
            Event::TaskDecided { inbox, .. }
            | Event::TaskApproved { inbox, .. }
            | Event::TaskDelegated { inbox, .. }
            | Event::Cancelled { inbox, .. }
            | Event::EventReceived { inbox, .. }
            | Event::EventBuffered { inbox, .. } => *inbox,
            Event::MessageRefused { inbox, .. } => Some(*inbox),
            _ => None,
        }
    }

    /// How a decision or an approval reached the run (`link`), when it was recorded.
    pub fn via(&self) -> Option<&str> {
        match self {
            Event::TaskDecided { via, .. } | Event::TaskApproved { via, .. } => via.as_deref(),
            _ => None,
        }
    }

    /// When the event happened.
    pub fn at(&self) -> Timestamp {
        match self {
            Event::RunStarted { at, .. }
            | Event::AttemptStarted { at, .. }
            | Event::AttemptFailed { at, .. }
            | Event::StepSucceeded { at, .. }
            | Event::StepSkipped { at, .. }
            | Event::EffectProposed { at, .. }
            | Event::TaskOpened { at, .. }
            | Event::TaskEscalated { at, .. }
            | Event::TaskDecided { at, .. }
            | Event::TaskExpired { at, .. }
            | Event::MessageRefused { at, .. }
            | Event::StepFailed { at, .. }
            | Event::EventAwaited { at, .. }
            | Event::EventBuffered { at, .. }
            | Event::EventReceived { at, .. }
            | Event::EventExpired { at, .. }
            | Event::MapStarted { at, .. }
            | Event::ItemStarted { at, .. }
            | Event::ItemFailed { at, .. }
            | Event::ItemSucceeded { at, .. }
            | Event::ChildStarted { at, .. }
            | Event::ChildCancelled { at, .. }
            | Event::AttemptStopped { at, .. }
            | Event::CompensationStarted { at, .. }
            | Event::Compensated { at, .. }
            | Event::DeadlinePassed { at }
            | Event::Cancelled { at, .. }
            | Event::Retried { at, .. }
            | Event::Initiated { at, .. }
            | Event::TaskApproved { at, .. }
            | Event::TaskDelegated { at, .. } => *at,
        }
    }

    /// The step the event is about, if any.
    pub fn step(&self) -> Option<usize> {
        match self {
            Event::AttemptStarted { step, .. }
            | Event::AttemptFailed { step, .. }
            | Event::StepSucceeded { step, .. }
            | Event::StepSkipped { step, .. }
            | Event::EffectProposed { step, .. }
            | Event::TaskOpened { step, .. }
            | Event::TaskEscalated { step, .. }
            | Event::TaskDecided { step, .. }
            | Event::TaskApproved { step, .. }
            | Event::TaskDelegated { step, .. }
            | Event::TaskExpired { step, .. }
            | Event::CompensationStarted { step, .. }
            | Event::StepFailed { step, .. }
            | Event::EventAwaited { step, .. }
            | Event::EventBuffered { step, .. }
            | Event::EventReceived { step, .. }
            | Event::EventExpired { step, .. }
            | Event::MapStarted { step, .. }
            | Event::ItemStarted { step, .. }
            | Event::ItemFailed { step, .. }
            | Event::ItemSucceeded { step, .. }
            | Event::ChildStarted { step, .. }
            | Event::ChildCancelled { step, .. }
            | Event::AttemptStopped { step, .. }
            | Event::Compensated { step, .. } => Some(*step),
            Event::MessageRefused { step, .. } => *step,
            Event::RunStarted { .. }
            | Event::Initiated { .. }
            | Event::DeadlinePassed { .. }
            | Event::Cancelled { .. }
            | Event::Retried { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::RunId;
    use crate::store::checksum;

    /// Entries as journals written before decisions recorded how they were made hold them.
    const OLD: [&str; 2] = [
        r#"{"event":"task_decided","step":1,"by":"ana@a","decision":{"approved":true},"inbox":4,"at":5}"#,
        r#"{"event":"task_approved","step":1,"by":"bob@a","decision":{"approved":true},"at":3}"#,
    ];

    #[test]
    fn old_decisions_read_without_a_via_and_write_back_to_the_same_text() {
        for text in OLD {
            let event: Event = serde_json::from_str(text).unwrap();
            assert_eq!(event.via(), None, "{text}");
            // The same text, so the entry's checksum (over the stored text) still holds.
            let again = serde_json::to_string(&event).unwrap();
            assert_eq!(again, text);
            assert_eq!(
                checksum::entry(RunId(1), 0, &again),
                checksum::entry(RunId(1), 0, text)
            );
        }
    }

    #[test]
    fn a_decision_via_a_link_keeps_it_in_its_text() {
        let event = Event::TaskDecided {
            step: 1,
            by: "ana@a".into(),
            decision: serde_json::json!({"approved": true}),
            inbox: None,
            via: Some(crate::VIA_LINK.into()),
            at: 5,
        };
        let text = serde_json::to_string(&event).unwrap();
        assert!(text.contains(r#""via":"link""#), "{text}");
        let back: Event = serde_json::from_str(&text).unwrap();
        assert_eq!(back.via(), Some("link"));
        assert_eq!(back, event);
    }
}

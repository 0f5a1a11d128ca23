//! What the machine says to requests from outside the run: whether a decision is
//! admissible (by whom, when), what a message from the inbox becomes, whether a run may be
//! cancelled or retried, and how a failed run is described in the dead-letter list.

use workflow_spec::StepKind;

use super::{Machine, Status, StepState, Stop};
use crate::error::CallError;
use crate::error::{DecisionError, ErrorKind, EventError, RunError, RunId};
use crate::inbox::{InboxItem, Message, RunStatus};
use crate::journal::{Event, Timestamp, Value};

/// The user code the machine's rules need: evaluated by the generated workflow type, over
/// the run's inputs and the outputs so far. Tools without the workflow's code use
/// [`NoHooks`].
pub trait Hooks {
    /// Evaluates the condition of `step`.
    fn condition(&self, step: usize, outputs: &[Option<Value>]) -> Result<bool, CallError>;
    /// The arguments `step` (one item of it, for a map step) would be called with, for a
    /// dry-run proposal.
    fn proposal(
        &self,
        step: usize,
        outputs: &[Option<Value>],
        item: Option<(usize, &Value)>,
    ) -> Value;
    /// The items of map step `step`, in the source's order.
    fn items(&self, step: usize, outputs: &[Option<Value>]) -> Result<Vec<Value>, CallError>;
    /// Checks an event's payload against the type of event step `step`; returns it
    /// normalised.
    fn event(&self, step: usize, payload: Value) -> Result<Value, CallError>;
    /// The decision `on_timeout: approve | reject` records for human `step`.
    fn timeout_decision(&self, step: usize, approved: bool) -> Result<Value, CallError>;
    /// Checks a decision against the type of human `step`; returns it normalised.
    fn decision(&self, step: usize, decision: Value) -> Result<Value, CallError>;
}

/// Hooks for tools that have the spec but not the workflow's code: conditions cannot be
/// evaluated (they hold), nothing is proposed, no items are listed, decisions and events
/// are taken as they are (the engine that owns the run checks their type when it takes
/// them in).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {
    fn condition(&self, _: usize, _: &[Option<Value>]) -> Result<bool, CallError> {
        Ok(true)
    }

    fn proposal(&self, _: usize, _: &[Option<Value>], _: Option<(usize, &Value)>) -> Value {
        Value::Null
    }

    fn items(&self, step: usize, _: &[Option<Value>]) -> Result<Vec<Value>, CallError> {
        Err(CallError::NoSuchCall(step))
    }

    fn event(&self, _: usize, payload: Value) -> Result<Value, CallError> {
        Ok(payload)
    }

    fn timeout_decision(&self, step: usize, _: bool) -> Result<Value, CallError> {
        Err(CallError::NoSuchCall(step))
    }

    fn decision(&self, _: usize, decision: Value) -> Result<Value, CallError> {
        Ok(decision)
    }
}

/// What an admissible event does.
#[derive(Debug, Clone, PartialEq)]
pub enum Accepted {
    /// The step waits for it: the step takes it (index and normalised payload).
    Received(usize, Value),
    /// The step has not reached its wait: the event is kept for it.
    Early(usize, Value),
}

/// Decides whether `by` may decide a task assigned to `assignee`.
pub type Authorize<'a> = &'a dyn Fn(&str, &str) -> bool;

impl Machine<'_> {
    /// The event that records an accepted event.
    pub fn event_taken(
        &self,
        accepted: Accepted,
        event_id: &str,
        inbox: Option<u64>,
        at: Timestamp,
    ) -> Event {
        match accepted {
            Accepted::Received(step, payload) => Event::EventReceived {
                step,
                event_id: event_id.to_owned(),
                payload,
                inbox,
                at,
            },
            Accepted::Early(step, payload) => Event::EventBuffered {
                step,
                event_id: event_id.to_owned(),
                payload,
                inbox,
                at,
            },
        }
    }

    /// Whether `by` may decide human step `step` (its id) at time `at`: the task must be
    /// open, not past its deadline, not decided before, and (when `authorize` is given)
    /// `by` must be admitted for the current assignee. Without `authorize` the check of
    /// the approver is left to the engine that owns the run.
    pub fn admit(
        &self,
        run: RunId,
        step: &str,
        by: &str,
        at: Timestamp,
        authorize: Option<Authorize<'_>>,
    ) -> Result<usize, DecisionError> {
        let unknown = || DecisionError::UnknownTask {
            run,
            step: step.to_owned(),
        };
        let index = self.spec.step_index(step).ok_or_else(unknown)?;
        if !self.spec.steps[index].is_human() {
            return Err(unknown());
        }
        if let Some(by) = &self.deciders[index] {
            return Err(DecisionError::AlreadyDecided {
                run,
                step: step.to_owned(),
                by: by.clone(),
            });
        }
        match &self.states[index] {
            StepState::Failed {
                kind: ErrorKind::Timeout,
                ..
            } => Err(DecisionError::Expired {
                run,
                step: step.to_owned(),
            }),
            _ if self.status != Status::Running => Err(DecisionError::Finished(run)),
            StepState::Waiting {
                assignee, deadline, ..
            } => {
                if at >= *deadline {
                    return Err(DecisionError::Expired {
                        run,
                        step: step.to_owned(),
                    });
                }
                if let Some(authorize) = authorize {
                    if !authorize(assignee, by) && !self.is_delegate(index, assignee, by) {
                        return Err(DecisionError::Unauthorized {
                            step: step.to_owned(),
                            by: by.to_owned(),
                            assignee: assignee.clone(),
                        });
                    }
                }
                self.admit_person(index, step, by)?;
                Ok(index)
            }
            _ => Err(unknown()),
        }
    }

    /// The event that records `by`'s decision of `step`, if it is admissible now: the
    /// decision is checked against the step's type and its `by` field (if it has one) is
    /// set to the approver, so it records who decided, not who they claimed to be. `via`
    /// (`link` for a signed link) is journaled with it.
    #[allow(clippy::too_many_arguments)]
    pub fn decide(
        &self,
        run: RunId,
        step: &str,
        by: &str,
        decision: Value,
        via: Option<&str>,
        at: Timestamp,
        authorize: Authorize<'_>,
        hooks: &dyn Hooks,
    ) -> Result<Event, DecisionError> {
        let index = self.admit(run, step, by, at, Some(authorize))?;
        let mut decision =
            hooks
                .decision(index, decision)
                .map_err(|error| DecisionError::WrongType {
                    step: step.to_owned(),
                    message: error.to_string(),
                })?;
        if let Some(slot) = decision.get_mut("by") {
            *slot = Value::String(by.to_owned());
        }
        Ok(self.decision_event(index, by, decision, None, via, at))
    }

    /// What a message from the run's inbox becomes in the journal: the decision, the
    /// cancellation or the event it asks for, or a refusal naming why. A decision is judged
    /// as of when it was sent; the event is journaled at `now`.
    pub fn take_in(
        &self,
        run: RunId,
        item: &InboxItem,
        now: Timestamp,
        authorize: Authorize<'_>,
        hooks: &dyn Hooks,
    ) -> Event {
        let refuse =
            |step: Option<usize>, by: &str, code: &str, reason: String| Event::MessageRefused {
                inbox: item.id,
                step,
                by: by.to_owned(),
                code: code.to_owned(),
                reason,
                at: now,
            };
        match &item.message {
            Message::Decision {
                step,
                by,
                decision,
                via,
            } => {
                let via = via.as_deref();
                match self.decide(
                    run,
                    step,
                    by,
                    decision.clone(),
                    via,
                    item.at,
                    authorize,
                    hooks,
                ) {
                    Ok(
                        Event::TaskDecided {
                            step, by, decision, ..
                        }
                        | Event::TaskApproved {
                            step, by, decision, ..
                        },
                    ) => self.decision_event(step, &by, decision, Some(item.id), via, now),
                    Ok(other) => other,
                    Err(error) => {
                        let index = self.spec.step_index(step);
                        refuse(index, by, error.code(), error.to_string())
                    }
                }
            }
            Message::Delegate { step, by, to } => {
                match self.delegate(run, step, by, to, item.at, Some(authorize)) {
                    Ok(Event::TaskDelegated { step, by, to, .. }) => Event::TaskDelegated {
                        step,
                        by,
                        to,
                        inbox: Some(item.id),
                        at: now,
                    },
                    Ok(other) => other,
                    Err(error) => {
                        let index = self.spec.step_index(step);
                        refuse(index, by, error.code(), error.to_string())
                    }
                }
            }
            Message::Cancel { by } => match self.cancel(by, now) {
                Some(Event::Cancelled { by, at, .. }) => Event::Cancelled {
                    by,
                    inbox: Some(item.id),
                    at,
                },
                _ => refuse(
                    None,
                    by,
                    "finished",
                    format!("{run} is no longer running; nothing to cancel"),
                ),
            },
            Message::Event {
                step,
                event_id,
                payload,
            } => match self.accept_event(run, step, event_id, payload.clone(), hooks) {
                Ok(accepted) => self.event_taken(accepted, event_id, Some(item.id), now),
                Err(error) => refuse(
                    self.spec.step_index(step),
                    event_id,
                    error.code(),
                    error.to_string(),
                ),
            },
        }
    }

    /// Whether event `event_id` for event step `step` is admissible now: checked against
    /// the step's type, taken by the step if it waits, kept for it if it has not reached
    /// its wait yet; an event the step took before (the same id) is [`EventError::Duplicate`].
    pub fn accept_event(
        &self,
        run: RunId,
        step: &str,
        event_id: &str,
        payload: Value,
        hooks: &dyn Hooks,
    ) -> Result<Accepted, EventError> {
        let unknown = || EventError::UnknownEvent {
            run,
            step: step.to_owned(),
        };
        let index = self.spec.step_index(step).ok_or_else(unknown)?;
        if !self.spec.steps[index].is_event() {
            return Err(unknown());
        }
        let taken = self
            .received
            .get(&index)
            .or_else(|| self.buffered.get(&index).map(|(id, _)| id));
        if let Some(taken) = taken {
            return Err(if taken == event_id {
                EventError::Duplicate {
                    run,
                    step: step.to_owned(),
                    event_id: event_id.to_owned(),
                }
            } else {
                EventError::NotWaiting {
                    run,
                    step: step.to_owned(),
                    reason: format!("it took event `{taken}` already"),
                }
            });
        }
        if self.status != Status::Running {
            return Err(EventError::Finished(run));
        }
        let payload = hooks
            .event(index, payload)
            .map_err(|error| EventError::WrongType {
                step: step.to_owned(),
                message: error.to_string(),
            })?;
        match &self.states[index] {
            StepState::Awaiting { .. } => Ok(Accepted::Received(index, payload)),
            StepState::Pending => Ok(Accepted::Early(index, payload)),
            state => Err(EventError::NotWaiting {
                run,
                step: step.to_owned(),
                reason: format!("the step is {}", state.name()),
            }),
        }
    }

    /// The event that cancels the run, if it is still running.
    pub fn cancel(&self, by: &str, at: Timestamp) -> Option<Event> {
        (self.status == Status::Running).then(|| Event::Cancelled {
            by: by.to_owned(),
            inbox: None,
            at,
        })
    }

    /// The event that sends a failed run back to work from its failed step. A run that
    /// failed on an interrupted external effect is not retried before its previous owner
    /// can no longer be inside that effect ([`RunError::TooSoon`]) unless `insist`.
    pub fn retry(
        &self,
        run: RunId,
        by: &str,
        at: Timestamp,
        insist: bool,
    ) -> Result<Event, RunError> {
        if self.status != Status::Failed {
            return Err(RunError::NotFailed(run));
        }
        if let Some(safe_after) = self.safe_after.filter(|safe| *safe > at && !insist) {
            return Err(RunError::TooSoon { run, safe_after });
        }
        Ok(Event::Retried {
            by: by.to_owned(),
            at,
        })
    }

    /// The store status of the run.
    pub fn run_status(&self) -> RunStatus {
        match self.status {
            Status::Completed => RunStatus::Completed,
            Status::Cancelled => RunStatus::Cancelled,
            Status::Failed => RunStatus::Failed,
            Status::Running | Status::Compensating => RunStatus::Running,
        }
    }

    /// How a failed run is described to an operator: the failed step (empty for a deadline
    /// or a cancellation), attempts, error kind and message. `None` unless the run failed.
    pub fn failure(&self) -> Option<(String, u32, ErrorKind, String)> {
        if self.status != Status::Failed {
            return None;
        }
        Some(match self.stop.as_ref()? {
            Stop::StepFailed {
                step,
                attempts,
                kind,
                message,
            } => (
                self.spec.steps[*step].id.clone(),
                *attempts,
                *kind,
                message.clone(),
            ),
            Stop::Deadline => (
                String::new(),
                0,
                ErrorKind::Timeout,
                "the run passed its deadline".to_owned(),
            ),
            Stop::Cancelled => (
                String::new(),
                0,
                ErrorKind::Internal,
                "cancelled".to_owned(),
            ),
        })
    }

    /// The open human tasks: step, assignee, deadline, whether escalated, and the prompt.
    pub fn open_tasks(&self) -> impl Iterator<Item = (usize, &str, Timestamp, bool, Option<&str>)> {
        self.states
            .iter()
            .enumerate()
            .filter_map(|(step, state)| match state {
                StepState::Waiting {
                    assignee,
                    deadline,
                    escalated,
                } => {
                    let prompt = match &self.spec.steps[step].kind {
                        StepKind::Human(human) => human.prompt.as_deref(),
                        _ => None,
                    };
                    Some((step, assignee.as_str(), *deadline, *escalated, prompt))
                }
                _ => None,
            })
    }
}

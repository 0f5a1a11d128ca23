//! The rules of who decides a human task beyond "an admitted approver, once, in time":
//! a quorum of distinct approvers (`approvals: N`, a rejection by anyone rejects), the
//! run's initiator kept out (`self_approval: false`), and delegation to another person or
//! group.

use workflow_spec::{HumanStep, StepKind};

use super::{Authorize, Machine, StepState};
use crate::error::{DecisionError, RunId};
use crate::journal::{Event, Timestamp, Value};

impl Machine<'_> {
    /// The human step `index`'s keys; `None` for other steps.
    fn human(&self, index: usize) -> Option<&HumanStep> {
        match &self.spec.steps.get(index)?.kind {
            StepKind::Human(human) => Some(human),
            _ => None,
        }
    }

    /// Who started the run, when it was journaled (`Initiated`).
    pub fn initiator(&self) -> Option<&str> {
        self.initiator.as_deref()
    }

    /// The approvals a quorum step has gathered so far (before its last), in order.
    pub fn approvers(&self, step: usize) -> &[String] {
        self.approvers.get(step).map_or(&[], Vec::as_slice)
    }

    /// How many approvals human step `step` needs (1 for any other step).
    pub fn approvals_needed(&self, step: usize) -> u32 {
        self.human(step).map_or(1, |human| human.approvals)
    }

    /// The person rules, once the task is known to be open and `by` admitted for it:
    /// the initiator may not decide a step with `self_approval: false`, and nobody
    /// approves twice towards one quorum.
    pub(super) fn admit_person(
        &self,
        index: usize,
        step: &str,
        by: &str,
    ) -> Result<(), DecisionError> {
        let Some(human) = self.human(index) else {
            return Ok(());
        };
        if !human.self_approval && self.initiator.as_deref() == Some(by) {
            return Err(DecisionError::SelfApproval {
                step: step.to_owned(),
                by: by.to_owned(),
            });
        }
        if self.approvers(index).iter().any(|approver| approver == by) {
            return Err(DecisionError::AlreadyApproved {
                step: step.to_owned(),
                by: by.to_owned(),
            });
        }
        Ok(())
    }

    /// The event an admitted decision becomes: an approval that leaves the quorum short
    /// is `TaskApproved` (the task stays open); the last approval, or any decision with
    /// `approved: false`, is `TaskDecided`.
    pub(super) fn decision_event(
        &self,
        index: usize,
        by: &str,
        decision: Value,
        inbox: Option<u64>,
        via: Option<&str>,
        at: Timestamp,
    ) -> Event {
        let via = via.map(str::to_owned);
        let rejects = decision.get("approved") == Some(&Value::Bool(false));
        let gathered = self.approvers(index).len() as u64;
        let needed = u64::from(self.approvals_needed(index));
        if !rejects && gathered + 1 < needed {
            Event::TaskApproved {
                step: index,
                by: by.to_owned(),
                decision,
                inbox,
                via,
                at,
            }
        } else {
            Event::TaskDecided {
                step: index,
                by: by.to_owned(),
                decision,
                inbox,
                via,
                at,
            }
        }
    }

    /// The event that hands human step `step` to `to`, if `by` may decide it now (the same
    /// admission as a decision: open, in time, admitted by `authorize`, not the initiator
    /// of a `self_approval: false` step; one who approved towards the quorum may delegate
    /// the rest). The deadline stays, and so do the approvals gathered; the delegate
    /// decides from then on.
    pub fn delegate(
        &self,
        run: RunId,
        step: &str,
        by: &str,
        to: &str,
        at: Timestamp,
        authorize: Option<Authorize<'_>>,
    ) -> Result<Event, DecisionError> {
        let index = match self.admit(run, step, by, at, authorize) {
            Ok(index) => index,
            // Who approved towards a quorum may still hand the rest of it on (the last
            // check of admission, so every other one passed).
            Err(DecisionError::AlreadyApproved { .. }) => {
                self.spec
                    .step_index(step)
                    .ok_or_else(|| DecisionError::UnknownTask {
                        run,
                        step: step.to_owned(),
                    })?
            }
            Err(error) => return Err(error),
        };
        let to = to.trim();
        let invalid = |reason: &str| DecisionError::InvalidDelegate {
            step: step.to_owned(),
            reason: reason.to_owned(),
        };
        if to.is_empty() {
            return Err(invalid("no delegate named"));
        }
        if to.len() > MAX_DELEGATE {
            return Err(invalid("the delegate's name is over 256 bytes"));
        }
        if let StepState::Waiting { assignee, .. } = &self.states[index] {
            if assignee == to {
                return Err(invalid("it is assigned to them already"));
            }
        }
        Ok(Event::TaskDelegated {
            step: index,
            by: by.to_owned(),
            to: to.to_owned(),
            inbox: None,
            at,
        })
    }

    /// Applies `Initiated`, `TaskApproved` and `TaskDelegated`.
    pub(super) fn apply_quorum(&mut self, event: &Event) {
        match event {
            Event::Initiated { by, .. } => self.initiator = Some(by.clone()),
            Event::TaskApproved { step, by, .. } => {
                if let Some(approvers) = self.approvers.get_mut(*step) {
                    approvers.push(by.clone());
                }
            }
            Event::TaskDelegated { step, to, .. } => {
                if let Some(StepState::Waiting {
                    deadline,
                    escalated,
                    ..
                }) = self.states.get(*step)
                {
                    let state = StepState::Waiting {
                        assignee: to.clone(),
                        deadline: *deadline,
                        escalated: *escalated,
                    };
                    self.set(*step, state);
                }
            }
            _ => {}
        }
    }
}

/// The longest delegate name taken, in bytes (as an identity).
pub const MAX_DELEGATE: usize = 256;

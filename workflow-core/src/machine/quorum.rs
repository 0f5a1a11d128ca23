//! The rules of who decides a human task beyond "an admitted approver, once, in time":
//! a quorum of distinct approvers (`approvals: N`, a rejection by anyone rejects), the
//! run's initiator kept out (`self_approval: false`), and delegation to another person or
//! group.

use workflow_spec::{HumanStep, OnTimeout, StepKind};

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

    /// Whether `by` is the person human step `step`'s open task was delegated to: they
    /// decide it whatever the authorizer says of their own name (a group it was handed
    /// to is admitted by the authorizer, as any assignee).
    pub(super) fn is_delegate(&self, step: usize, assignee: &str, by: &str) -> bool {
        assignee == by && self.delegates.get(step).and_then(Option::as_deref) == Some(by)
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
    /// of a `self_approval: false` step) and the four-eyes rules hold:
    ///
    /// - whoever approved towards the step's quorum may not hand the rest of it on
    ///   ([`DecisionError::ApproverDelegating`]): one person and a name she chose would
    ///   otherwise complete it;
    /// - the delegate must be someone `authorize` admits for the step's assignee or its
    ///   escalation target ([`DecisionError::DelegateNotAdmitted`]);
    /// - the delegate must not have approved it already ([`DecisionError::DelegateApproved`]);
    /// - a `self_approval: false` step is not handed to the run's initiator
    ///   ([`DecisionError::DelegateIsInitiator`]).
    ///
    /// Without `authorize` (a pre-check where the authorizer is not known) the delegate's
    /// admission is left to the run's owner, which checks it again with its own. The
    /// deadline stays, and so do the approvals gathered; the delegate decides from then on.
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
            Err(DecisionError::AlreadyApproved { step, by }) => {
                return Err(DecisionError::ApproverDelegating { step, by })
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
        self.admit_delegate(index, step, to, authorize)?;
        Ok(Event::TaskDelegated {
            step: index,
            by: by.to_owned(),
            to: to.to_owned(),
            inbox: None,
            at,
        })
    }

    /// The four-eyes rules on the person (or group) a task is handed to.
    fn admit_delegate(
        &self,
        index: usize,
        step: &str,
        to: &str,
        authorize: Option<Authorize<'_>>,
    ) -> Result<(), DecisionError> {
        let Some(human) = self.human(index) else {
            return Ok(());
        };
        let refused =
            |rule: fn(String, String) -> DecisionError| rule(step.to_owned(), to.to_owned());
        if !human.self_approval && self.initiator.as_deref() == Some(to) {
            return Err(refused(|step, to| DecisionError::DelegateIsInitiator {
                step,
                to,
            }));
        }
        if self.approvers(index).iter().any(|approver| approver == to) {
            return Err(refused(|step, to| DecisionError::DelegateApproved {
                step,
                to,
            }));
        }
        if let Some(authorize) = authorize {
            let escalation = match &human.on_timeout {
                OnTimeout::Escalate(target) => Some(target.as_str()),
                _ => None,
            };
            let admitted = std::iter::once(human.assignee.as_str())
                .chain(escalation)
                .any(|group| authorize(group, to));
            if !admitted {
                return Err(refused(|step, to| DecisionError::DelegateNotAdmitted {
                    step,
                    to,
                }));
            }
        }
        Ok(())
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
                if let Some(delegate) = self.delegates.get_mut(*step) {
                    *delegate = Some(to.clone());
                }
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

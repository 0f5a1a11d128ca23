//! Failures and retries: an attempt that failed waits for its retry or fails its step (and,
//! with `on_failure: abort`, stops the run); an operator's retry sends a failed run back to
//! work from its failed step.

use std::collections::BTreeSet;

use workflow_spec::{OnFailure, RetryPolicy};

use super::{Machine, Status, StepState, Stop};
use crate::error::ErrorKind;
use crate::journal::Timestamp;

/// When the next attempt after a failed `attempt` is due, if the policy retries it: the
/// delay for the attempt (with jitter from `seed`), at least the dependency's retry-after
/// (up to the policy's cap), and never past the policy's deadline from the first attempt.
pub(super) fn retry_at(
    policy: &RetryPolicy,
    seed: u64,
    attempt: u32,
    retry_after: Option<u64>,
    at: Timestamp,
    first: Timestamp,
) -> Option<Timestamp> {
    let mut delay = policy.delay(seed, attempt).as_millis() as u64;
    if let Some(after) = retry_after {
        delay = delay.max(after).min(policy.max.as_millis() as u64);
    }
    let until = at.saturating_add(delay);
    match policy.deadline {
        Some(deadline) if until > first.saturating_add(deadline.as_millis() as u64) => None,
        _ => Some(until),
    }
}

impl Machine<'_> {
    pub(super) fn attempt_failed(
        &mut self,
        step: usize,
        attempt: u32,
        kind: ErrorKind,
        message: &str,
        retry_after: Option<u64>,
        at: Timestamp,
    ) {
        let Some(spec) = self.spec.steps.get(step) else {
            return;
        };
        let counted = attempt.saturating_sub(self.attempt_base[step]);
        let retry = spec.retry.as_ref().filter(|policy| {
            self.status == Status::Running && counted < policy.max_attempts && policy.retries(kind)
        });
        let first = self.first_started[step].unwrap_or(at);
        let until = retry.and_then(|policy| {
            retry_at(
                policy,
                self.step_seed(step),
                counted,
                retry_after,
                at,
                first,
            )
        });
        match until {
            Some(until) => self.set(step, StepState::RetryWait { attempt, until }),
            None => self.fail(step, attempt, kind, message.to_owned()),
        }
    }

    pub(super) fn fail(&mut self, step: usize, attempts: u32, kind: ErrorKind, message: String) {
        let Some(spec) = self.spec.steps.get(step) else {
            return;
        };
        self.set(
            step,
            StepState::Failed {
                attempts,
                kind,
                message: message.clone(),
            },
        );
        if spec.on_failure == OnFailure::Abort {
            self.stop_with(Stop::StepFailed {
                step,
                attempts,
                kind,
                message,
            });
        }
    }

    pub(super) fn stop_with(&mut self, stop: Stop) {
        if self.status == Status::Running {
            self.status = Status::Compensating;
            self.stop = Some(stop);
        }
    }

    /// An operator's retry of a failed run: the step that failed and the steps whose
    /// compensation ran start again; every other settled step keeps its outcome. The
    /// workflow deadline, if it was what failed the run, is lifted.
    pub(super) fn retry_from_failure(&mut self) {
        if self.status != Status::Failed {
            return;
        }
        let failed = match &self.stop {
            Some(Stop::StepFailed { step, .. }) => Some(*step),
            _ => None,
        };
        let undone: BTreeSet<usize> = self.compensated.iter().map(|(step, _)| *step).collect();
        for step in 0..self.states.len() {
            if Some(step) == failed || undone.contains(&step) {
                self.set(step, StepState::Pending);
                self.outputs[step] = None;
                self.attempt_base[step] = self.attempts[step];
                self.first_started[step] = None;
                self.deciders[step] = None;
                self.approvers[step].clear();
                self.received.remove(&step);
                self.children.remove(&step);
                if let Some(map) = self.maps.remove(&step) {
                    self.items_running -= map.running;
                }
            }
        }
        self.compensated.clear();
        self.completion_order
            .retain(|step| self.outputs[*step].is_some());
        let maps = &self.maps;
        let outputs = &self.outputs;
        self.undo_order.retain(|(step, item)| match item {
            None => outputs[*step].is_some(),
            Some(_) => maps.contains_key(step),
        });
        self.deadline = None;
        self.safe_after = None;
        self.status = Status::Running;
        self.stop = None;
    }
}

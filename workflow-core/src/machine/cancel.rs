//! What a cancel does to the work in flight: the machine decides, per attempt, when it is
//! stopped and how it settles; the driver drops the attempt's future and journals it.
//!
//! - An internal step (or any step of a dry run) is stopped at once and settles
//!   `cancelled`.
//! - An external effect is told (`StepContext::cancelled`) and given the cancel's grace
//!   period to finish. Past it, it is stopped and settles by what is known of it: its
//!   reconcile function is asked whether the effect happened (the answer settles it:
//!   succeeded, and so compensated, or `cancelled`); without one, an idempotent effect
//!   settles `cancelled` (repeating it is safe), any other `outcome_unknown`.
//!
//! A child step's child run is asked to cancel (`Command::CancelChild`) and settles when
//! the child does.

use workflow_spec::{Effect, StepKind};

use super::{Command, Machine, StepState, Stop, Unit};
use crate::error::ErrorKind;
use crate::journal::{Event, Timestamp};

/// The grace period an external effect gets to finish after its run is cancelled, when
/// the engine sets none: 30 s.
pub const DEFAULT_CANCEL_GRACE_MS: u64 = 30_000;

impl Machine<'_> {
    /// Sets the grace period an external effect in flight gets to finish once its run is
    /// cancelled, in ms ([`DEFAULT_CANCEL_GRACE_MS`] unless set).
    pub fn with_cancel_grace(mut self, grace_ms: u64) -> Self {
        self.cancel_grace_ms = grace_ms;
        self
    }

    /// Whether the run was cancelled and has work in flight that must stop: user code
    /// waiting on `StepContext::cancelled` is told from this moment.
    pub fn is_cancelling(&self) -> bool {
        self.cancelled_at.is_some() && self.stop == Some(Stop::Cancelled) && self.in_flight_any()
    }

    /// When the cancel's grace period of the external effects still in flight ends, if
    /// any is.
    pub(super) fn grace_wake(&self) -> Option<Timestamp> {
        let at = self.cancelled_at?;
        if self.stop != Some(Stop::Cancelled) {
            return None;
        }
        let waiting = self
            .running_units()
            .any(|(unit, _)| !self.stopping.contains(&unit) && self.is_external(unit.0));
        waiting.then(|| at.saturating_add(self.cancel_grace_ms))
    }

    /// The stops a cancelled run's attempts in flight are due at `now`.
    pub(super) fn stop_commands(&self, now: Timestamp, commands: &mut Vec<Command>) {
        let Some(at) = self.cancelled_at else {
            return;
        };
        if self.stop != Some(Stop::Cancelled) {
            return;
        }
        let grace_over = now >= at.saturating_add(self.cancel_grace_ms);
        let due: Vec<(Unit, u32)> = self
            .running_units()
            .filter(|(unit, _)| !self.stopping.contains(unit))
            .filter(|(unit, _)| grace_over || !self.is_external(unit.0))
            .collect();
        for ((step, item), attempt) in due {
            if let Some(command) = self.stop_attempt(step, item, attempt, now) {
                commands.push(command);
            }
        }
    }

    /// Every attempt in flight of an action (not of a child step): steps, and items of
    /// map steps.
    fn running_units(&self) -> impl Iterator<Item = (Unit, u32)> + '_ {
        let steps = self.states.iter().enumerate().filter_map(|(step, state)| {
            match (state, &self.spec.steps[step].kind) {
                (StepState::Running { attempt }, StepKind::Action(_)) => {
                    Some(((step, None), *attempt))
                }
                _ => None,
            }
        });
        let items = self.maps.iter().flat_map(|(step, map)| {
            map.items
                .iter()
                .enumerate()
                .filter_map(move |(item, state)| match state {
                    super::ItemState::Running { attempt } => Some(((*step, Some(item)), *attempt)),
                    _ => None,
                })
        });
        steps.chain(items)
    }

    /// Whether `step` is an external effect that runs for real (not proposed in a dry run).
    fn is_external(&self, step: usize) -> bool {
        !self.dry_run
            && matches!(
                &self.spec.steps[step].kind,
                StepKind::Action(action) if action.effect == Effect::External
            )
    }

    /// How one attempt in flight stops.
    fn stop_attempt(
        &self,
        step: usize,
        item: Option<usize>,
        attempt: u32,
        now: Timestamp,
    ) -> Option<Command> {
        let StepKind::Action(action) = &self.spec.steps[step].kind else {
            return None;
        };
        let id = &self.spec.steps[step].id;
        let settle = |kind: ErrorKind, message: String, safe_after: Option<Timestamp>| {
            Some(match item {
                Some(item) => Event::ItemFailed {
                    step,
                    item,
                    attempt,
                    kind,
                    message,
                    retry_after: None,
                    at: now,
                },
                None => Event::AttemptFailed {
                    step,
                    attempt,
                    kind,
                    message,
                    retry_after: None,
                    safe_after,
                    at: now,
                },
            })
        };
        let settle = if !self.is_external(step) {
            settle(
                ErrorKind::Cancelled,
                format!("the run was cancelled: attempt {attempt} of `{id}` was stopped"),
                None,
            )
        } else if action.reconcile.is_some() {
            // Asked by the driver once the attempt is dropped; its answer settles the step.
            None
        } else if action.idempotent {
            settle(
                ErrorKind::Cancelled,
                format!(
                    "the run was cancelled: attempt {attempt} of the external effect `{id}` was \
                     stopped after the cancel's grace period; it may have taken effect, and \
                     being idempotent, running it again is safe"
                ),
                None,
            )
        } else {
            settle(
                ErrorKind::OutcomeUnknown,
                format!(
                    "the run was cancelled: attempt {attempt} of the external effect `{id}` ({}) \
                     was stopped after the cancel's grace period, and the step is neither \
                     idempotent nor reconciled: whether the effect happened is unknown; it was \
                     stopped at {}; check it",
                    action.call.path,
                    crate::journal::rfc3339(now),
                ),
                // As for an attempt a crash interrupted: a request already on its way may
                // still be decided until then.
                Some(now.saturating_add(self.fence_margin_ms)),
            )
        };
        Some(Command::Stop {
            step,
            item,
            attempt,
            settle,
        })
    }
}

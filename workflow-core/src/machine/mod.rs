//! The pure state machine of a run: journal events in, commands out. No I/O, no clock, no
//! tokio: time arrives inside events and as the `now` argument, so a journal replayed into
//! a fresh machine gives the same state, and tests drive it directly.

use std::collections::BTreeSet;

mod decide;
mod next;

pub use self::decide::{Authorize, Hooks, NoHooks};

use workflow_spec::{Arg, OnFailure, Spec, StepKind};

use crate::error::ErrorKind;
use crate::journal::{Event, Timestamp, Value};

/// Where one step is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepState {
    /// Not started.
    Pending,
    /// An attempt is in flight.
    Running {
        /// The attempt, from 1.
        attempt: u32,
    },
    /// An attempt failed; the next starts at `until`.
    RetryWait {
        /// The attempt that failed.
        attempt: u32,
        /// When the next attempt is due.
        until: Timestamp,
    },
    /// A human task is open.
    Waiting {
        /// Who may decide now.
        assignee: String,
        /// When the task times out.
        deadline: Timestamp,
        /// Whether it was escalated already.
        escalated: bool,
    },
    /// Done with an output.
    Succeeded,
    /// Failed for good.
    Failed {
        /// Attempts made.
        attempts: u32,
        /// The last error's kind.
        kind: ErrorKind,
        /// The last error's message.
        message: String,
    },
    /// Skipped: false condition, absent upstream, or proposed in a dry run.
    Skipped {
        /// Why.
        reason: String,
    },
}

impl StepState {
    /// Whether the step has settled for good (its dependents may start).
    pub fn is_settled(&self) -> bool {
        matches!(
            self,
            StepState::Succeeded | StepState::Failed { .. } | StepState::Skipped { .. }
        )
    }

    /// A short name: `pending`, `running`, `retry_wait`, `waiting`, `succeeded`, `failed`,
    /// `skipped`.
    pub fn name(&self) -> &'static str {
        match self {
            StepState::Pending => "pending",
            StepState::Running { .. } => "running",
            StepState::RetryWait { .. } => "retry_wait",
            StepState::Waiting { .. } => "waiting",
            StepState::Succeeded => "succeeded",
            StepState::Failed { .. } => "failed",
            StepState::Skipped { .. } => "skipped",
        }
    }
}

/// Where the whole run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Steps are being scheduled.
    Running,
    /// A step failed under `abort` (or the run was cancelled or ran past its deadline):
    /// in-flight steps settle, then compensations run in reverse completion order.
    Compensating,
    /// Every step settled without an abort.
    Completed,
    /// Aborted; compensations have run.
    Failed,
    /// Cancelled by an operator; compensations have run.
    Cancelled,
}

impl Status {
    /// Whether the run is over.
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    /// The name used in the store and the CLI.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Compensating => "compensating",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// Why a run stopped scheduling.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Stop {
    /// A step failed under `abort`.
    StepFailed {
        /// The step.
        step: usize,
        /// Attempts made.
        attempts: u32,
        /// The last error's kind.
        kind: ErrorKind,
        /// The last error's message.
        message: String,
    },
    /// The workflow-level deadline passed.
    Deadline,
    /// An operator cancelled the run.
    Cancelled,
}

/// What the driver must do next. Every rule is decided here: the driver only journals,
/// runs actions and compensations, and reports their results as events.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Journal this event and apply it: a decision the machine made (a task opened with
    /// its assignee and deadline, an escalation, an auto-decision, an expiry, a skip, a
    /// dry-run proposal, the run's deadline, an interrupted effect whose outcome is
    /// unknown).
    Journal(Event),
    /// Journal `AttemptStarted` for this attempt, then run it. With `reconcile`, the
    /// step's reconcile function is asked first whether the effect already happened.
    Attempt {
        /// The step.
        step: usize,
        /// The attempt, from 1 (an attempt a crash interrupted keeps its number).
        attempt: u32,
        /// Whether to reconcile before running the effect again.
        reconcile: bool,
    },
    /// Journal `CompensationStarted`, then run the compensation of a completed step.
    Compensate {
        /// The step.
        step: usize,
    },
    /// The run reached a terminal status.
    Finish(Status),
}

/// The state of one run of one workflow.
#[derive(Debug, Clone)]
pub struct Machine<'s> {
    spec: &'s Spec,
    states: Vec<StepState>,
    outputs: Vec<Option<Value>>,
    first_started: Vec<Option<Timestamp>>,
    attempts: Vec<u32>,
    compensated: Vec<bool>,
    // Indexes kept in step with `states` by `set`, so each command costs O(changes), not
    // O(steps): a chain of a thousand steps stays linear.
    dependents: Vec<Vec<usize>>,
    unsettled_deps: Vec<usize>,
    ready: BTreeSet<usize>,
    /// The ready steps that need no slot: human checkpoints and steps to skip.
    ready_free: BTreeSet<usize>,
    timers: BTreeSet<(Timestamp, usize)>,
    orphans: BTreeSet<usize>,
    running: usize,
    waiting: usize,
    unsettled: usize,
    completion_order: Vec<usize>,
    deciders: Vec<Option<String>>,
    /// The compensation journaled as started and not yet finished, and whether a crash
    /// interrupted it (replayed without its result).
    compensating: Option<(usize, bool)>,
    inbox_cursor: u64,
    status: Status,
    stop: Option<Stop>,
    seed: u64,
    dry_run: bool,
    deadline: Option<Timestamp>,
    input: Option<Value>,
    max_in_flight: usize,
}

impl<'s> Machine<'s> {
    /// A machine for `spec`, before its `RunStarted` event.
    pub fn new(spec: &'s Spec) -> Self {
        let n = spec.steps.len();
        let mut dependents = vec![Vec::new(); n];
        let mut unsettled_deps = vec![0; n];
        for (step, node) in spec.steps.iter().enumerate() {
            for &dep in node.deps.iter().filter(|dep| **dep < n) {
                dependents[dep].push(step);
                unsettled_deps[step] += 1;
            }
        }
        let ready: BTreeSet<usize> = (0..n).filter(|step| unsettled_deps[*step] == 0).collect();
        let ready_free = ready
            .iter()
            .copied()
            .filter(|step| spec.steps[*step].is_human())
            .collect();
        Machine {
            spec,
            states: vec![StepState::Pending; n],
            outputs: vec![None; n],
            first_started: vec![None; n],
            attempts: vec![0; n],
            compensated: vec![false; n],
            dependents,
            unsettled_deps,
            ready,
            ready_free,
            timers: BTreeSet::new(),
            orphans: BTreeSet::new(),
            running: 0,
            waiting: 0,
            unsettled: n,
            completion_order: Vec::new(),
            deciders: vec![None; n],
            compensating: None,
            inbox_cursor: 0,
            status: Status::Running,
            stop: None,
            seed: 0,
            dry_run: false,
            deadline: None,
            input: None,
            max_in_flight: usize::MAX,
        }
    }

    /// Limits how many attempts run at once (at least 1).
    pub fn with_max_in_flight(mut self, limit: usize) -> Self {
        self.max_in_flight = limit.max(1);
        self
    }

    /// A machine rebuilt from a journal. Attempts that started without a result are marked
    /// orphaned, so [`Machine::commands`] re-runs them.
    pub fn replay<'e>(spec: &'s Spec, events: impl IntoIterator<Item = &'e Event>) -> Self {
        let mut machine = Machine::new(spec);
        for event in events {
            machine.apply(event);
        }
        machine.orphans = (0..machine.states.len())
            .filter(|step| matches!(machine.states[*step], StepState::Running { .. }))
            .collect();
        if let Some((_, interrupted)) = &mut machine.compensating {
            *interrupted = true;
        }
        machine
    }

    /// The spec.
    pub fn spec(&self) -> &'s Spec {
        self.spec
    }

    /// Every step's state, by index.
    pub fn states(&self) -> &[StepState] {
        &self.states
    }

    /// Every step's output, by index (`None` while absent).
    pub fn outputs(&self) -> &Vec<Option<Value>> {
        &self.outputs
    }

    /// The run's inputs, once started.
    pub fn input(&self) -> Option<&Value> {
        self.input.as_ref()
    }

    /// Attempts started per step.
    pub fn attempts(&self) -> &[u32] {
        &self.attempts
    }

    /// The run's status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Why the run stopped scheduling, if it did.
    pub fn stop(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }

    /// Whether this is a dry run.
    pub fn dry_run(&self) -> bool {
        self.dry_run
    }

    /// The steps in the order they completed.
    pub fn completion_order(&self) -> &[usize] {
        &self.completion_order
    }

    /// The jitter seed of a step: the run's seed mixed with the step index.
    pub fn step_seed(&self, step: usize) -> u64 {
        self.seed ^ (step as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    /// Applies one journaled event.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                input,
                seed,
                dry_run,
                deadline,
                ..
            } => {
                self.input = Some(input.clone());
                self.seed = *seed;
                self.dry_run = *dry_run;
                self.deadline = *deadline;
            }
            Event::AttemptStarted { step, attempt, at } => {
                if *step < self.states.len() {
                    self.set(*step, StepState::Running { attempt: *attempt });
                    self.attempts[*step] = *attempt;
                    self.first_started[*step].get_or_insert(*at);
                }
            }
            Event::AttemptFailed {
                step,
                attempt,
                kind,
                message,
                retry_after,
                at,
            } => self.attempt_failed(*step, *attempt, *kind, message, *retry_after, *at),
            Event::StepSucceeded { step, output, .. } => self.succeed(*step, output.clone()),
            Event::TaskDecided {
                step, by, decision, ..
            } => {
                if let Some(decider) = self.deciders.get_mut(*step) {
                    *decider = Some(by.clone());
                }
                self.succeed(*step, decision.clone());
            }
            Event::MessageRefused { .. } => {}
            Event::StepSkipped { step, reason, .. } => self.set(
                *step,
                StepState::Skipped {
                    reason: reason.clone(),
                },
            ),
            Event::EffectProposed { .. } => {}
            Event::TaskOpened {
                step,
                assignee,
                deadline,
                ..
            } => self.set(
                *step,
                StepState::Waiting {
                    assignee: assignee.clone(),
                    deadline: *deadline,
                    escalated: false,
                },
            ),
            Event::TaskEscalated {
                step, to, deadline, ..
            } => self.set(
                *step,
                StepState::Waiting {
                    assignee: to.clone(),
                    deadline: *deadline,
                    escalated: true,
                },
            ),
            Event::TaskExpired { step, .. } => self.fail(
                *step,
                1,
                ErrorKind::Timeout,
                "no decision before the deadline".into(),
            ),
            Event::CompensationStarted { step, .. } => self.compensating = Some((*step, false)),
            Event::Compensated { step, .. } => {
                if let Some(flag) = self.compensated.get_mut(*step) {
                    *flag = true;
                }
                self.compensating = None;
            }
            Event::DeadlinePassed { .. } => self.stop_with(Stop::Deadline),
            Event::Cancelled { .. } => self.stop_with(Stop::Cancelled),
            Event::Retried { .. } => self.retry_from_failure(),
        }
        if let Some(id) = event.inbox() {
            self.inbox_cursor = self.inbox_cursor.max(id);
        }
        self.settle();
    }

    /// The one place step states change: keeps the indexes in step.
    fn set(&mut self, step: usize, state: StepState) {
        let Some(old) = self.states.get(step) else {
            return;
        };
        let was_settled = old.is_settled();
        match *old {
            StepState::Pending => self.unmark_ready(step),
            StepState::Running { .. } => {
                self.running -= 1;
                self.orphans.remove(&step);
            }
            StepState::RetryWait { until, .. } => {
                self.timers.remove(&(until, step));
            }
            StepState::Waiting { deadline, .. } => {
                self.timers.remove(&(deadline, step));
                self.waiting -= 1;
            }
            _ => {}
        }
        match &state {
            StepState::Pending if self.unsettled_deps[step] == 0 => self.mark_ready(step),
            StepState::Running { .. } => self.running += 1,
            StepState::RetryWait { until, .. } => {
                self.timers.insert((*until, step));
            }
            StepState::Waiting { deadline, .. } => {
                self.timers.insert((*deadline, step));
                self.waiting += 1;
            }
            _ => {}
        }
        let settled = state.is_settled();
        self.states[step] = state;
        if settled == was_settled {
            return;
        }
        if settled {
            self.unsettled -= 1;
        } else {
            self.unsettled += 1;
        }
        for index in 0..self.dependents[step].len() {
            let next = self.dependents[step][index];
            if settled {
                self.unsettled_deps[next] -= 1;
                if self.unsettled_deps[next] == 0 && self.states[next] == StepState::Pending {
                    self.mark_ready(next);
                }
            } else {
                self.unsettled_deps[next] += 1;
                self.unmark_ready(next);
            }
        }
    }

    fn mark_ready(&mut self, step: usize) {
        self.ready.insert(step);
        if self.spec.steps[step].is_human() || self.absent_required_arg(step).is_some() {
            self.ready_free.insert(step);
        }
    }

    fn unmark_ready(&mut self, step: usize) {
        self.ready.remove(&step);
        self.ready_free.remove(&step);
    }

    fn succeed(&mut self, step: usize, output: Value) {
        if step < self.states.len() {
            self.set(step, StepState::Succeeded);
            self.outputs[step] = Some(output);
            self.completion_order.push(step);
        }
    }

    fn attempt_failed(
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
        let retry = spec.retry.as_ref().filter(|policy| {
            self.status == Status::Running && attempt < policy.max_attempts && policy.retries(kind)
        });
        let until = retry.and_then(|policy| {
            let mut delay = policy.delay(self.step_seed(step), attempt).as_millis() as u64;
            if let Some(after) = retry_after {
                delay = delay.max(after).min(policy.max.as_millis() as u64);
            }
            let until = at.saturating_add(delay);
            let first = self.first_started[step].unwrap_or(at);
            match policy.deadline {
                Some(deadline) if until > first.saturating_add(deadline.as_millis() as u64) => None,
                _ => Some(until),
            }
        });
        match until {
            Some(until) => self.set(step, StepState::RetryWait { attempt, until }),
            None => self.fail(step, attempt, kind, message.to_owned()),
        }
    }

    fn fail(&mut self, step: usize, attempts: u32, kind: ErrorKind, message: String) {
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

    fn stop_with(&mut self, stop: Stop) {
        if self.status == Status::Running {
            self.status = Status::Compensating;
            self.stop = Some(stop);
        }
    }

    /// An operator's retry of a failed run: the step that failed and the steps whose
    /// compensation ran start again; every other settled step keeps its outcome. The
    /// workflow deadline, if it was what failed the run, is lifted.
    fn retry_from_failure(&mut self) {
        if self.status != Status::Failed {
            return;
        }
        let failed = match &self.stop {
            Some(Stop::StepFailed { step, .. }) => Some(*step),
            _ => None,
        };
        for step in 0..self.states.len() {
            if Some(step) == failed || self.compensated[step] {
                self.set(step, StepState::Pending);
                self.outputs[step] = None;
                self.attempts[step] = 0;
                self.first_started[step] = None;
                self.compensated[step] = false;
                self.deciders[step] = None;
            }
        }
        self.completion_order
            .retain(|step| self.outputs[*step].is_some());
        self.deadline = None;
        self.status = Status::Running;
        self.stop = None;
    }

    /// Moves the run to a terminal status when nothing is left to do.
    fn settle(&mut self) {
        match self.status {
            Status::Running if self.unsettled == 0 => {
                self.status = Status::Completed;
            }
            Status::Compensating
                if !self.in_flight_any()
                    && self.compensating.is_none()
                    && self.next_compensation().is_none() =>
            {
                self.status = match self.stop {
                    Some(Stop::Cancelled) => Status::Cancelled,
                    _ => Status::Failed,
                };
            }
            _ => {}
        }
    }

    fn in_flight_any(&self) -> bool {
        self.running > 0
    }

    /// The next compensation to run: completed steps with a `compensate`, in reverse
    /// completion order.
    fn next_compensation(&self) -> Option<usize> {
        self.completion_order.iter().rev().copied().find(|step| {
            !self.compensated[*step]
                && matches!(
                    &self.spec.steps[*step].kind,
                    StepKind::Action(action) if action.compensate.is_some()
                )
        })
    }

    /// Whether a human task is open.
    pub fn has_open_tasks(&self) -> bool {
        self.waiting > 0
    }

    /// Whether a step's output is absent for good (failed or skipped).
    pub fn is_absent(&self, step: usize) -> bool {
        matches!(
            self.states.get(step),
            Some(StepState::Failed { .. } | StepState::Skipped { .. })
        )
    }

    /// The earliest future time at which [`Machine::commands`] may have more to do.
    pub fn next_wake(&self) -> Option<Timestamp> {
        if self.status != Status::Running {
            return None;
        }
        let timer = self.timers.first().map(|(at, _)| *at);
        timer.into_iter().chain(self.deadline).min()
    }

    /// A data argument whose step is absent although its type says it is always present
    /// (only a dry run's proposals do that): the step cannot run and is skipped.
    fn absent_required_arg(&self, step: usize) -> Option<usize> {
        let call = self.spec.steps[step].action()?;
        call.args.iter().find_map(|arg| match arg {
            Arg::Step(dep) if self.is_absent(*dep) && !self.spec.steps[*dep].optional => Some(*dep),
            _ => None,
        })
    }

    /// Who decided each human step, by index.
    pub fn deciders(&self) -> &[Option<String>] {
        &self.deciders
    }

    /// The id of the last inbox message this run took in.
    pub fn inbox_cursor(&self) -> u64 {
        self.inbox_cursor
    }
}

#[cfg(test)]
mod tests;

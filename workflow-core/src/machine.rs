//! The pure state machine of a run: journal events in, commands out. No I/O, no clock, no
//! tokio: time arrives inside events and as the `now` argument, so a journal replayed into
//! a fresh machine gives the same state, and tests drive it directly.

use std::collections::BTreeSet;

use workflow_spec::{Arg, OnFailure, OnTimeout, Spec, StepKind};

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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run an attempt of an action step. For attempt 1 the driver evaluates the condition
    /// first; `resumed` means the attempt was journaled before a crash and has no result.
    Start {
        /// The step.
        step: usize,
        /// The attempt.
        attempt: u32,
        /// Whether this re-runs an attempt interrupted by a crash.
        resumed: bool,
    },
    /// Skip a step whose required upstream output is absent.
    Skip {
        /// The step.
        step: usize,
        /// The absent upstream step.
        upstream: usize,
    },
    /// Open the task of a human step (after evaluating its condition).
    OpenTask {
        /// The step.
        step: usize,
    },
    /// A human task's deadline passed: apply `on_timeout`.
    TaskDue {
        /// The step.
        step: usize,
        /// Whether it was escalated before (escalation happens once).
        escalated: bool,
    },
    /// The workflow's deadline passed.
    DeadlineDue,
    /// Run the compensation of a completed step.
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
            Event::TaskDecided { step, decision, .. } => self.succeed(*step, decision.clone()),
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
            Event::Compensated { step, .. } => {
                if let Some(flag) = self.compensated.get_mut(*step) {
                    *flag = true;
                }
            }
            Event::DeadlinePassed { .. } => self.stop_with(Stop::Deadline),
            Event::Cancelled { .. } => self.stop_with(Stop::Cancelled),
            Event::Retried { .. } => self.retry_from_failure(),
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
            Status::Compensating if !self.in_flight_any() && self.next_compensation().is_none() => {
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

    /// What to do now. Each step appears at most once; the driver journals and applies the
    /// resulting events before asking again.
    pub fn commands(&self, now: Timestamp) -> Vec<Command> {
        let mut commands = Vec::new();
        if self.status.is_terminal() {
            commands.push(Command::Finish(self.status));
            return commands;
        }
        if self.status == Status::Compensating {
            if !self.in_flight_any() {
                if let Some(step) = self.next_compensation() {
                    commands.push(Command::Compensate { step });
                }
            }
            return commands;
        }
        if self.deadline.is_some_and(|deadline| now >= deadline) {
            commands.push(Command::DeadlineDue);
            return commands;
        }
        // Only orphans, ready steps and due timers can yield commands; they are taken in
        // declaration order, as a scan of every step would.
        // Of the ready steps that need a slot, only as many as there are free slots can
        // start, and they start in declaration order: looking further is wasted work.
        let mut in_flight = self.running - self.orphans.len();
        let slots = self.max_in_flight.saturating_sub(in_flight);
        let due = self.timers.iter().take_while(|(at, _)| *at <= now);
        let needing_slots = self
            .ready
            .iter()
            .copied()
            .filter(|step| !self.ready_free.contains(step))
            .take(slots);
        let mut candidates: Vec<usize> = self
            .orphans
            .iter()
            .copied()
            .chain(self.ready_free.iter().copied())
            .chain(needing_slots)
            .chain(due.map(|(_, step)| *step))
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        for step in candidates {
            let spec = &self.spec.steps[step];
            match &self.states[step] {
                StepState::Running { attempt }
                    if self.orphans.contains(&step) && in_flight < self.max_in_flight =>
                {
                    in_flight += 1;
                    commands.push(Command::Start {
                        step,
                        attempt: *attempt,
                        resumed: true,
                    });
                }
                StepState::Pending => {
                    if let Some(upstream) = self.absent_required_arg(step) {
                        commands.push(Command::Skip { step, upstream });
                    } else if spec.is_human() {
                        commands.push(Command::OpenTask { step });
                    } else if in_flight < self.max_in_flight {
                        in_flight += 1;
                        commands.push(Command::Start {
                            step,
                            attempt: 1,
                            resumed: false,
                        });
                    }
                }
                StepState::RetryWait { attempt, until }
                    if *until <= now && in_flight < self.max_in_flight =>
                {
                    in_flight += 1;
                    commands.push(Command::Start {
                        step,
                        attempt: attempt + 1,
                        resumed: false,
                    });
                }
                StepState::Waiting {
                    deadline,
                    escalated,
                    ..
                } if *deadline <= now => commands.push(Command::TaskDue {
                    step,
                    escalated: *escalated,
                }),
                _ => {}
            }
        }
        commands
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

    /// What a human step does on timeout, and its timeout.
    pub fn on_timeout(&self, step: usize) -> Option<&'s OnTimeout> {
        match &self.spec.steps.get(step)?.kind {
            StepKind::Human(human) => Some(&human.on_timeout),
            StepKind::Action(_) | StepKind::Child(_) | StepKind::Event(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(source: &str) -> Spec {
        let parsed = workflow_spec::parse::parse_str(source);
        assert!(
            parsed.errors.is_empty(),
            "{:?}",
            parsed.error().map(|e| e.to_string())
        );
        parsed.spec.expect("a valid spec")
    }

    fn started(machine: &mut Machine<'_>) {
        machine.apply(&Event::RunStarted {
            workflow: "W".into(),
            fingerprint: String::new(),
            input: json!({}),
            seed: 3,
            trace_id: String::new(),
            dry_run: false,
            deadline: None,
            at: 0,
        });
    }

    fn start(step: usize) -> Command {
        Command::Start {
            step,
            attempt: 1,
            resumed: false,
        }
    }

    fn run(machine: &mut Machine<'_>, step: usize, at: Timestamp) {
        machine.apply(&Event::AttemptStarted {
            step,
            attempt: 1,
            at,
        });
        machine.apply(&Event::StepSucceeded {
            step,
            output: json!(step),
            at,
        });
    }

    const DIAMOND: &str = "workflow W() {
        step a -> u32 { action: f(), compensate: undo(a) }
        step b -> u32 { action: g(a), compensate: undo(b) }
        step c -> u32 { action: g(a) }
        step d -> u32 { action: h(b, c) }
    }";

    #[test]
    fn a_diamond_runs_its_branches_together_and_completes() {
        let spec = spec(DIAMOND);
        let mut machine = Machine::new(&spec);
        started(&mut machine);
        assert_eq!(machine.commands(0), [start(0)]);
        run(&mut machine, 0, 1);
        assert_eq!(machine.commands(1), [start(1), start(2)]);
        run(&mut machine, 2, 2);
        run(&mut machine, 1, 3);
        assert_eq!(machine.commands(3), [start(3)]);
        run(&mut machine, 3, 4);
        assert_eq!(machine.status(), Status::Completed);
        assert_eq!(machine.commands(4), [Command::Finish(Status::Completed)]);
        assert_eq!(machine.completion_order(), [0, 2, 1, 3]);
    }

    #[test]
    fn the_in_flight_limit_holds_back_ready_steps() {
        let spec = spec(DIAMOND);
        let mut machine = Machine::new(&spec).with_max_in_flight(1);
        started(&mut machine);
        run(&mut machine, 0, 1);
        assert_eq!(machine.commands(1), [start(1)]);
    }

    #[test]
    fn a_transient_failure_waits_its_delay_then_retries() {
        let spec = spec(
            "workflow W() { step a -> u32 { action: f(), retry: { max_attempts: 2, backoff: fixed, initial: 5s, max: 5s, jitter: none } } }",
        );
        let mut machine = Machine::new(&spec);
        started(&mut machine);
        machine.apply(&Event::AttemptStarted {
            step: 0,
            attempt: 1,
            at: 0,
        });
        machine.apply(&Event::AttemptFailed {
            step: 0,
            attempt: 1,
            kind: ErrorKind::Unavailable,
            message: "503".into(),
            retry_after: None,
            at: 100,
        });
        assert_eq!(
            machine.states()[0],
            StepState::RetryWait {
                attempt: 1,
                until: 5_100
            }
        );
        assert_eq!(machine.next_wake(), Some(5_100));
        assert!(machine.commands(5_099).is_empty());
        assert_eq!(
            machine.commands(5_100),
            [Command::Start {
                step: 0,
                attempt: 2,
                resumed: false
            }]
        );
        machine.apply(&Event::AttemptStarted {
            step: 0,
            attempt: 2,
            at: 5_100,
        });
        machine.apply(&Event::AttemptFailed {
            step: 0,
            attempt: 2,
            kind: ErrorKind::Unavailable,
            message: "503".into(),
            retry_after: None,
            at: 5_200,
        });
        assert_eq!(
            machine.status(),
            Status::Failed,
            "nothing to compensate, nothing in flight"
        );
        assert_eq!(machine.commands(5_200), [Command::Finish(Status::Failed)]);
    }

    #[test]
    fn an_abort_compensates_in_reverse_completion_order() {
        let spec = spec(DIAMOND);
        let mut machine = Machine::new(&spec);
        started(&mut machine);
        run(&mut machine, 0, 1);
        run(&mut machine, 1, 2);
        machine.apply(&Event::AttemptStarted {
            step: 2,
            attempt: 1,
            at: 3,
        });
        machine.apply(&Event::AttemptFailed {
            step: 2,
            attempt: 1,
            kind: ErrorKind::Validation,
            message: "bad".into(),
            retry_after: None,
            at: 3,
        });
        assert_eq!(machine.status(), Status::Compensating);
        assert_eq!(machine.commands(3), [Command::Compensate { step: 1 }]);
        machine.apply(&Event::Compensated {
            step: 1,
            error: None,
            at: 4,
        });
        assert_eq!(machine.commands(4), [Command::Compensate { step: 0 }]);
        machine.apply(&Event::Compensated {
            step: 0,
            error: None,
            at: 5,
        });
        assert_eq!(machine.status(), Status::Failed);
        assert!(matches!(
            machine.stop(),
            Some(Stop::StepFailed {
                step: 2,
                attempts: 1,
                ..
            })
        ));
    }

    #[test]
    fn an_attempt_without_a_result_is_resumed_after_a_replay() {
        let spec = spec(DIAMOND);
        let events = [
            Event::RunStarted {
                workflow: "W".into(),
                fingerprint: String::new(),
                input: json!({}),
                seed: 3,
                trace_id: String::new(),
                dry_run: false,
                deadline: None,
                at: 0,
            },
            Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at: 0,
            },
        ];
        let machine = Machine::replay(&spec, &events);
        assert_eq!(
            machine.commands(10),
            [Command::Start {
                step: 0,
                attempt: 1,
                resumed: true
            }]
        );
    }

    #[test]
    fn a_human_task_escalates_when_due() {
        let spec = spec(
            r#"workflow W() { human h -> Approval { assignee: "a", timeout: 1h, on_timeout: escalate("b") } }"#,
        );
        let mut machine = Machine::new(&spec);
        started(&mut machine);
        assert_eq!(machine.commands(0), [Command::OpenTask { step: 0 }]);
        machine.apply(&Event::TaskOpened {
            step: 0,
            assignee: "a".into(),
            prompt: None,
            deadline: 3_600_000,
            at: 0,
        });
        assert!(machine.commands(3_599_999).is_empty());
        assert_eq!(
            machine.commands(3_600_000),
            [Command::TaskDue {
                step: 0,
                escalated: false
            }]
        );
        assert_eq!(
            machine.on_timeout(0),
            Some(&OnTimeout::Escalate("b".into()))
        );
    }
}

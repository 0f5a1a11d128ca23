//! The pure state machine of a run: journal events in, commands out. No I/O, no clock, no
//! tokio: time arrives inside events and as the `now` argument, so a journal replayed into
//! a fresh machine gives the same state, and tests drive it directly.

use std::collections::BTreeSet;

pub mod admission;
mod cancel;
mod decide;
mod failure;
mod map;
mod next;
mod quorum;
mod types;

pub use self::cancel::DEFAULT_CANCEL_GRACE_MS;
pub use self::decide::{Accepted, Authorize, Hooks, NoHooks};
pub use self::map::ItemState;
pub use self::quorum::MAX_DELEGATE;
pub use self::types::{Command, Status, StepState, Stop, TIMEOUT_DECIDER, VIA_LINK};

use std::collections::BTreeMap;

use workflow_spec::{Arg, OnEventTimeout, Spec, Step, StepKind};

use self::map::MapState;
use crate::error::{ErrorKind, RunId};
use crate::journal::{Event, Timestamp, Value};

/// What compensation undoes: a completed step, or one completed item of a map step.
type Unit = (usize, Option<usize>);

/// Whether a ready step starts without taking one of the run's slots: human checkpoints
/// and event waits do no work, and a map step's items take the slots, not the step.
fn needs_no_slot(step: &Step) -> bool {
    step.is_human() || step.is_event() || step.for_each().is_some()
}

/// The state of one run of one workflow.
#[derive(Debug, Clone)]
pub struct Machine<'s> {
    spec: &'s Spec,
    states: Vec<StepState>,
    outputs: Vec<Option<Value>>,
    first_started: Vec<Option<Timestamp>>,
    attempts: Vec<u32>,
    /// Attempts made before the last operator's retry, by step: attempt numbers go on from
    /// there (so two executions never share a number), while the retry policy counts from
    /// the retry.
    attempt_base: Vec<u32>,
    /// How long after an interrupted external effect is found (its owner's lease had
    /// ended by then) that owner may still be finishing a request already on its way:
    /// the self-fencing margin of the engine, in ms.
    fence_margin_ms: u64,
    /// How long an external effect in flight may finish once its run is cancelled, in ms.
    cancel_grace_ms: u64,
    /// When the run was cancelled, if it was cancelled while running.
    cancelled_at: Option<Timestamp>,
    /// The attempts a cancel stopped whose reconcile function is being asked.
    stopping: BTreeSet<Unit>,
    /// From when an operator's retry is safe: the latest `safe_after` of an interrupted
    /// external effect since the last retry.
    safe_after: Option<Timestamp>,
    // Indexes kept in step with `states` by `set`, so each command costs O(changes), not
    // O(steps): a chain of a thousand steps stays linear.
    /// The steps that depend on step `s` are `dependents[dependents_at[s]..dependents_at[s + 1]]`
    /// (one flat list, built with two allocations).
    dependents: Vec<usize>,
    dependents_at: Vec<usize>,
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
    /// What completed, in order, as compensation sees it: steps, and each item of a map.
    undo_order: Vec<Unit>,
    compensated: BTreeSet<Unit>,
    deciders: Vec<Option<String>>,
    /// Per step: the approvals a quorum (`approvals: N`) gathered before its last.
    approvers: Vec<Vec<String>>,
    /// Per step: who its task was last delegated to (`TaskDelegated`).
    delegates: Vec<Option<String>>,
    /// Who started the run, when journaled (`Initiated`).
    initiator: Option<String>,
    /// The compensation journaled as started and not yet finished, and whether a crash
    /// interrupted it (replayed without its result).
    compensating: Option<(Unit, bool)>,
    /// The map steps that listed their items.
    maps: BTreeMap<usize, MapState>,
    /// Items of map steps in flight, in all.
    items_running: usize,
    /// Events that arrived before their step waited, and the event each step took.
    buffered: BTreeMap<usize, (String, Value)>,
    received: BTreeMap<usize, String>,
    /// Child runs of child steps, and whether they were asked to cancel.
    children: BTreeMap<usize, (RunId, bool)>,
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
        let mut unsettled_deps = vec![0; n];
        let mut dependents_at = vec![0; n + 1];
        for (step, node) in spec.steps.iter().enumerate() {
            for &dep in node.deps.iter().filter(|dep| **dep < n) {
                dependents_at[dep + 1] += 1;
                unsettled_deps[step] += 1;
            }
        }
        for step in 0..n {
            dependents_at[step + 1] += dependents_at[step];
        }
        let mut dependents = vec![0; dependents_at[n]];
        let mut filled = dependents_at.clone();
        for (step, node) in spec.steps.iter().enumerate() {
            for &dep in node.deps.iter().filter(|dep| **dep < n) {
                dependents[filled[dep]] = step;
                filled[dep] += 1;
            }
        }
        let ready: BTreeSet<usize> = (0..n).filter(|step| unsettled_deps[*step] == 0).collect();
        let ready_free = ready
            .iter()
            .copied()
            .filter(|step| needs_no_slot(&spec.steps[*step]))
            .collect();
        Machine {
            spec,
            states: vec![StepState::Pending; n],
            outputs: vec![None; n],
            first_started: vec![None; n],
            attempts: vec![0; n],
            attempt_base: vec![0; n],
            fence_margin_ms: 0,
            cancel_grace_ms: cancel::DEFAULT_CANCEL_GRACE_MS,
            cancelled_at: None,
            stopping: BTreeSet::new(),
            safe_after: None,
            dependents,
            dependents_at,
            unsettled_deps,
            ready,
            ready_free,
            timers: BTreeSet::new(),
            orphans: BTreeSet::new(),
            running: 0,
            waiting: 0,
            unsettled: n,
            completion_order: Vec::new(),
            undo_order: Vec::new(),
            compensated: BTreeSet::new(),
            deciders: vec![None; n],
            approvers: vec![Vec::new(); n],
            delegates: vec![None; n],
            initiator: None,
            compensating: None,
            maps: BTreeMap::new(),
            items_running: 0,
            buffered: BTreeMap::new(),
            received: BTreeMap::new(),
            children: BTreeMap::new(),
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

    /// The self-fencing margin of the engine driving the run, in ms: an interrupted
    /// external effect found by this machine is safe to retry that long after it is found.
    pub fn with_fence_margin(mut self, margin_ms: u64) -> Self {
        self.fence_margin_ms = margin_ms;
        self
    }

    /// A machine rebuilt from a journal. Attempts that started without a result are marked
    /// orphaned, so [`Machine::next`] re-runs them.
    pub fn replay<'e>(spec: &'s Spec, events: impl IntoIterator<Item = &'e Event>) -> Self {
        let mut machine = Machine::new(spec);
        for event in events {
            machine.apply(event);
        }
        // A stopped attempt whose reconcile was not answered is stopped (and asked) again.
        machine.stopping.clear();
        machine.orphans = (0..machine.states.len())
            .filter(|step| matches!(machine.states[*step], StepState::Running { .. }))
            .collect();
        for map in machine.maps.values_mut() {
            map.orphan_running();
        }
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
            Event::MapStarted { step, count, at } => self.map_started(*step, *count, *at),
            Event::ItemStarted {
                step,
                item,
                attempt,
                at,
            } => self.item_started(*step, *item, *attempt, *at),
            Event::ItemFailed {
                step,
                item,
                attempt,
                kind,
                message,
                retry_after,
                at,
            } => self.item_failed(*step, *item, *attempt, *kind, message, *retry_after, *at),
            Event::ItemSucceeded {
                step, item, output, ..
            } => self.item_succeeded(*step, *item, output.clone()),
            Event::StepFailed {
                step,
                attempts,
                kind,
                message,
                ..
            } => self.fail(*step, *attempts, *kind, message.clone()),
            Event::EventAwaited { step, deadline, .. } => self.set(
                *step,
                StepState::Awaiting {
                    deadline: *deadline,
                },
            ),
            Event::EventBuffered {
                step,
                event_id,
                payload,
                ..
            } => {
                self.buffered
                    .insert(*step, (event_id.clone(), payload.clone()));
            }
            Event::EventReceived {
                step,
                event_id,
                payload,
                ..
            } => {
                self.buffered.remove(step);
                self.received.insert(*step, event_id.clone());
                self.succeed(*step, payload.clone());
            }
            Event::EventExpired { step, .. } => self.event_expired(*step),
            Event::ChildStarted { step, child, .. } => {
                self.children.insert(*step, (*child, false));
            }
            Event::ChildCancelled { step, .. } => {
                if let Some((_, cancelled)) = self.children.get_mut(step) {
                    *cancelled = true;
                }
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
                safe_after,
                at,
            } => {
                if let Some(safe) = *safe_after {
                    self.safe_after = Some(self.safe_after.map_or(safe, |s| s.max(safe)));
                }
                self.attempt_failed(*step, *attempt, *kind, message, *retry_after, *at);
            }
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
            Event::CompensationStarted { step, item, .. } => {
                self.compensating = Some(((*step, *item), false));
            }
            Event::Compensated { step, item, .. } => {
                self.compensated.insert((*step, *item));
                self.compensating = None;
            }
            Event::DeadlinePassed { .. } => self.stop_with(Stop::Deadline),
            Event::Cancelled { at, .. } => {
                if self.status == Status::Running {
                    self.cancelled_at = Some(*at);
                }
                self.stop_with(Stop::Cancelled)
            }
            Event::AttemptStopped { step, item, .. } => {
                self.stopping.insert((*step, *item));
            }
            Event::Retried { .. } => self.retry_from_failure(),
            Event::Initiated { .. } | Event::TaskApproved { .. } | Event::TaskDelegated { .. } => {
                self.apply_quorum(event)
            }
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
            StepState::Waiting { deadline, .. } | StepState::Awaiting { deadline } => {
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
            StepState::Waiting { deadline, .. } | StepState::Awaiting { deadline } => {
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
        for index in self.dependents_at[step]..self.dependents_at[step + 1] {
            let next = self.dependents[index];
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
        if needs_no_slot(&self.spec.steps[step]) || self.absent_required_arg(step).is_some() {
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
            // A map's items were each recorded as they completed.
            if !self.maps.contains_key(&step) {
                self.undo_order.push((step, None));
            }
        }
    }

    /// An event step's deadline passed: `on_timeout: abort` fails the run, `continue`
    /// settles the step without a payload.
    fn event_expired(&mut self, step: usize) {
        let message = "no event arrived before the deadline".to_owned();
        let abort = matches!(
            &self.spec.steps[step].kind,
            StepKind::Event(event) if event.on_timeout == OnEventTimeout::Abort
        );
        self.set(
            step,
            StepState::Failed {
                attempts: 0,
                kind: ErrorKind::Timeout,
                message: message.clone(),
            },
        );
        if abort {
            self.stop_with(Stop::StepFailed {
                step,
                attempts: 0,
                kind: ErrorKind::Timeout,
                message,
            });
        }
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
        self.running + self.items_running > 0
    }

    /// The next compensation to run: completed steps (and items of maps) with a
    /// `compensate`, in reverse completion order.
    fn next_compensation(&self) -> Option<Unit> {
        self.undo_order.iter().rev().copied().find(|unit| {
            !self.compensated.contains(unit)
                && matches!(
                    &self.spec.steps[unit.0].kind,
                    StepKind::Action(action) if action.compensate.is_some()
                )
        })
    }

    /// Whether a human task is open or an event step waits.
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

    /// The earliest future time at which [`Machine::next`] may have more to do.
    pub fn next_wake(&self) -> Option<Timestamp> {
        if self.status == Status::Compensating {
            return self.grace_wake();
        }
        if self.status != Status::Running {
            return None;
        }
        let timer = self.timers.first().map(|(at, _)| *at);
        let items = self.maps.values().filter_map(MapState::next_wake);
        timer.into_iter().chain(items).chain(self.deadline).min()
    }

    /// A data argument whose step is absent although its type says it is always present
    /// (only a dry run's proposals do that): the step cannot run and is skipped.
    fn absent_required_arg(&self, step: usize) -> Option<usize> {
        let absent = |arg: &Arg| match arg {
            Arg::Step(dep) if self.is_absent(*dep) && !self.spec.steps[*dep].optional => Some(*dep),
            _ => None,
        };
        match &self.spec.steps[step].kind {
            StepKind::Action(action) => action.call.args.iter().find_map(absent),
            StepKind::Child(child) => child.args.iter().find_map(|a| absent(&a.arg)),
            StepKind::Human(_) | StepKind::Event(_) => None,
        }
    }

    /// The output of one item of a map step, once it succeeded.
    pub fn item_output(&self, step: usize, item: usize) -> Option<&Value> {
        self.maps.get(&step)?.outputs.get(item)?.as_ref()
    }

    /// The child run of a child step, once started.
    pub fn child(&self, step: usize) -> Option<RunId> {
        self.children.get(&step).map(|(child, _)| *child)
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

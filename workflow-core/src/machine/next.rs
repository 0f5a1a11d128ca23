//! What a run does next: the scheduling rules, with every value decided.

use workflow_spec::{Effect, OnTimeout, StepKind};

use super::types::TIMEOUT_DECIDER;
use super::{Command, Hooks, Machine, Status, StepState};
use crate::error::CallError;
use crate::error::ErrorKind;
use crate::journal::{Event, Timestamp};

impl Machine<'_> {
    /// What to do now. Each step appears at most once, and the driver journals and applies
    /// the resulting events (and the starts of attempts and compensations) before asking
    /// again. User code the rules need (conditions, dry-run proposals, the decision an
    /// `on_timeout: approve | reject` records) is reached through `hooks`.
    pub fn next(&self, now: Timestamp, hooks: &dyn Hooks) -> Vec<Command> {
        let mut commands = Vec::new();
        self.next_into(now, hooks, &mut commands);
        commands
    }

    /// [`Machine::next`] into `commands` (emptied first): a caller that asks at every step
    /// boundary reuses one buffer.
    pub fn next_into(&self, now: Timestamp, hooks: &dyn Hooks, commands: &mut Vec<Command>) {
        commands.clear();
        if self.status.is_terminal() {
            commands.push(Command::Finish(self.status));
            return;
        }
        if self.status == Status::Compensating {
            // Child runs in flight are asked to stop: cancelling a run cancels its children.
            for (&step, &(child, cancelled)) in &self.children {
                if !cancelled && matches!(self.states[step], StepState::Running { .. }) {
                    commands.push(Command::CancelChild { step, child });
                }
            }
            // A cancel stops the attempts in flight (external effects after their grace).
            self.stop_commands(now, commands);
            if !self.in_flight_any() {
                match self.compensating {
                    // A compensation a crash interrupted runs again (at least once).
                    Some(((step, item), true)) => commands.push(Command::Compensate { step, item }),
                    Some((_, false)) => {}
                    None => {
                        if let Some((step, item)) = self.next_compensation() {
                            commands.push(Command::Compensate { step, item });
                        }
                    }
                }
            }
            return;
        }
        if self.deadline.is_some_and(|deadline| now >= deadline) {
            commands.push(Command::Journal(Event::DeadlinePassed { at: now }));
            return;
        }
        // Only orphans, ready steps and due timers can yield commands; they are taken in
        // declaration order, as a scan of every step would.
        // Of the ready steps that need a slot, only as many as there are free slots can
        // start, and they start in declaration order: looking further is wasted work.
        let item_orphans: usize = self.maps.values().map(|map| map.orphans.len()).sum();
        let mut in_flight = self.running + self.items_running - self.orphans.len() - item_orphans;
        let slots = self.max_in_flight.saturating_sub(in_flight);
        let due = self.timers.iter().take_while(|(at, _)| *at <= now);
        let needing_slots = self
            .ready
            .iter()
            .copied()
            .filter(|step| !self.ready_free.contains(step))
            .take(slots);
        let mut consider = |step: usize, commands: &mut Vec<Command>| {
            let free = in_flight < self.max_in_flight;
            match &self.states[step] {
                StepState::Running { attempt } if self.orphans.contains(&step) && free => {
                    let command = self.recover(step, *attempt, now);
                    if matches!(command, Command::Attempt { .. }) {
                        in_flight += 1;
                    }
                    commands.push(command);
                }
                StepState::Pending => {
                    let before = commands.len();
                    self.start(step, now, hooks, free, commands);
                    if commands[before..]
                        .iter()
                        .any(|c| matches!(c, Command::Attempt { .. }))
                    {
                        in_flight += 1;
                    }
                }
                StepState::RetryWait { attempt, until } if *until <= now && free => {
                    in_flight += 1;
                    commands.push(Command::Attempt {
                        step,
                        item: None,
                        attempt: attempt + 1,
                        reconcile: self.reconciled(step),
                    });
                }
                StepState::Awaiting { deadline } if *deadline <= now => {
                    commands.push(Command::Journal(Event::EventExpired { step, at: now }));
                }
                StepState::Waiting {
                    deadline,
                    escalated,
                    ..
                } if *deadline <= now => commands.push(self.time_out(step, *escalated, now, hooks)),
                _ => {}
            }
        };
        let only_ready = self.orphans.is_empty()
            && self.ready_free.is_empty()
            && self.timers.first().is_none_or(|(at, _)| *at > now);
        if only_ready {
            // The common case: ready steps alone, already in declaration order.
            for step in needing_slots {
                consider(step, commands);
            }
        } else {
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
                consider(step, commands);
            }
        }
        self.map_commands(now, &mut in_flight, commands);
    }

    /// A pending step whose dependencies settled: skip it, open its task, propose it, or
    /// start its first attempt (when a slot is `free`).
    fn start(
        &self,
        step: usize,
        now: Timestamp,
        hooks: &dyn Hooks,
        free: bool,
        commands: &mut Vec<Command>,
    ) {
        let spec = &self.spec.steps[step];
        let skip = |reason: String| {
            Command::Journal(Event::StepSkipped {
                step,
                reason,
                at: now,
            })
        };
        if let Some(upstream) = self.absent_required_arg(step) {
            let reason = format!("upstream `{}` is absent", self.spec.steps[upstream].id);
            commands.push(skip(reason));
            return;
        }
        if !super::needs_no_slot(spec) && !free {
            return;
        }
        if let Some(condition) = spec.condition.as_deref() {
            let reason = match hooks.condition(step, &self.outputs) {
                Ok(true) => None,
                Ok(false) => Some(format!("condition `{condition}` is false")),
                Err(CallError::Absent(dep)) => Some(format!(
                    "condition reads absent `{}`",
                    self.spec.steps.get(dep).map_or("?", |s| s.id.as_str())
                )),
                Err(error) => Some(format!("condition could not be evaluated: {error}")),
            };
            if let Some(reason) = reason {
                commands.push(skip(reason));
                return;
            }
        }
        match &spec.kind {
            StepKind::Human(human) => {
                let timeout = spec.timeout.map_or(0, |t| t.as_millis() as u64);
                commands.push(Command::Journal(Event::TaskOpened {
                    step,
                    assignee: human.assignee.clone(),
                    prompt: human.prompt.clone(),
                    deadline: now.saturating_add(timeout),
                    at: now,
                }));
            }
            StepKind::Action(action) if action.for_each.is_some() => {
                self.start_map(step, now, hooks, commands);
            }
            StepKind::Event(_) => match self.buffered.get(&step) {
                // The event came before the wait: the wait ends at once.
                Some((event_id, payload)) => {
                    commands.push(Command::Journal(Event::EventReceived {
                        step,
                        event_id: event_id.clone(),
                        payload: payload.clone(),
                        inbox: None,
                        at: now,
                    }))
                }
                None => {
                    let timeout = spec.timeout.map_or(0, |t| t.as_millis() as u64);
                    commands.push(Command::Journal(Event::EventAwaited {
                        step,
                        deadline: now.saturating_add(timeout),
                        at: now,
                    }));
                }
            },
            StepKind::Action(action) if self.dry_run && action.effect == Effect::External => {
                commands.push(Command::Journal(Event::EffectProposed {
                    step,
                    item: None,
                    args: hooks.proposal(step, &self.outputs, None),
                    at: now,
                }));
                commands.push(skip(
                    "dry run: external effect proposed, not executed".to_owned(),
                ));
            }
            StepKind::Action(_) | StepKind::Child(_) => commands.push(Command::Attempt {
                step,
                item: None,
                attempt: self.attempt_base[step] + 1,
                reconcile: false,
            }),
        }
    }

    /// An attempt a crash interrupted. Recovery is a retry and obeys the same rule: an
    /// external effect runs again only if it is idempotent (same key) or its reconcile says
    /// it did not happen; otherwise its outcome is unknown and a person must decide.
    pub(super) fn recover(&self, step: usize, attempt: u32, now: Timestamp) -> Command {
        match &self.spec.steps[step].kind {
            StepKind::Action(action) if action.effect == Effect::External && !action.idempotent => {
                if action.reconcile.is_some() {
                    Command::Attempt {
                        step,
                        item: None,
                        attempt,
                        reconcile: true,
                    }
                } else {
                    // The run was claimed after its previous owner's lease had ended, so that
                    // owner's lease ended by `now`, and so did the `valid_until` of every
                    // request the attempt sent; past the self-fencing margin and the clock-skew
                    // bound (the engine's `fence_margin_ms` counts both) that owner is not
                    // inside the effect, and a service that checks `valid_until` decided or
                    // refused every such request.
                    let safe_after = now.saturating_add(self.fence_margin_ms);
                    Command::Journal(Event::AttemptFailed {
                        step,
                        attempt,
                        kind: ErrorKind::OutcomeUnknown,
                        message: format!(
                            "attempt {attempt} of the external effect `{}` ({}) was interrupted \
                             and the step is neither idempotent nor reconciled: whether the \
                             effect happened is unknown; its previous owner's lease had ended by \
                             {}, and from {} that owner is no longer inside the effect and a service \
                             that checks `valid_until` no longer applies its requests; \
                             check it, then retry or cancel the run",
                            self.spec.steps[step].id,
                            action.call.path,
                            crate::journal::rfc3339(now),
                            crate::journal::rfc3339(safe_after),
                        ),
                        retry_after: None,
                        safe_after: Some(safe_after),
                        at: now,
                    })
                }
            }
            _ => Command::Attempt {
                step,
                item: None,
                attempt,
                reconcile: false,
            },
        }
    }

    /// Whether a retry of `step` asks its reconcile function first.
    pub(super) fn reconciled(&self, step: usize) -> bool {
        matches!(
            &self.spec.steps[step].kind,
            StepKind::Action(action) if action.effect == Effect::External && action.reconcile.is_some()
        )
    }

    /// A human task's deadline passed: escalate once, decide as `on_timeout` says, or
    /// expire.
    fn time_out(&self, step: usize, escalated: bool, now: Timestamp, hooks: &dyn Hooks) -> Command {
        let spec = &self.spec.steps[step];
        let timeout = spec.timeout.map_or(0, |t| t.as_millis() as u64);
        let on_timeout = match &spec.kind {
            StepKind::Human(human) => Some(&human.on_timeout),
            _ => None,
        };
        let expire = Command::Journal(Event::TaskExpired { step, at: now });
        match on_timeout {
            Some(OnTimeout::Escalate(group)) if !escalated => {
                Command::Journal(Event::TaskEscalated {
                    step,
                    to: group.clone(),
                    deadline: now.saturating_add(timeout),
                    at: now,
                })
            }
            Some(decide @ (OnTimeout::Approve | OnTimeout::Reject)) => {
                let approved = matches!(decide, OnTimeout::Approve);
                match hooks.timeout_decision(step, approved) {
                    Ok(decision) => Command::Journal(Event::TaskDecided {
                        step,
                        by: TIMEOUT_DECIDER.to_owned(),
                        decision,
                        inbox: None,
                        via: None,
                        at: now,
                    }),
                    Err(_) => expire,
                }
            }
            _ => expire,
        }
    }
}

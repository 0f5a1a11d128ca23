//! Map steps: one attempt stream per item, each journaled and keyed on its own, at most
//! `concurrency` items in flight, the step's retry policy applied per item, and the step's
//! output assembled in the source's order once every item settled.

use std::collections::BTreeSet;

use workflow_spec::{Effect, OnItemFailure, StepKind};

use super::failure::retry_at;
use super::{Command, Hooks, Machine, StepState};
use crate::error::ErrorKind;
use crate::journal::{Event, Timestamp, Value};

/// Where one item of a map step is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemState {
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
}

/// The items of one map step.
#[derive(Debug, Clone)]
pub(super) struct MapState {
    pub(super) items: Vec<ItemState>,
    pub(super) outputs: Vec<Option<Value>>,
    first_started: Vec<Option<Timestamp>>,
    /// Items in flight.
    pub(super) running: usize,
    settled: usize,
    /// The first item that failed for good under `on_item_failure: abort`.
    failure: Option<(usize, u32, ErrorKind, String)>,
    /// Items journaled as started with no result when the journal was replayed.
    pub(super) orphans: BTreeSet<usize>,
    timers: BTreeSet<(Timestamp, usize)>,
    /// Every item before this one has started at least once.
    cursor: usize,
}

impl MapState {
    fn new(count: usize) -> Self {
        MapState {
            items: vec![ItemState::Pending; count],
            outputs: vec![None; count],
            first_started: vec![None; count],
            running: 0,
            settled: 0,
            failure: None,
            orphans: BTreeSet::new(),
            timers: BTreeSet::new(),
            cursor: 0,
        }
    }

    /// After a replay: items still running were interrupted.
    pub(super) fn orphan_running(&mut self) {
        self.orphans = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, state)| matches!(state, ItemState::Running { .. }))
            .map(|(item, _)| item)
            .collect();
    }

    pub(super) fn next_wake(&self) -> Option<Timestamp> {
        self.timers.first().map(|(at, _)| *at)
    }

    /// Leaves an item's state; keeps the counters and timers in step.
    fn leave(&mut self, item: usize) {
        match self.items[item] {
            ItemState::Running { .. } => {
                self.running -= 1;
                self.orphans.remove(&item);
            }
            ItemState::RetryWait { until, .. } => {
                self.timers.remove(&(until, item));
            }
            _ => {}
        }
    }
}

impl Machine<'_> {
    /// The seed of one item's jitter: the step's seed mixed with the item.
    fn item_seed(&self, step: usize, item: usize) -> u64 {
        self.step_seed(step) ^ (item as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9)
    }

    pub(super) fn map_started(&mut self, step: usize, count: usize, at: Timestamp) {
        if step >= self.states.len() {
            return;
        }
        self.maps.insert(step, MapState::new(count));
        self.first_started[step].get_or_insert(at);
        self.set(step, StepState::Mapping { done: 0, count });
    }

    pub(super) fn item_started(&mut self, step: usize, item: usize, attempt: u32, at: Timestamp) {
        let Some(map) = self.maps.get_mut(&step) else {
            return;
        };
        if item >= map.items.len() {
            return;
        }
        map.leave(item);
        map.items[item] = ItemState::Running { attempt };
        map.running += 1;
        map.first_started[item].get_or_insert(at);
        if item >= map.cursor {
            map.cursor = item + 1;
        }
        self.items_running += 1;
        self.attempts[step] = self.attempts[step].max(attempt);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn item_failed(
        &mut self,
        step: usize,
        item: usize,
        attempt: u32,
        kind: ErrorKind,
        message: &str,
        retry_after: Option<u64>,
        at: Timestamp,
    ) {
        let seed = self.item_seed(step, item);
        let running = self.status == super::Status::Running;
        let Some(policy_step) = self.spec.steps.get(step) else {
            return;
        };
        let skip = policy_step
            .for_each()
            .is_some_and(|each| each.on_item_failure == OnItemFailure::Skip);
        let Some(map) = self.maps.get_mut(&step) else {
            return;
        };
        if item >= map.items.len() {
            return;
        }
        let was_running = matches!(map.items[item], ItemState::Running { .. });
        map.leave(item);
        if was_running {
            self.items_running -= 1;
        }
        let first = map.first_started[item].unwrap_or(at);
        let until = policy_step
            .retry
            .as_ref()
            .filter(|policy| running && attempt < policy.max_attempts && policy.retries(kind))
            .and_then(|policy| retry_at(policy, seed, attempt, retry_after, at, first));
        match until {
            Some(until) => {
                map.items[item] = ItemState::RetryWait { attempt, until };
                map.timers.insert((until, item));
            }
            None => {
                map.items[item] = ItemState::Failed {
                    attempts: attempt,
                    kind,
                    message: message.to_owned(),
                };
                map.settled += 1;
                if !skip && map.failure.is_none() {
                    map.failure = Some((item, attempt, kind, message.to_owned()));
                }
            }
        }
        self.update_progress(step);
    }

    pub(super) fn item_succeeded(&mut self, step: usize, item: usize, output: Value) {
        let Some(map) = self.maps.get_mut(&step) else {
            return;
        };
        if item >= map.items.len() {
            return;
        }
        if matches!(map.items[item], ItemState::Running { .. }) {
            self.items_running -= 1;
        }
        map.leave(item);
        map.items[item] = ItemState::Succeeded;
        map.outputs[item] = Some(output);
        map.settled += 1;
        self.undo_order.push((step, Some(item)));
        self.update_progress(step);
    }

    fn update_progress(&mut self, step: usize) {
        if let (Some(map), Some(StepState::Mapping { count, .. })) =
            (self.maps.get(&step), self.states.get(step))
        {
            let state = StepState::Mapping {
                done: map.settled,
                count: *count,
            };
            self.states[step] = state;
        }
    }

    /// The items of the map steps in progress: interrupted attempts, due retries, new
    /// items up to the step's concurrency and the run's free slots, and the step's end
    /// once every item settled.
    pub(super) fn map_commands(
        &self,
        now: Timestamp,
        in_flight: &mut usize,
        commands: &mut Vec<Command>,
    ) {
        for (&step, map) in &self.maps {
            if !matches!(self.states[step], StepState::Mapping { .. }) {
                continue;
            }
            let spec = &self.spec.steps[step];
            let concurrency = spec
                .for_each()
                .map_or(1, |each| each.concurrency.max(1) as usize);
            let mut running = map.running - map.orphans.len();
            let free = |in_flight: &mut usize, running: &mut usize| {
                if *in_flight < self.max_in_flight && *running < concurrency {
                    *in_flight += 1;
                    *running += 1;
                    true
                } else {
                    false
                }
            };
            for &item in &map.orphans {
                let ItemState::Running { attempt } = map.items[item] else {
                    continue;
                };
                if let Some(command) = self.recover_item(step, item, attempt, now) {
                    if matches!(command, Command::Attempt { .. }) && !free(in_flight, &mut running)
                    {
                        continue;
                    }
                    commands.push(command);
                }
            }
            if map.failure.is_some() {
                // No new work after an item failed for good; the step fails once the
                // items in flight settled.
                if let (0, Some((item, attempts, kind, message))) = (map.running, &map.failure) {
                    commands.push(Command::Journal(Event::StepFailed {
                        step,
                        attempts: *attempts,
                        kind: *kind,
                        message: format!("item {item} failed: {message}"),
                        at: now,
                    }));
                }
                continue;
            }
            for &(_, item) in map.timers.iter().take_while(|(at, _)| *at <= now) {
                let ItemState::RetryWait { attempt, .. } = map.items[item] else {
                    continue;
                };
                if free(in_flight, &mut running) {
                    commands.push(Command::Attempt {
                        step,
                        item: Some(item),
                        attempt: attempt + 1,
                        reconcile: self.reconciled(step),
                    });
                }
            }
            for item in map.cursor..map.items.len() {
                if !free(in_flight, &mut running) {
                    break;
                }
                commands.push(Command::Attempt {
                    step,
                    item: Some(item),
                    attempt: 1,
                    reconcile: false,
                });
            }
            if map.settled == map.items.len() && map.running == 0 {
                let output = Value::Array(
                    map.outputs
                        .iter()
                        .map(|o| o.clone().unwrap_or(Value::Null))
                        .collect(),
                );
                commands.push(Command::Journal(Event::StepSucceeded {
                    step,
                    output,
                    at: now,
                }));
            }
        }
    }

    /// An item attempt a crash interrupted, by the same rule as a step's.
    fn recover_item(
        &self,
        step: usize,
        item: usize,
        attempt: u32,
        now: Timestamp,
    ) -> Option<Command> {
        match self.recover(step, attempt, now) {
            Command::Journal(Event::AttemptFailed {
                kind,
                message,
                retry_after,
                at,
                ..
            }) => Some(Command::Journal(Event::ItemFailed {
                step,
                item,
                attempt,
                kind,
                message,
                retry_after,
                at,
            })),
            Command::Attempt { reconcile, .. } => Some(Command::Attempt {
                step,
                item: Some(item),
                attempt,
                reconcile,
            }),
            _ => None,
        }
    }

    /// A ready map step: list its items (through the hooks), or propose each item's effect
    /// in a dry run.
    pub(super) fn start_map(
        &self,
        step: usize,
        now: Timestamp,
        hooks: &dyn Hooks,
        commands: &mut Vec<Command>,
    ) {
        let items = match hooks.items(step, &self.outputs) {
            Ok(items) => items,
            Err(error) => {
                commands.push(Command::Journal(Event::StepFailed {
                    step,
                    attempts: 0,
                    kind: ErrorKind::Validation,
                    message: format!("the items could not be listed: {error}"),
                    at: now,
                }));
                return;
            }
        };
        commands.push(Command::Journal(Event::MapStarted {
            step,
            count: items.len(),
            at: now,
        }));
        let external = matches!(
            &self.spec.steps[step].kind,
            StepKind::Action(action) if action.effect == Effect::External
        );
        if self.dry_run && external {
            for (item, value) in items.iter().enumerate() {
                commands.push(Command::Journal(Event::EffectProposed {
                    step,
                    item: Some(item),
                    args: hooks.proposal(step, &self.outputs, Some((item, value))),
                    at: now,
                }));
            }
            commands.push(Command::Journal(Event::StepSkipped {
                step,
                reason: "dry run: each item's external effect proposed, not executed".to_owned(),
                at: now,
            }));
        }
    }

    /// The items of a map step, by index.
    pub fn items(&self, step: usize) -> Option<&[ItemState]> {
        self.maps.get(&step).map(|map| map.items.as_slice())
    }
}

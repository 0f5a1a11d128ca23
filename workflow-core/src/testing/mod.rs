//! Helpers for testing workflows (feature `test-util`): scripted step outcomes, recording
//! adapters, readable event timelines, and waiting for human tasks, all under tokio's
//! paused time, so retries and 48-hour timeouts run in milliseconds and deterministically.
//!
//! ```
//! use workflow_core::testing::{Recorder, Script};
//! use workflow_core::{ErrorKind, StepError};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! // Fail twice with a transient error, then succeed.
//! let script: Script<u32> = Script::new().fail(2, ErrorKind::Unavailable).succeed(7);
//! assert!(script.next().await.is_err());
//! assert!(script.next().await.is_err());
//! assert_eq!(script.next().await, Ok(7));
//! assert_eq!(script.calls(), 3);
//!
//! // Record what an adapter was asked to do.
//! let sent: Recorder<String> = Recorder::new();
//! sent.record("alert T-91".to_owned());
//! assert_eq!(sent.calls(), ["alert T-91"]);
//! # }
//! ```

mod faulty;

pub use self::faulty::{FaultyStore, Write};

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use workflow_spec::Spec;

use crate::engine::human::TaskInfo;
use crate::engine::Engine;
use crate::error::{ErrorKind, RunError, RunId, StepError};
use crate::journal::Event;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// One scripted outcome of a step.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<T> {
    /// Succeed with a value.
    Succeed(T),
    /// Fail with an error.
    Fail(StepError),
    /// Take this long, then go on with the next outcome (for timeouts).
    Delay(Duration),
    /// The effect happens (it is recorded), then the call times out: the ambiguous case
    /// that needs reconciliation, never a blind retry.
    TimeoutAfterEffect(T),
}

/// The scripted outcomes of a step, consumed one per call. When the script runs out, the
/// last `Succeed` value repeats, or the call fails with a permanent error.
#[derive(Debug, Clone)]
pub struct Script<T> {
    inner: Arc<Mutex<ScriptState<T>>>,
}

#[derive(Debug)]
struct ScriptState<T> {
    outcomes: VecDeque<Outcome<T>>,
    last: Option<T>,
    calls: usize,
    effects: Vec<T>,
}

impl<T: Clone + Send + 'static> Default for Script<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Send + 'static> Script<T> {
    /// An empty script.
    pub fn new() -> Self {
        Script {
            inner: Arc::new(Mutex::new(ScriptState {
                outcomes: VecDeque::new(),
                last: None,
                calls: 0,
                effects: Vec::new(),
            })),
        }
    }

    fn push(self, outcome: Outcome<T>) -> Self {
        lock(&self.inner).outcomes.push_back(outcome);
        self
    }

    /// Fails `times` calls with errors of `kind`.
    pub fn fail(self, times: usize, kind: ErrorKind) -> Self {
        (0..times).fold(self, |script, n| {
            script.push(Outcome::Fail(StepError::new(
                kind,
                format!("scripted {kind} #{}", n + 1),
            )))
        })
    }

    /// Fails one call with this error (a rate limit with a retry-after, say).
    pub fn fail_with(self, error: StepError) -> Self {
        self.push(Outcome::Fail(error))
    }

    /// Succeeds with `value`.
    pub fn succeed(self, value: T) -> Self {
        self.push(Outcome::Succeed(value))
    }

    /// Takes `delay` before the next outcome (exceeds a step timeout, for instance): the
    /// call times out before any effect.
    pub fn delay(self, delay: Duration) -> Self {
        self.push(Outcome::Delay(delay))
    }

    /// The effect happens and is recorded, then the call reports a timeout.
    pub fn timeout_after_effect(self, value: T) -> Self {
        self.push(Outcome::TimeoutAfterEffect(value))
    }

    /// Plays the next outcome.
    pub async fn next(&self) -> Result<T, StepError> {
        loop {
            let outcome = {
                let mut state = lock(&self.inner);
                state.calls += 1;
                state.outcomes.pop_front()
            };
            match outcome {
                Some(Outcome::Delay(delay)) => {
                    lock(&self.inner).calls -= 1;
                    tokio::time::sleep(delay).await;
                }
                Some(Outcome::Succeed(value)) => {
                    let mut state = lock(&self.inner);
                    state.last = Some(value.clone());
                    state.effects.push(value.clone());
                    return Ok(value);
                }
                Some(Outcome::TimeoutAfterEffect(value)) => {
                    let mut state = lock(&self.inner);
                    state.last = Some(value.clone());
                    state.effects.push(value);
                    return Err(StepError::timeout(
                        "scripted timeout after the effect happened",
                    ));
                }
                Some(Outcome::Fail(error)) => return Err(error),
                None => {
                    let state = lock(&self.inner);
                    return match &state.last {
                        Some(value) => Ok(value.clone()),
                        None => Err(StepError::permanent("the script ran out of outcomes")),
                    };
                }
            }
        }
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        lock(&self.inner).calls
    }

    /// The effects that happened (successes and timeouts after the effect), in order.
    pub fn effects(&self) -> Vec<T> {
        lock(&self.inner).effects.clone()
    }
}

/// A recording adapter: stands in for an external service and remembers every call.
#[derive(Debug, Clone)]
pub struct Recorder<T> {
    calls: Arc<Mutex<Vec<T>>>,
}

impl<T: Clone> Default for Recorder<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone> Recorder<T> {
    /// An empty recorder.
    pub fn new() -> Self {
        Recorder {
            calls: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Records a call.
    pub fn record(&self, call: T) {
        lock(&self.calls).push(call);
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<T> {
        lock(&self.calls).clone()
    }

    /// How many calls were made.
    pub fn count(&self) -> usize {
        lock(&self.calls).len()
    }
}

impl<T: Clone + PartialEq> Recorder<T> {
    /// Records `call` unless an equal one was recorded before; returns whether it was new.
    /// This is how an idempotent service behaves towards a repeated idempotency key.
    pub fn record_once(&self, call: T) -> bool {
        let mut calls = lock(&self.calls);
        if calls.contains(&call) {
            false
        } else {
            calls.push(call);
            true
        }
    }
}

/// The journal of a run.
pub async fn events(engine: &Engine, run: RunId) -> Result<Vec<Event>, RunError> {
    engine.events(run).await
}

/// A run's journal as readable lines without timestamps, e.g.
/// `attempt_failed provision_workspace #1 unavailable`: compare runs for determinism and
/// assert on the order of what happened.
pub fn timeline(spec: &Spec, events: &[Event]) -> Vec<String> {
    let id = |step: &usize| spec.steps.get(*step).map_or("?", |s| s.id.as_str());
    events
        .iter()
        .map(|event| match event {
            Event::RunStarted { workflow, .. } => format!("run_started {workflow}"),
            Event::AttemptStarted { step, attempt, .. } => {
                format!("attempt_started {} #{attempt}", id(step))
            }
            Event::AttemptFailed {
                step,
                attempt,
                kind,
                ..
            } => format!("attempt_failed {} #{attempt} {kind}", id(step)),
            Event::StepSucceeded { step, .. } => format!("step_succeeded {}", id(step)),
            Event::StepSkipped { step, reason, .. } => {
                format!("step_skipped {} ({reason})", id(step))
            }
            Event::EffectProposed { step, .. } => format!("effect_proposed {}", id(step)),
            Event::TaskOpened { step, assignee, .. } => {
                format!("task_opened {} for {assignee}", id(step))
            }
            Event::TaskEscalated { step, to, .. } => format!("task_escalated {} to {to}", id(step)),
            Event::TaskDecided { step, by, .. } => format!("task_decided {} by {by}", id(step)),
            Event::TaskApproved { step, by, .. } => format!("task_approved {} by {by}", id(step)),
            Event::TaskDelegated { step, by, to, .. } => {
                format!("task_delegated {} by {by} to {to}", id(step))
            }
            Event::Initiated { by, .. } => format!("initiated by {by}"),
            Event::TaskExpired { step, .. } => format!("task_expired {}", id(step)),
            Event::MessageRefused { step, by, code, .. } => match step {
                Some(step) => format!("message_refused {} from {by} ({code})", id(step)),
                None => format!("message_refused from {by} ({code})"),
            },
            Event::CompensationStarted { step, item, .. } => match item {
                Some(item) => format!("compensation_started {}[{item}]", id(step)),
                None => format!("compensation_started {}", id(step)),
            },
            Event::StepFailed { step, kind, .. } => format!("step_failed {} {kind}", id(step)),
            Event::EventAwaited { step, .. } => format!("event_awaited {}", id(step)),
            Event::EventBuffered { step, event_id, .. } => {
                format!("event_buffered {} {event_id}", id(step))
            }
            Event::EventReceived { step, event_id, .. } => {
                format!("event_received {} {event_id}", id(step))
            }
            Event::EventExpired { step, .. } => format!("event_expired {}", id(step)),
            Event::MapStarted { step, count, .. } => format!("map_started {} {count}", id(step)),
            Event::ItemStarted {
                step,
                item,
                attempt,
                ..
            } => format!("item_started {}[{item}] #{attempt}", id(step)),
            Event::ItemFailed {
                step,
                item,
                attempt,
                kind,
                ..
            } => format!("item_failed {}[{item}] #{attempt} {kind}", id(step)),
            Event::ItemSucceeded { step, item, .. } => {
                format!("item_succeeded {}[{item}]", id(step))
            }
            Event::ChildStarted { step, child, .. } => {
                format!("child_started {} {child}", id(step))
            }
            Event::ChildCancelled { step, child, .. } => {
                format!("child_cancelled {} {child}", id(step))
            }
            Event::Compensated {
                step, item, error, ..
            } => {
                let what = match item {
                    Some(item) => format!("{}[{item}]", id(step)),
                    None => id(step).to_owned(),
                };
                match error {
                    None => format!("compensated {what}"),
                    Some(_) => format!("compensation_failed {what}"),
                }
            }
            Event::AttemptStopped {
                step,
                item,
                attempt,
                ..
            } => match item {
                Some(item) => format!("attempt_stopped {}[{item}] #{attempt}", id(step)),
                None => format!("attempt_stopped {} #{attempt}", id(step)),
            },
            Event::DeadlinePassed { .. } => "deadline_passed".to_owned(),
            Event::Cancelled { by, .. } => format!("cancelled by {by}"),
            Event::Retried { by, .. } => format!("retried by {by}"),
        })
        .collect()
}

/// Each event's time in ms after the run started: for asserting exact retry delays.
pub fn offsets(events: &[Event]) -> Vec<u64> {
    let start = events.first().map_or(0, Event::at);
    events
        .iter()
        .map(|e| e.at().saturating_sub(start))
        .collect()
}

/// Waits (in tokio time: instant under paused time) until the human task `step` of `run`
/// is open, and returns it. Fails after `limit` of tokio time.
pub async fn wait_for_task(
    engine: &Engine,
    run: RunId,
    step: &str,
    limit: Duration,
) -> Result<TaskInfo, WaitError> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let open = engine.open_tasks().await.map_err(WaitError::Run)?;
        if let Some(task) = open.into_iter().find(|t| t.run == run && t.step == step) {
            return Ok(task);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(WaitError::TimedOut(step.to_owned()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Why [`wait_for_task`] gave up.
#[derive(Debug)]
pub enum WaitError {
    /// The task did not open in time.
    TimedOut(String),
    /// The engine failed.
    Run(RunError),
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitError::TimedOut(step) => write!(f, "task `{step}` did not open in time"),
            WaitError::Run(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for WaitError {}

//! The work a driver starts once its commit is durable, and how it records outcomes: an
//! attempt of an action (of one item, for a map step), a child run, a compensation (of one
//! item, for a map step), a child's cancellation.

use std::sync::{Arc, OnceLock};

use workflow_spec::{Arg, StepKind};

use super::driver::Driver;
use super::plan::Start;
use super::work::{self, Call, Done};
use crate::context::StepContext;
use crate::engine::workflow::{CallError, Workflow};
use crate::error::{ErrorKind, StepError};
use crate::journal::{Event, Value};

/// The items of the map steps of one run, by step, listed once per driver.
pub(super) type Items = Vec<Option<Arc<Vec<Value>>>>;

impl<W: Workflow> Driver<W> {
    pub(super) fn start(&mut self, start: Start) {
        match start {
            Start::Attempt {
                step,
                item,
                attempt,
                reconcile,
            } => {
                if matches!(self.spec().steps[step].kind, StepKind::Child(_)) {
                    self.start_child(step, attempt);
                    return;
                }
                let Some(call) = self.call(step, item, attempt) else {
                    return;
                };
                let timeout = self.spec().steps[step].timeout;
                let log = self.engine.inner.log_payloads;
                let guard = self.guard();
                work::spawn_attempt(&mut self.work, guard, call, step, reconcile, timeout, log);
            }
            Start::Compensation { step, item } => {
                let attempt = self.machine.attempts()[step];
                if let Some(call) = self.call(step, item, attempt) {
                    let guard = self.guard();
                    work::spawn_compensation(&mut self.work, guard, call, step);
                }
            }
            Start::Stop {
                step,
                item,
                attempt,
                reconcile,
            } => {
                self.work.stop((step, item));
                tracing::warn!(
                    step = self.step_id(step),
                    item,
                    attempt,
                    "the run was cancelled: the attempt was stopped"
                );
                if reconcile {
                    if let Some(call) = self.call(step, item, attempt) {
                        let guard = self.guard();
                        work::spawn_reconcile(&mut self.work, guard, call, step);
                    }
                }
            }
            Start::CancelChild { child } => {
                let engine = self.engine.clone();
                let by = format!("parent {}", self.run);
                tokio::spawn(async move {
                    if let Err(error) = engine.cancel(child, &by).await {
                        tracing::warn!(child = %child, error = %error, "cannot cancel a child run");
                    }
                });
            }
        }
    }

    /// Starts (or finds, after a crash) the child run of `step`: keyed by this run and the
    /// step, so it is never started twice.
    fn start_child(&mut self, step: usize, attempt: u32) {
        let spec = &self.spec().steps[step];
        let outputs = self.snapshot(step);
        let child = W::child(step, &self.input, &outputs);
        let deadline = spec.timeout.map(|t| self.now() + t.as_millis() as u64);
        let key = StepContext::key_for(W::NAME, self.run, &spec.id);
        work::spawn_child(
            &mut self.work,
            self.engine.clone(),
            work::ChildRun {
                parent: self.run,
                step,
                attempt,
                key,
                child,
                dry_run: self.machine.dry_run(),
                deadline,
                trace_id: self.trace_id.clone(),
                parent_span: self.parent_span.clone(),
            },
        );
    }

    /// What one call of `step` needs; for a map step, of its item `item`, whose own output
    /// (for a compensation) is that item's output.
    fn call(&mut self, step: usize, item: Option<usize>, attempt: u32) -> Option<Call<W>> {
        let spec = &self.spec().steps[step];
        let mut snapshot = self.snapshot(step);
        let item = match item {
            Some(index) => {
                let items = match self.items_of(step) {
                    Ok(items) => items,
                    Err(error) => {
                        // The items listed when the map started no longer list: the source
                        // changed under a replay. Fail this item for good.
                        self.record(Event::ItemFailed {
                            step,
                            item: index,
                            attempt,
                            kind: crate::ErrorKind::Validation,
                            message: format!("the items could not be listed again: {error}"),
                            retry_after: None,
                            at: self.now(),
                        });
                        return None;
                    }
                };
                let value = items.get(index).cloned().unwrap_or(Value::Null);
                snapshot.retain(|(s, _)| *s != step);
                if let Some(output) = self.machine.item_output(step, index) {
                    snapshot.push((step, output.clone()));
                }
                Some((index, value))
            }
            None => None,
        };
        // What only the step's own code reads (its key, the trace, the cancel signal, the
        // lease) is built when one of its calls names `ctx`: nothing else reads it.
        let named = names_ctx(spec);
        let key = match item {
            _ if !named => String::new(),
            Some((index, _)) => StepContext::item_key_for(W::NAME, self.run, &spec.id, index),
            None => StepContext::key_for(W::NAME, self.run, &spec.id),
        };
        Some(Call {
            env: Arc::clone(&self.env),
            input: Arc::clone(&self.input),
            ctx: StepContext {
                workflow: W::NAME,
                run_id: self.run,
                step: spec.id.as_str(),
                attempt,
                idempotency_key: key,
                deadline: spec.timeout.map(|t| self.now() + t.as_millis() as u64),
                dry_run: self.machine.dry_run(),
                trace_id: if named {
                    self.trace_id.clone()
                } else {
                    String::new()
                },
                fence: self.token,
                cancel: if named {
                    self.cancel.cancellation()
                } else {
                    Default::default()
                },
                valid_until: if named {
                    self.engine.valid_until(self.run)
                } else {
                    Default::default()
                },
            },
            snapshot,
            flow: super::limits::StepFlow::for_step::<W>(
                &self.engine,
                self.run,
                self.token,
                step,
                item.as_ref().map(|(index, _)| *index),
            ),
            item,
        })
    }

    /// The items of map step `step`, listed once.
    fn items_of(&mut self, step: usize) -> Result<Arc<Vec<Value>>, CallError> {
        if let Some(Some(items)) = self.items.get(step) {
            return Ok(Arc::clone(items));
        }
        let items = Arc::new(W::items(step, &self.input, self.machine.outputs())?);
        if self.items.len() <= step {
            self.items.resize(step + 1, None);
        }
        self.items[step] = Some(Arc::clone(&items));
        Ok(items)
    }

    /// The journaled outputs a call of `step` reads: its own, its dependencies' and those
    /// its compensation and reconciler name.
    pub(super) fn snapshot(&self, step: usize) -> Vec<(usize, Value)> {
        let outputs = self.machine.outputs();
        let node = &self.spec().steps[step];
        let extra = match &node.kind {
            StepKind::Action(action) => {
                let calls = action.compensate.iter().chain(action.reconcile.iter());
                Some(
                    calls
                        .flat_map(|call| call.args.iter())
                        .filter_map(|arg| match arg {
                            Arg::Step(dep) => Some(*dep),
                            _ => None,
                        }),
                )
            }
            _ => None,
        };
        let wanted = std::iter::once(step)
            .chain(node.deps.iter().copied())
            .chain(extra.into_iter().flatten());
        let mut snapshot: Vec<(usize, Value)> = Vec::with_capacity(node.deps.len() + 1);
        for index in wanted {
            if let Some(Some(value)) = outputs.get(index) {
                snapshot.push((index, value.clone()));
            }
        }
        // A step named twice (a dependency its compensation reads too) is read once; a
        // sort, not a search per step, so a join of many steps costs no square.
        snapshot.sort_unstable_by_key(|(index, _)| *index);
        snapshot.dedup_by_key(|(index, _)| *index);
        snapshot
    }

    /// Records the outcome of an attempt, a child start or a compensation (committed with
    /// whatever the machine decides next).
    pub(super) fn settle(&mut self, done: Done) {
        // An attempt's end was read when it ended: that read gives its time.
        let now = match &done {
            Done::Attempt { ended, .. } => self.engine.inner.clock.at(*ended),
            _ => self.now(),
        };
        match done {
            Done::Attempt {
                step,
                item,
                attempt,
                result,
                elapsed,
                ended: _,
            } => {
                self.count(step, &result, elapsed);
                let event = match (result, item) {
                    // Logged as succeeded once its commit lands (`commit`).
                    (Ok(output), None) => Event::StepSucceeded {
                        step,
                        output,
                        at: now,
                    },
                    (Ok(output), Some(item)) => Event::ItemSucceeded {
                        step,
                        item,
                        output,
                        at: now,
                    },
                    (Err(error), item) => {
                        tracing::warn!(
                            step = self.step_id(step),
                            item,
                            attempt,
                            error_type = error.kind().as_str(),
                            error = error.message(),
                            "attempt failed"
                        );
                        let (kind, message) = (error.kind(), error.message().to_owned());
                        let retry_after = error.retry_after().map(|d| d.as_millis() as u64);
                        match item {
                            Some(item) => Event::ItemFailed {
                                step,
                                item,
                                attempt,
                                kind,
                                message,
                                retry_after,
                                at: now,
                            },
                            None => Event::AttemptFailed {
                                step,
                                attempt,
                                kind,
                                message,
                                retry_after,
                                safe_after: None,
                                at: now,
                            },
                        }
                    }
                };
                self.record(event);
            }
            Done::ChildStarted {
                step,
                attempt,
                child,
            } => match child {
                Ok(child) => {
                    tracing::info!(step = self.step_id(step), child = %child, "child run started");
                    self.record(Event::ChildStarted {
                        step,
                        child,
                        at: now,
                    });
                    work::spawn_child_wait(
                        &mut self.work,
                        self.engine.clone(),
                        step,
                        attempt,
                        child,
                    );
                }
                Err(error) => self.settle(Done::Attempt {
                    step,
                    item: None,
                    attempt,
                    result: Err(error),
                    elapsed: std::time::Duration::ZERO,
                    ended: tokio::time::Instant::now(),
                }),
            },
            Done::Compensation { step, item, result } => {
                let error = result.err().map(|e| e.to_string());
                match &error {
                    None => tracing::info!(step = self.step_id(step), item, "compensated"),
                    Some(error) => tracing::error!(
                        step = self.step_id(step),
                        item,
                        error = error.as_str(),
                        "compensation failed"
                    ),
                }
                self.record(Event::Compensated {
                    step,
                    item,
                    error,
                    at: now,
                });
            }
            Done::Stopped => tracing::debug!("a stopped attempt was dropped"),
            Done::Lost { step } => {
                tracing::error!(step = self.step_id(step), "a step's own task was lost");
            }
            Done::SelfFenced { step } => {
                tracing::warn!(
                    step = self.step_id(step),
                    "the run's lease was not renewed in time: its user code was stopped (self-fenced)"
                );
                self.self_fenced = true;
            }
        }
    }

    /// The self-fencing guard of this run's user code (none in stores without leases).
    fn guard(&self) -> work::Guard {
        let watch = self.engine.inner.lease_ms > 0;
        (
            watch.then(|| Arc::clone(&self.engine.inner.lease)),
            self.run,
        )
    }

    /// `workflow_action_total` and `workflow_step_duration_seconds` for one attempt,
    /// through handles registered once per step and series.
    fn count(&self, step: usize, result: &Result<Value, StepError>, elapsed: std::time::Duration) {
        let Some(handles) = self.metrics.get(step) else {
            return;
        };
        let id = self.step_id(step);
        let kind = result.as_ref().err().map(StepError::kind);
        handles.counter(W::NAME, id, kind).increment(1);
        handles.duration(W::NAME, id).record(elapsed.as_secs_f64());
    }
}

/// Whether a call of `step` (its action, compensation or reconciler) names `ctx`.
fn names_ctx(step: &workflow_spec::Step) -> bool {
    match &step.kind {
        StepKind::Action(action) => std::iter::once(&action.call)
            .chain(action.compensate.iter())
            .chain(action.reconcile.iter())
            .any(|call| call.args.iter().any(|arg| matches!(arg, Arg::Ctx))),
        _ => false,
    }
}

/// The metric handles of one step of one registered workflow, each registered on its
/// first use (a series exists only once something was counted in it). A recorder must be
/// installed before the engine's first run to see them.
#[derive(Default)]
pub(crate) struct StepMetrics {
    /// `workflow_action_total`: the success series, then one per error type.
    counters: [OnceLock<metrics::Counter>; ErrorKind::ALL.len() + 1],
    duration: OnceLock<metrics::Histogram>,
}

impl StepMetrics {
    fn duration(&self, workflow: &'static str, step: &'static str) -> &metrics::Histogram {
        self.duration.get_or_init(|| {
            metrics::histogram!(
                "workflow_step_duration_seconds",
                "workflow" => workflow,
                "step" => step
            )
        })
    }

    fn counter(
        &self,
        workflow: &'static str,
        step: &'static str,
        kind: Option<ErrorKind>,
    ) -> &metrics::Counter {
        let index = kind.map_or(0, |kind| {
            1 + ErrorKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
        });
        self.counters[index].get_or_init(|| {
            let (outcome, error_type) = match kind {
                None => ("success", "none"),
                Some(kind) => ("failure", kind.as_str()),
            };
            metrics::counter!(
                "workflow_action_total",
                "workflow" => workflow,
                "step" => step,
                "outcome" => outcome,
                "error_type" => error_type
            )
        })
    }
}

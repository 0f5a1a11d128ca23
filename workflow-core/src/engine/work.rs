//! Running user code: one attempt of an action (reconciled first when the machine says so,
//! bounded by its timeout) or one compensation, each a future that the run's driver polls
//! itself ([`Work`]), so a step costs no task and no hand-off; a step declared
//! `spawn: true` runs as a task of its own instead. A panic in user code becomes a
//! permanent step error.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use std::collections::HashMap;

use futures_util::future::{abortable, AbortHandle};
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tracing::Instrument;

use super::fence::{Guarded, LeaseWatch, SelfFenced};
use super::Engine;
use crate::context::StepContext;
use crate::engine::workflow::{BoxFuture, CallError, ChildStart, Invocation, WithItem, Workflow};
use crate::error::{RunId, StepError};
use crate::journal::Value;

/// What a spawned piece of work reports back to its run's driver.
pub(super) enum Done {
    Attempt {
        step: usize,
        item: Option<usize>,
        attempt: u32,
        result: Result<Value, StepError>,
        elapsed: Duration,
    },
    /// A child step's child run was created (or found), or could not be.
    ChildStarted {
        step: usize,
        attempt: u32,
        child: Result<RunId, StepError>,
    },
    Compensation {
        step: usize,
        item: Option<usize>,
        result: Result<(), StepError>,
    },
    /// The run's lease had less than the self-fencing margin left: the attempt or
    /// compensation of `step` was stopped unpolled and the run must stop.
    SelfFenced { step: usize },
    /// A step's own task (`spawn: true`) ended without an outcome (it was cancelled).
    Lost { step: usize },
    /// An attempt was stopped by a cancel (its future dropped); the stop was journaled.
    Stopped,
}

/// An attempt in flight: its step and, for a map step, its item.
pub(super) type Unit = (usize, Option<usize>);

type Job = Pin<Box<dyn Future<Output = Done> + Send>>;

/// A run's work in flight, polled by the run's driver task: attempts, compensations and
/// child starts overlap their waiting without a task each. Dropping it drops every piece
/// of work (and aborts the tasks of `spawn: true` steps).
///
/// The futures are `Send` but not `Sync`; a driver is shared by reference across its own
/// awaits, so they sit in a mutex that is only ever reached through `&mut` (never locked).
#[derive(Default)]
pub(super) struct Work {
    jobs: std::sync::Mutex<FuturesUnordered<Job>>,
    /// How to stop each attempt in flight (a cancel drops its future).
    stops: HashMap<Unit, AbortHandle>,
}

impl Work {
    fn jobs(&mut self) -> &mut FuturesUnordered<Job> {
        self.jobs.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds work polled by the driver.
    pub(super) fn push(&mut self, job: impl Future<Output = Done> + Send + 'static) {
        self.jobs().push(Box::pin(job));
    }

    /// Adds an attempt that a cancel may stop: on its own task with `own_task`, else
    /// polled by the driver.
    fn push_attempt(
        &mut self,
        unit: Unit,
        own_task: bool,
        job: impl Future<Output = Done> + Send + 'static,
    ) {
        let (job, stop) = if own_task {
            let task = Aborting(tokio::spawn(job));
            stoppable(async move { task.await_done(unit.0).await })
        } else {
            stoppable(job)
        };
        if let Some(previous) = self.stops.insert(unit, stop) {
            previous.abort();
        }
        self.jobs().push(job);
    }

    /// Stops the attempt of `unit`, if one runs here: its future is dropped at the next
    /// poll, without being polled again (a task of its own is aborted with it).
    pub(super) fn stop(&mut self, unit: Unit) {
        if let Some(stop) = self.stops.remove(&unit) {
            stop.abort();
        }
    }

    /// The attempt of `unit` reported its outcome: it can no longer be stopped.
    pub(super) fn finished(&mut self, unit: Unit) {
        self.stops.remove(&unit);
    }

    /// Whether an attempt or a compensation (user code) is in flight.
    pub(super) fn runs_user_code(&self) -> bool {
        !self.stops.is_empty()
    }

    pub(super) fn is_empty(&mut self) -> bool {
        self.jobs().is_empty()
    }

    /// The next piece of work to finish (`None` when there is none).
    pub(super) async fn next(&mut self) -> Option<Done> {
        self.jobs().next().await
    }

    /// A piece of work that finished already, without waiting.
    pub(super) fn try_next(&mut self) -> Option<Done> {
        self.jobs().next().now_or_never().flatten()
    }
}

/// `job`, boxed, and what stops it: a stopped job is dropped at its next poll and reports
/// [`Done::Stopped`].
fn stoppable(job: impl Future<Output = Done> + Send + 'static) -> (Job, AbortHandle) {
    let (job, stop) = abortable(job);
    (
        Box::pin(job.map(|done| done.unwrap_or(Done::Stopped))),
        stop,
    )
}

/// A task's handle that aborts the task when dropped.
struct Aborting(tokio::task::JoinHandle<Done>);

impl Aborting {
    async fn await_done(mut self, step: usize) -> Done {
        match (&mut self.0).await {
            Ok(done) => done,
            Err(_) => Done::Lost { step },
        }
    }
}

impl Drop for Aborting {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The self-fencing guard of a run's user code: its engine's lease view and the run.
pub(super) type Guard = (Option<Arc<LeaseWatch>>, RunId);

/// `work` guarded: never polled once the run's lease has less than the margin left.
fn guarded(
    guard: Guard,
    step: usize,
    work: impl Future<Output = Done> + Send + 'static,
) -> impl Future<Output = Done> + Send + 'static {
    let (watch, run) = guard;
    Guarded::new(watch, run, work).map(move |outcome| match outcome {
        SelfFenced::Ran(done) => done,
        SelfFenced::Tripped => Done::SelfFenced { step },
    })
}

/// Everything one call needs, moved into its task.
pub(super) struct Call<W: Workflow> {
    pub(super) env: Arc<W::Env>,
    pub(super) input: Arc<W::Input>,
    pub(super) ctx: StepContext,
    /// The journaled outputs the call reads: its own step's and its arguments'.
    pub(super) snapshot: Vec<(usize, Value)>,
    /// For a map step: the item, by index, and its value.
    pub(super) item: Option<(usize, Value)>,
    /// For a step with `concurrency` or `rate`: what its attempt takes before it runs.
    pub(super) flow: Option<super::limits::StepFlow>,
}

impl<W: Workflow> Call<W> {
    fn invocation<'a>(&'a self, with_item: &'a Option<WithItem<'a>>) -> Invocation<'a, W> {
        Invocation {
            env: &self.env,
            ctx: &self.ctx,
            input: &self.input,
            outputs: match with_item {
                Some(with_item) => with_item,
                None => &self.snapshot,
            },
        }
    }

    fn with_item(&self) -> Option<WithItem<'_>> {
        self.item
            .as_ref()
            .map(|(index, value)| WithItem::new(&self.snapshot, *index, value))
    }

    fn index(&self) -> Option<usize> {
        self.item.as_ref().map(|(index, _)| *index)
    }
}

/// A child step's child run to start.
pub(super) struct ChildRun {
    pub(super) parent: RunId,
    pub(super) step: usize,
    pub(super) attempt: u32,
    /// The parent's key for the step: the child's start idempotency key derives from it.
    pub(super) key: String,
    pub(super) child: Result<ChildStart, CallError>,
    pub(super) dry_run: bool,
    pub(super) deadline: Option<crate::journal::Timestamp>,
    /// The parent's journaled trace: the child continues it, under this step's span.
    pub(super) trace_id: String,
    pub(super) parent_span: Option<String>,
}

/// Starts (or finds) a child run, as a task.
pub(super) fn spawn_child(work: &mut Work, engine: Engine, run: ChildRun) {
    let span = tracing::info_span!("child", step = run.step, attempt = run.attempt);
    work.push(
        async move {
            // Inside this step's span: the child run's spans are its children.
            let trace = crate::trace::child_of(&run.trace_id, run.parent_span.as_deref());
            let child = match run.child {
                Ok(start) => engine
                    .start_child(
                        run.parent,
                        &run.key,
                        start,
                        run.dry_run,
                        run.deadline,
                        trace,
                    )
                    .await
                    .map_err(|error| {
                        StepError::permanent(format!("cannot start the child run: {error}"))
                    }),
                Err(error) => Err(call_error(error)),
            };
            Done::ChildStarted {
                step: run.step,
                attempt: run.attempt,
                child,
            }
        }
        .instrument(span),
    );
}

/// Waits for a child run to finish (taking it up if no engine drives it): its outputs, or
/// its failure as the step's.
pub(super) fn spawn_child_wait(
    work: &mut Work,
    engine: Engine,
    step: usize,
    attempt: u32,
    child: RunId,
) {
    work.push(async move {
        let started = tokio::time::Instant::now();
        let result = engine.child_result(child).await;
        Done::Attempt {
            step,
            item: None,
            attempt,
            result,
            elapsed: started.elapsed(),
        }
    });
}

/// Spawns one attempt of `step`. With `reconcile`, the step's reconcile function is asked
/// first whether the effect already happened: a timeout after the effect must not repeat
/// it.
pub(super) fn spawn_attempt<W: Workflow>(
    work: &mut Work,
    guard: Guard,
    call: Call<W>,
    step: usize,
    reconcile: bool,
    timeout: Option<Duration>,
    log_payloads: bool,
) {
    let span = match call.index() {
        Some(item) => {
            tracing::info_span!(
                "step",
                step = call.ctx.step,
                item,
                attempt = call.ctx.attempt
            )
        }
        None => tracing::info_span!("step", step = call.ctx.step, attempt = call.ctx.attempt),
    };
    let attempt = call.ctx.attempt;
    let item = call.index();
    let own_task = matches!(
        W::spec().steps.get(step).map(|s| &s.kind),
        Some(workflow_spec::StepKind::Action(action)) if action.spawn
    );
    // Boxed by the guard, so the driver (or tokio's spawn) moves a pointer, not the whole
    // future.
    let job = guarded(
        guard,
        step,
        async move {
            let started = tokio::time::Instant::now();
            let done = |result| Done::Attempt {
                step,
                item,
                attempt,
                result,
                elapsed: started.elapsed(),
            };
            let with_item = call.with_item();
            // A limited step's slot and rate token, held until the attempt ends.
            let _slot = match super::limits::acquire(&call, &with_item, step).await {
                Ok(slot) => slot,
                Err(error) => return done(Err(error)),
            };
            if reconcile {
                match W::reconcile(step, call.invocation(&with_item)) {
                    Ok(check) => match CatchUnwind(check).await {
                        Ok(Some(output)) => {
                            tracing::info!("reconciled: the effect happened already");
                            return done(Ok(output));
                        }
                        Ok(None) => {
                            tracing::info!("reconciled: the effect did not happen; running it")
                        }
                        Err(error) => return done(Err(error)),
                    },
                    Err(error) => tracing::warn!(error = %error, "reconcile unavailable"),
                }
            }
            let result = match W::action(step, call.invocation(&with_item)) {
                Ok(action) => {
                    let action = CatchUnwind(action);
                    match timeout {
                        Some(limit) => match tokio::time::timeout(limit, action).await {
                            Ok(result) => result,
                            Err(_) => Err(StepError::timeout(format!(
                                "the attempt took longer than its timeout of {}",
                                workflow_spec::format_duration(limit)
                            ))),
                        },
                        None => action.await,
                    }
                }
                Err(error) => Err(call_error(error)),
            };
            if log_payloads {
                tracing::debug!(result = ?result, "attempt finished");
            }
            done(result)
        }
        .instrument(span),
    );
    work.push_attempt((step, item), own_task, job);
}

/// Asks the reconcile function of `step`, whose attempt a cancel stopped, whether the
/// effect happened: its output if it did, a `cancelled` error if it did not, an
/// `outcome_unknown` one if it cannot say.
pub(super) fn spawn_reconcile<W: Workflow>(
    work: &mut Work,
    guard: Guard,
    call: Call<W>,
    step: usize,
) {
    let span = tracing::info_span!(
        "reconcile",
        step = call.ctx.step,
        attempt = call.ctx.attempt
    );
    let (attempt, item) = (call.ctx.attempt, call.index());
    let job = guarded(
        guard,
        step,
        async move {
            let started = tokio::time::Instant::now();
            let with_item = call.with_item();
            let unknown = |error: &dyn std::fmt::Display| {
                StepError::new(
                    crate::error::ErrorKind::OutcomeUnknown,
                    format!(
                        "the run was cancelled and attempt {attempt} of `{}` was stopped; its \
                         reconcile function could not say whether the effect happened ({error}): \
                         check it",
                        call.ctx.step
                    ),
                )
            };
            let result = match W::reconcile(step, call.invocation(&with_item)) {
                Ok(check) => match CatchUnwind(check).await {
                    Ok(Some(output)) => {
                        tracing::info!("reconciled after a cancel: the effect happened");
                        Ok(output)
                    }
                    Ok(None) => Err(StepError::new(
                        crate::error::ErrorKind::Cancelled,
                        format!(
                            "the run was cancelled: attempt {attempt} of `{}` was stopped after \
                             the cancel's grace period, and its reconcile function found the \
                             effect had not happened",
                            call.ctx.step
                        ),
                    )),
                    Err(error) => Err(unknown(&error)),
                },
                Err(error) => Err(unknown(&error)),
            };
            Done::Attempt {
                step,
                item,
                attempt,
                result,
                elapsed: started.elapsed(),
            }
        }
        .instrument(span),
    );
    work.push(job);
}

/// Spawns the compensation of `step`.
pub(super) fn spawn_compensation<W: Workflow>(
    work: &mut Work,
    guard: Guard,
    call: Call<W>,
    step: usize,
) {
    let span = tracing::info_span!("compensate", step = call.ctx.step);
    let item = call.index();
    work.push_attempt(
        (step, item),
        false,
        guarded(
            guard,
            step,
            async move {
                let with_item = call.with_item();
                let result = match W::compensate(step, call.invocation(&with_item)) {
                    Ok(undo) => CatchUnwind(undo).await,
                    Err(error) => Err(call_error(error)),
                };
                Done::Compensation { step, item, result }
            }
            .instrument(span),
        ),
    );
}

fn call_error(error: CallError) -> StepError {
    match error {
        CallError::Step(error) => error,
        other => StepError::validation(other.to_string()),
    }
}

/// Turns a panic inside a user action into a permanent step error instead of losing the run.
struct CatchUnwind<'a, T>(BoxFuture<'a, Result<T, StepError>>);

impl<T> Future for CatchUnwind<'_, T> {
    type Output = Result<T, StepError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = &mut self.0;
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                Poll::Ready(Err(StepError::permanent(format!(
                    "the action panicked: {message}"
                ))))
            }
        }
    }
}

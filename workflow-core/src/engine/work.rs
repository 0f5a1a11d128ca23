//! Running user code: one attempt of an action (reconciled first when the machine says so,
//! bounded by its timeout) or one compensation, each a future that the run's driver polls
//! itself ([`Work`]), so a step costs no task and no hand-off; a step declared
//! `spawn: true` runs as a task of its own instead. A panic in user code becomes a
//! permanent step error.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use tokio::time::Instant;
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
        /// How long it took, and when it ended: the one read of the clock gives both.
        elapsed: Duration,
        ended: Instant,
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

/// A piece of work in flight: its future, boxed once, and what a cancel needs to stop it.
struct Job {
    /// The attempt or compensation a cancel may stop (`None`: other work).
    unit: Option<Unit>,
    /// Whom to tell when a cancel stops it: the waker of its last poll that was pending.
    waker: Option<Waker>,
    work: Pin<Box<dyn Future<Output = Done> + Send>>,
}

impl Future for Job {
    /// What it did, and the unit it ran for (`None` once a cancel stopped it).
    type Output = (Option<Unit>, Done);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let job = &mut *self;
        match job.work.as_mut().poll(cx) {
            Poll::Ready(done) => Poll::Ready((job.unit, done)),
            Poll::Pending => {
                if job.unit.is_some()
                    && !job.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker()))
                {
                    job.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// A run's work in flight, polled by the run's driver task: attempts, compensations and
/// child starts overlap their waiting without a task each. Dropping it drops every piece
/// of work (and aborts the tasks of `spawn: true` steps).
///
/// The futures are `Send` but not `Sync`; a driver is shared by reference across its own
/// awaits, so they sit in a mutex that is only ever reached through `&mut` (never locked).
#[derive(Default)]
pub(super) struct Work {
    jobs: std::sync::Mutex<FuturesUnordered<Job>>,
    /// How many attempts and compensations (user code) are in flight.
    user: usize,
}

impl Work {
    fn jobs(&mut self) -> &mut FuturesUnordered<Job> {
        self.jobs.get_mut().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds work polled by the driver.
    pub(super) fn push(&mut self, job: impl Future<Output = Done> + Send + 'static) {
        self.push_boxed(Box::pin(job));
    }

    fn push_boxed(&mut self, work: Pin<Box<dyn Future<Output = Done> + Send>>) {
        self.jobs().push(Job {
            unit: None,
            waker: None,
            work,
        });
    }

    /// Adds an attempt or a compensation that a cancel may stop: on its own task with
    /// `own_task`, else polled by the driver. The machine starts at most one per unit.
    fn push_attempt(
        &mut self,
        unit: Unit,
        own_task: bool,
        work: Pin<Box<dyn Future<Output = Done> + Send>>,
    ) {
        let work: Pin<Box<dyn Future<Output = Done> + Send>> = if own_task {
            let task = Aborting(tokio::spawn(work));
            Box::pin(async move { task.await_done(unit.0).await })
        } else {
            work
        };
        self.user += 1;
        self.jobs().push(Job {
            unit: Some(unit),
            waker: None,
            work,
        });
    }

    /// Stops the attempt of `unit`, if one runs here: its future is dropped now, without
    /// being polled again (a task of its own is aborted with it), and it reports
    /// [`Done::Stopped`].
    pub(super) fn stop(&mut self, unit: Unit) {
        let Some(job) = self.jobs().iter_mut().find(|job| job.unit == Some(unit)) else {
            return;
        };
        job.unit = None;
        job.work = Box::pin(std::future::ready(Done::Stopped));
        if let Some(waker) = job.waker.take() {
            waker.wake();
        }
        self.user -= 1;
    }

    /// Whether an attempt or a compensation (user code) is in flight.
    pub(super) fn runs_user_code(&self) -> bool {
        self.user > 0
    }

    pub(super) fn is_empty(&mut self) -> bool {
        self.jobs().is_empty()
    }

    /// The next piece of work to finish (`None` when there is none).
    pub(super) async fn next(&mut self) -> Option<Done> {
        let next = self.jobs().next().await;
        next.map(|finished| self.finished(finished))
    }

    /// A piece of work that finished already, without waiting.
    pub(super) fn try_next(&mut self) -> Option<Done> {
        let next = self.jobs().next().now_or_never().flatten();
        next.map(|finished| self.finished(finished))
    }

    /// A piece of work finished: an attempt or compensation that did can no longer be
    /// stopped.
    fn finished(&mut self, (unit, done): (Option<Unit>, Done)) -> Done {
        if unit.is_some() {
            self.user -= 1;
        }
        done
    }
}

impl Done {
    /// An attempt that began at `started` ended now with `result` (how long it took and
    /// when it ended from one read of the clock).
    fn attempt(
        step: usize,
        item: Option<usize>,
        attempt: u32,
        started: Instant,
        result: Result<Value, StepError>,
    ) -> Done {
        let ended = Instant::now();
        Done::Attempt {
            step,
            item,
            attempt,
            result,
            elapsed: ended.saturating_duration_since(started),
            ended,
        }
    }
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

/// `work` guarded, boxed once: never polled once the run's lease has less than the margin
/// left (in stores without leases, `work` itself).
fn guarded(
    guard: Guard,
    step: usize,
    work: impl Future<Output = Done> + Send + 'static,
) -> Pin<Box<dyn Future<Output = Done> + Send>> {
    match guard {
        (None, _) => Box::pin(work),
        (watch, run) => Box::pin(Guarded::new(watch, run, work).map(
            move |outcome| match outcome {
                SelfFenced::Ran(done) => done,
                SelfFenced::Tripped => Done::SelfFenced { step },
            },
        )),
    }
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
        let started = Instant::now();
        let result = engine.child_result(child).await;
        Done::attempt(step, None, attempt, started, result)
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
            let started = Instant::now();
            let done = |result| Done::attempt(step, item, attempt, started, result);
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
            let started = Instant::now();
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
            Done::attempt(step, item, attempt, started, result)
        }
        .instrument(span),
    );
    work.push_boxed(job);
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

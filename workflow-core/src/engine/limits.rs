//! Flow control at run time: the gate a start of a limited workflow is queued with, the
//! admission of gated runs (the worker's limits, from its registered specs), and the slot
//! and rate token an attempt of a limited step takes before it runs.
//!
//! The store decides (one transaction per admission or request, see
//! [`crate::store::limits`]); this module carries its answers out: it drives admitted
//! runs, asks the holders `cancel_previous` names to cancel, waits (backing off, and for
//! a token exactly as long as the bucket says) and releases a slot however its attempt
//! ends.

use std::time::Duration;

pub(crate) use crate::store::gate::{is_gated, scope, StartGate};

use super::registry::Registered;
use super::work::Call;
use super::Engine;
use crate::engine::workflow::{OutputSource, WithItem, Workflow};
use crate::error::{RunError, RunId, StepError};
use crate::journal::Value;
use crate::store::limits::{
    Acquired, Admit, RateLimit, RunLimit, SlotLimit, SlotRequest, AGING_STEP_MS,
};
use crate::store::Fence;

/// The longest a waiting attempt sleeps between two requests for a busy slot.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The gate of a start of a registered workflow, its keys read by its code.
pub(super) fn registered_gate(registered: &dyn Registered, input: &Value) -> Option<StartGate> {
    let spec = registered.spec();
    if !is_gated(spec) {
        return None;
    }
    StartGate::new(spec, registered.admission(input))
}

impl Engine {
    /// Whether `run` is gated and not admitted yet: it waits for an admission, here or
    /// on another worker.
    pub(super) async fn waits_for_admission(&self, run: RunId) -> Result<bool, RunError> {
        let flow = self.inner.store.flow_of(run).await?;
        Ok(flow.gate.is_some_and(|gate| !gate.admitted))
    }

    /// Admits gated runs of the versions registered here (at most `room`), with the
    /// limits of the registered specs: drives the admitted runs, asks the holders that
    /// `cancel_previous` names to cancel, and counts what it did. Returns how many runs
    /// it admitted.
    pub(super) async fn admit_gated(&self, room: usize) -> usize {
        let registered = self.inner.registry.all();
        if room == 0 || !registered.iter().any(|r| is_gated(r.spec())) {
            return 0;
        }
        let versions = self.inner.registry.all_fingerprints();
        let limits: Vec<RunLimit<'static>> = registered
            .iter()
            .filter_map(|r| {
                let concurrency = r.spec().concurrency.as_ref()?;
                Some(RunLimit {
                    workflow: r.name(),
                    limit: concurrency.limit,
                    on_limit: concurrency.on_limit,
                })
            })
            .collect();
        let sent = self.inner.lease.now_ms();
        let answer = self
            .inner
            .store
            .admit(Admit {
                claimant: self.claimant(),
                versions: &versions,
                limits: &limits,
                room,
                aging_ms: AGING_STEP_MS,
            })
            .await;
        let admission = match answer {
            Ok(admission) => admission,
            Err(error) => {
                tracing::warn!(error = %error, "cannot admit gated runs");
                return 0;
            }
        };
        if let Some((at, run)) = admission.next_ready {
            // The poller comes back when a debounced run may start (waking a run that
            // does not hibernate here does nothing else).
            self.inner.lock_wakeups().insert((at, run));
        }
        for (run, note) in &admission.skipped {
            metrics::counter!("workflow_runs_skipped_total").increment(1);
            tracing::info!(run = %run, note, "start skipped: its key is at its limit");
        }
        for (holder, waiting) in &admission.cancel {
            let by = format!("cancel_previous: {waiting} waits for the slot");
            match self.cancel(*holder, &by).await {
                Ok(()) => {
                    tracing::info!(run = %holder, for_run = %waiting, "asked to cancel for a newer start")
                }
                Err(crate::error::RunError::Finished(_)) => {}
                Err(error) => {
                    tracing::warn!(run = %holder, error = %error, "cannot cancel a previous run")
                }
            }
        }
        let admitted = admission.admitted.len();
        for run in admission.admitted {
            self.inner.lease.claimed(run.lease.run, sent);
            metrics::counter!("workflow_runs_admitted_total").increment(1);
            metrics::histogram!("workflow_limit_wait_seconds", "limit" => run.workflow.clone())
                .record(run.waited_ms as f64 / 1000.0);
            tracing::info!(run = %run.lease.run, waited_ms = run.waited_ms, "admitted a gated run");
            if let Err(error) = self.resume_claimed(run.lease.run, run.lease.token).await {
                tracing::error!(run = %run.lease.run, error = %error, "cannot drive an admitted run");
            }
        }
        if admitted > 0 {
            self.inner.admitted.notify_waiters();
        }
        admitted
    }
}

/// What an attempt of a limited step needs to take its slot and token: the engine (its
/// store, clock and owner name), the run's lease, and the attempt's holder name.
#[derive(Clone)]
pub(super) struct StepFlow {
    engine: Engine,
    run: RunId,
    token: u64,
    holder: String,
}

impl std::fmt::Debug for StepFlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepFlow")
            .field("run", &self.run)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl StepFlow {
    /// The flow of an attempt of `step` (of item `item`, for a map step) of `run` under
    /// `token`; `None` for a step without `concurrency` or `rate`.
    pub(super) fn for_step<W: Workflow>(
        engine: &Engine,
        run: RunId,
        token: u64,
        step: usize,
        item: Option<usize>,
    ) -> Option<StepFlow> {
        let spec = W::spec().steps.get(step)?;
        if spec.concurrency.is_none() && spec.rate.is_none() {
            return None;
        }
        Some(StepFlow {
            engine: engine.clone(),
            run,
            token,
            holder: match item {
                Some(index) => format!("{}#{index}", spec.id),
                None => spec.id.clone(),
            },
        })
    }
}

/// A slot held by an attempt (or a wait recorded for it): given back when dropped,
/// whichever way the attempt ended.
pub(super) struct Held {
    flow: StepFlow,
    counted: Option<String>,
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(limit) = self.counted.take() {
            metrics::gauge!("workflow_limit_slots_in_use", "limit" => limit).decrement(1.0);
        }
        let store = std::sync::Arc::clone(&self.flow.engine.inner.store);
        let (run, holder) = (self.flow.run, std::mem::take(&mut self.flow.holder));
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(error) = store.release_slot(run, &holder).await {
                    tracing::warn!(run = %run, holder, error = %error, "cannot give back a slot");
                }
            });
        }
    }
}

/// Before an attempt of a limited step: takes the step's slot and rate token (both or
/// neither, waiting until both are there). The returned guard gives the slot back when
/// the attempt ends.
pub(super) async fn acquire<W: Workflow>(
    call: &Call<W>,
    with_item: &Option<WithItem<'_>>,
    step: usize,
) -> Result<Option<Held>, StepError> {
    let Some(flow) = call.flow.clone() else {
        return Ok(None);
    };
    let outputs: &dyn OutputSource = match with_item {
        Some(with_item) => with_item,
        None => &call.snapshot,
    };
    let keys = W::step_keys(step, &call.input, outputs).map_err(|error| {
        StepError::validation(format!("the step's limit keys cannot be read: {error}"))
    })?;
    let spec = &W::spec().steps[step];
    let name = format!("{}.{}", W::NAME, spec.id);
    let rate_name = format!("{name}.rate");
    let concurrency = spec.concurrency.as_ref().and_then(|c| {
        let key = keys.concurrency.clone()?;
        Some((scope(&c.key, &name).to_owned(), key, c.limit))
    });
    let rate = spec.rate.as_ref().and_then(|r| {
        let key = keys.rate.clone()?;
        Some((
            scope(&r.key, &rate_name).to_owned(),
            key,
            r.limit,
            r.per.as_millis() as u64,
            r.burst,
        ))
    });
    if concurrency.is_none() && rate.is_none() {
        return Ok(None);
    }
    let engine = flow.engine.clone();
    let mut held = Held {
        flow,
        counted: None,
    };
    let started = engine.now();
    let mut backoff = Duration::from_millis(50);
    let mut signal = engine.inner.store.wake_signal();
    loop {
        let request = SlotRequest {
            run: held.flow.run,
            holder: &held.flow.holder,
            fence: Fence {
                owner: &engine.inner.owner,
                token: held.flow.token,
            },
            concurrency: concurrency.as_ref().map(|(scope, key, limit)| SlotLimit {
                name: &name,
                scope,
                key,
                limit: *limit,
            }),
            rate: rate
                .as_ref()
                .map(|(scope, key, limit, per_ms, burst)| RateLimit {
                    name: &rate_name,
                    scope,
                    key,
                    limit: *limit,
                    per_ms: *per_ms,
                    burst: *burst,
                }),
            now: engine.now(),
        };
        let pause = match engine.inner.store.acquire_slot(request).await {
            Ok(Acquired::Granted) => break,
            Ok(Acquired::Busy(usage)) => {
                tracing::debug!(limit = %name, in_use = usage.in_use, "waiting for a slot");
                let pause = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                pause
            }
            Ok(Acquired::Throttled { wait_ms }) => {
                tracing::debug!(limit = %rate_name, wait_ms, "waiting for a rate token");
                Duration::from_millis(wait_ms.max(1))
            }
            Err(crate::store::StoreError::Fenced { .. }) => {
                return Err(StepError::transient(
                    "the run's lease was lost while the attempt waited for its slot",
                ));
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot ask for a slot; trying again");
                let pause = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                pause
            }
        };
        wait(pause, &mut signal).await;
    }
    let waited = engine.now().saturating_sub(started) as f64 / 1000.0;
    if concurrency.is_some() {
        metrics::histogram!("workflow_limit_wait_seconds", "limit" => name.clone()).record(waited);
        metrics::gauge!("workflow_limit_slots_in_use", "limit" => name.clone()).increment(1.0);
        held.counted = Some(name);
    }
    if rate.is_some() {
        metrics::histogram!("workflow_limit_wait_seconds", "limit" => rate_name).record(waited);
    }
    Ok(Some(held))
}

/// Sleeps `pause`, or less when the store signals a change.
async fn wait(pause: Duration, signal: &mut Option<tokio::sync::watch::Receiver<u64>>) {
    let closed = match signal {
        Some(changes) => {
            tokio::select! {
                () = tokio::time::sleep(pause) => false,
                changed = changes.changed() => changed.is_err(),
            }
        }
        None => {
            tokio::time::sleep(pause).await;
            false
        }
    };
    if closed {
        *signal = None;
    }
}

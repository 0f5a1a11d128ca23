//! Queued starts: a run written to the store owned by nobody (its row and its `RunStarted`
//! entry, nothing decided yet), for any worker that registers its workflow to claim; and
//! the admission point, [`Engine::admit_queued`], where a worker takes queued runs up.
//!
//! An intake-only engine ([`EngineBuilder::intake_only`]) only ever writes such starts:
//! it never claims or drives a run.
//!
//! [`EngineBuilder::intake_only`]: super::EngineBuilder::intake_only

use std::collections::HashSet;
use std::sync::Mutex;

use super::limits::{registered_gate, StartGate};
use super::registry::Registered;
use super::{lock, Engine, RunHandle, RunRef, StartOptions};
use crate::engine::workflow::Workflow;
use crate::error::{RunError, RunId};
use crate::journal::{Event, Value};
use crate::store::{Claim, Claimable, Created, NewRun};

/// The most queued runs one admission pass takes, whatever the engine's capacity.
const ADMISSION_BATCH: usize = 64;

/// The fingerprints whose specs an engine recorded for its queued starts.
#[derive(Debug, Default)]
pub(super) struct RecordedSpecs(Mutex<HashSet<&'static str>>);

impl Engine {
    /// Writes the start of a run of `W` to the store, for any worker that registers `W` to
    /// claim and drive: the run's row and its first journal entry (its inputs), owned by
    /// nobody. `W` need not be registered here. With an idempotency key that was used
    /// before, returns the existing run and writes nothing, as [`Engine::start_with`] does.
    ///
    /// Workers admit queued runs oldest first, each as soon as one has room
    /// ([`EngineBuilder::max_live_runs`]); in a store one engine drives, that engine's own
    /// background task admits them. The handle's `outputs()` waits for the run to finish
    /// (driving it, like any run nobody owns, when this engine is a worker that registers
    /// `W`).
    ///
    /// [`EngineBuilder::max_live_runs`]: super::EngineBuilder::max_live_runs
    pub async fn enqueue<W: Workflow>(
        &self,
        input: W::Input,
        options: StartOptions,
    ) -> Result<RunHandle<W>, RunError> {
        let gate = StartGate::new(W::spec(), W::admission(&input));
        let input = serde_json::to_value(&input).map_err(|error| RunError::Decode {
            run: RunId(0),
            step: "<input>".into(),
            message: error.to_string(),
        })?;
        self.record_spec(W::FINGERPRINT, W::NAME, W::spec()).await?;
        let created = self
            .write_queued(
                W::NAME,
                W::FINGERPRINT,
                input,
                &options,
                gate.as_ref(),
                None,
            )
            .await?;
        Ok(RunHandle::new(
            RunRef {
                engine: self.clone(),
                id: created.id(),
            },
            matches!(created, Created::New { .. }),
        ))
    }

    /// [`Engine::enqueue`] by the workflow's journaled name, with its inputs as JSON: for
    /// front ends. A workflow registered here has its inputs checked against its type and
    /// is queued on the newest registered version. Otherwise the newest version any engine
    /// recorded in the store is used and only the inputs' names are checked (an object
    /// naming each input that is not an `Option`, and nothing else); a worker that cannot
    /// decode them parks the run with the reason. Returns the run and whether this call
    /// created it.
    pub async fn enqueue_json(
        &self,
        workflow: &str,
        input: Value,
        options: StartOptions,
    ) -> Result<(RunId, bool), RunError> {
        let created = match self.inner.registry.any(workflow) {
            Some(registered) => {
                self.enqueue_registered(&*registered, input, &options, None)
                    .await?
            }
            None => {
                let recorded = self
                    .inner
                    .store
                    .specs(workflow)
                    .await?
                    .into_iter()
                    .next()
                    .ok_or_else(|| RunError::NotRegistered(workflow.to_owned()))?;
                let mut gate = None;
                if let Ok(spec) = serde_json::from_str::<workflow_spec::Spec>(&recorded.spec) {
                    check_input_names(&spec, &input)?;
                    gate = StartGate::from_json(&spec, &input);
                }
                self.write_queued(
                    workflow,
                    &recorded.fingerprint,
                    input,
                    &options,
                    gate.as_ref(),
                    None,
                )
                .await?
            }
        };
        Ok((created.id(), matches!(created, Created::New { .. })))
    }

    /// Whether this engine was built to only write starts, never to claim or drive runs
    /// ([`EngineBuilder::intake_only`](super::EngineBuilder::intake_only)).
    pub fn is_intake_only(&self) -> bool {
        !self.inner.worker
    }

    /// Queues a run of a registered workflow, its inputs checked against its type; with
    /// `parent`, as the child run of that run's step.
    pub(super) async fn enqueue_registered(
        &self,
        registered: &dyn Registered,
        input: Value,
        options: &StartOptions,
        parent: Option<RunId>,
    ) -> Result<Created, RunError> {
        registered.check_input(&input)?;
        registered.store_spec(self).await?;
        let gate = registered_gate(registered, &input);
        self.write_queued(
            registered.name(),
            registered.fingerprint(),
            input,
            options,
            gate.as_ref(),
            parent,
        )
        .await
    }

    /// Records the spec of a workflow this engine queues runs of, once per fingerprint, so
    /// workers' tools and `workflow serve` can read it.
    async fn record_spec(
        &self,
        fingerprint: &'static str,
        workflow: &'static str,
        spec: &workflow_spec::Spec,
    ) -> Result<(), RunError> {
        if lock(&self.inner.queued_specs.0).contains(fingerprint) {
            return Ok(());
        }
        let json = serde_json::to_string(spec).unwrap_or_default();
        self.inner
            .store
            .put_spec(fingerprint, workflow, &json, self.now())
            .await?;
        lock(&self.inner.queued_specs.0).insert(fingerprint);
        Ok(())
    }

    /// Writes a queued run: its row and `RunStarted` (a fresh seed, the trace it continues
    /// or one derived from the seed), owned by nobody; or finds the run its idempotency key names.
    async fn write_queued(
        &self,
        workflow: &str,
        fingerprint: &str,
        input: Value,
        options: &StartOptions,
        gate: Option<&StartGate>,
        parent: Option<RunId>,
    ) -> Result<Created, RunError> {
        let now = self.now();
        let seed = self.next_seed();
        let (trace_id, parent_span) = match &options.traceparent {
            Some(trace) => (trace.trace_id.clone(), Some(trace.span_id.clone())),
            None => (crate::trace::generate(seed), None),
        };
        let started = Event::RunStarted {
            workflow: workflow.to_owned(),
            fingerprint: fingerprint.to_owned(),
            input,
            seed,
            trace_id,
            parent_span,
            dry_run: options.dry_run,
            deadline: options.deadline.map(|d| now + d.as_millis() as u64),
            at: now,
        };
        let mut events = vec![started];
        if let Some(by) = &options.initiator {
            // Who started it, so `self_approval: false` holds for queued runs too.
            events.push(Event::Initiated {
                by: by.clone(),
                at: now,
            });
        }
        // The run is found by its search values, read from its input by its spec.
        let search = match self.inner.store.spec(fingerprint).await {
            Ok(Some(json)) => serde_json::from_str::<workflow_spec::Spec>(&json)
                .map(|spec| crate::search::values_from_input(&spec.search, &input_of(&events)))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let key = options.idempotency_key.as_deref();
        let new = NewRun {
            workflow,
            fingerprint,
            idempotency_key: key,
            events: &events,
            search: &search,
            parent,
            owner: None,
            supersedes: None,
            at: now,
        };
        // A start of a limited workflow is gated: only an admission takes it up.
        let created = match gate {
            Some(gate) => self.inner.store.create_gated(new, gate.gate()).await?,
            None => self.inner.store.create_run(new).await?,
        };
        match created {
            Created::New { run, .. } => {
                metrics::counter!("workflow_runs_queued_total").increment(1);
                tracing::info!(workflow, run = %run, "run queued for a worker");
                if self.is_worker() {
                    // This engine's own background task admits it (in a store one engine
                    // drives, nobody else would).
                    self.ensure_poller();
                    self.inner.wake_notify.notify_one();
                }
            }
            Created::Existing(run) => {
                tracing::info!(workflow, run = %run, key = ?key, "queued start deduplicated by idempotency key");
            }
        }
        Ok(created)
    }

    /// **The admission point**: the one place a worker takes queued runs (runs nobody owns)
    /// up. It asks the store for the oldest queued runs of the versions registered here,
    /// as many as the engine has room for ([`EngineBuilder::max_live_runs`], and at most
    /// [`ADMISSION_BATCH`] at a time), and drives them. Which queued run goes next is
    /// decided here and in the store's claim ([`Claimable::Queued`]): oldest first.
    ///
    /// [`EngineBuilder::max_live_runs`]: super::EngineBuilder::max_live_runs
    pub(super) async fn admit_queued(&self) -> usize {
        if !self.is_worker() {
            return 0;
        }
        let names = self.inner.registry.names();
        if names.is_empty() {
            return 0;
        }
        let versions = self.inner.registry.all_fingerprints();
        let _one_claimer = self.inner.claiming.lock().await;
        let room = match self.inner.max_live_runs {
            Some(max) => max.saturating_sub(self.inner.lock_live().len()),
            None => ADMISSION_BATCH,
        };
        if room == 0 {
            return 0;
        }
        // Gated runs first: their admission holds the limits and orders by priority.
        let gated = self.admit_gated(room.min(ADMISSION_BATCH)).await;
        let room = room.saturating_sub(gated);
        if room == 0 {
            return gated;
        }
        let limit = room.min(ADMISSION_BATCH);
        let sent = self.inner.lease.now_ms();
        let leases = self
            .inner
            .store
            .claim(Claim {
                claimant: self.claimant(),
                workflows: &names,
                run: None,
                reclaim_own: false,
                limit: Some(limit),
                claimable: Claimable::Queued,
                versions: Some(&versions),
            })
            .await;
        match leases {
            Ok(leases) => {
                if leases.len() == ADMISSION_BATCH {
                    // Maybe more: the next pass comes at once.
                    self.inner.wake_notify.notify_one();
                }
                let admitted = leases.len() + gated;
                for lease in leases {
                    self.inner.lease.claimed(lease.run, sent);
                    metrics::counter!("workflow_runs_admitted_total").increment(1);
                    tracing::info!(run = %lease.run, "admitted a queued run");
                    if let Err(error) = self.resume_claimed(lease.run, lease.token).await {
                        tracing::error!(run = %lease.run, error = %error, "cannot drive an admitted run");
                    }
                }
                if admitted > 0 {
                    self.inner.admitted.notify_waiters();
                }
                admitted
            }
            Err(error) => {
                tracing::warn!(error = %error, "cannot look for queued runs");
                gated
            }
        }
    }
}

/// The check of a start's inputs without the workflow's code: an object naming every input
/// of the spec that is not an `Option`, and no other.
fn check_input_names(spec: &workflow_spec::Spec, input: &Value) -> Result<(), RunError> {
    let bad = |message: String| RunError::Decode {
        run: RunId(0),
        step: "<input>".into(),
        message,
    };
    let Some(fields) = input.as_object() else {
        return Err(bad(format!(
            "the inputs of `{}` are an object with the fields {}",
            spec.journaled_name(),
            spec.inputs
                .iter()
                .map(|i| format!("`{}`", i.name))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    if let Some(unknown) = fields
        .keys()
        .find(|key| !spec.inputs.iter().any(|i| &i.name == *key))
    {
        return Err(bad(format!(
            "`{}` has no input `{unknown}`",
            spec.journaled_name()
        )));
    }
    if let Some(missing) = spec
        .inputs
        .iter()
        .find(|i| !fields.contains_key(&i.name) && !i.ty.trim_start().starts_with("Option"))
    {
        return Err(bad(format!(
            "missing input `{}: {}`",
            missing.name, missing.ty
        )));
    }
    Ok(())
}

/// The input of a run from its `RunStarted`.
fn input_of(events: &[Event]) -> Value {
    match events.first() {
        Some(Event::RunStarted { input, .. }) => input.clone(),
        _ => Value::Null,
    }
}

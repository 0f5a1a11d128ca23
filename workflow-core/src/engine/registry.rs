//! The registered workflows: by Rust type (for typed starts and handles) and by journaled
//! name and fingerprint (for resuming a run on the version it started on).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use workflow_spec::Spec;

use super::plan::{Launch, Options, Prepared};
use super::steps::StepMetrics;
use super::Engine;
use crate::engine::workflow::{BoxFuture, CallError, WithItem, Workflow};
use crate::error::RunError;
use crate::journal::{Event, Value};
use crate::machine::Hooks;
use crate::store::Created;
use crate::store::StoreError;

/// A registered workflow, with its type erased so the engine can resume runs by name.
pub(super) trait Registered: Send + Sync + 'static {
    /// The journaled name.
    fn name(&self) -> &'static str;
    /// The spec's fingerprint.
    fn fingerprint(&self) -> &'static str;
    /// The spec.
    fn spec(&self) -> &'static Spec;
    /// Records the spec in the store once, for tools that lack the workflow's code.
    fn store_spec<'a>(&'a self, engine: &'a Engine) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Starts driving a run this engine owns under `token`, from its journal.
    fn launch(&self, engine: Engine, run: crate::RunId, token: u64, events: Vec<Event>);
    /// Creates a run (its inputs as JSON) owned by this engine, and launches it.
    fn create<'a>(
        &'a self,
        engine: &'a Engine,
        input: Value,
        options: Options<'a>,
    ) -> BoxFuture<'a, Result<Created, RunError>>;
    /// Plans a run (its inputs as JSON) owned by this engine, for a caller that creates
    /// several runs in one store transaction and then launches them.
    fn prepare(
        &self,
        engine: &Engine,
        input: Value,
        options: &Options<'_>,
    ) -> Result<Prepared, RunError>;
    /// Checks a start's inputs (as JSON) against the workflow's input type.
    fn check_input(&self, input: &Value) -> Result<(), RunError>;
    /// The values of the workflow's admission keys for a start's inputs (as JSON);
    /// the defaults when they do not decode.
    fn admission(&self, input: &Value) -> crate::flow::Admission;
    /// Checks a decision against the type of human `step`.
    fn decision(&self, step: usize, decision: Value) -> Result<Value, CallError>;
    /// The form of human `step`'s decision, if its type is one.
    fn decision_form(&self, step: usize) -> Option<Vec<crate::form::FormField>>;
    /// Checks an event's payload against the type of event `step`.
    fn event(&self, step: usize, payload: Value) -> Result<Value, CallError>;
    /// The typed outputs of a finished run, as JSON.
    fn outputs_value(&self, outputs: &[Option<Value>]) -> Result<Value, CallError>;
    /// Whether a journaled output of `step` decodes.
    fn check_output(&self, step: usize, output: &Value) -> Result<(), CallError>;
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

pub(super) struct Registration<W: Workflow> {
    shared: Shared<W>,
    spec_stored: AtomicBool,
}

/// What every run of one registered workflow shares: its environment and its metric
/// handles (registered once per step and series, not once per run).
pub(super) struct Shared<W: Workflow> {
    pub(super) env: Arc<W::Env>,
    pub(super) metrics: Arc<[StepMetrics]>,
}

impl<W: Workflow> Clone for Shared<W> {
    fn clone(&self) -> Self {
        Shared {
            env: Arc::clone(&self.env),
            metrics: Arc::clone(&self.metrics),
        }
    }
}

impl<W: Workflow> Registration<W> {
    pub(super) fn new(env: W::Env) -> Self {
        Registration {
            shared: Shared {
                env: Arc::new(env),
                metrics: (0..W::spec().steps.len())
                    .map(|_| StepMetrics::default())
                    .collect(),
            },
            spec_stored: AtomicBool::new(false),
        }
    }
}

impl<W: Workflow> Registered for Registration<W> {
    fn name(&self) -> &'static str {
        W::NAME
    }

    fn fingerprint(&self) -> &'static str {
        W::FINGERPRINT
    }

    fn spec(&self) -> &'static Spec {
        W::spec()
    }

    fn store_spec<'a>(&'a self, engine: &'a Engine) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if !self.spec_stored.swap(true, Ordering::Relaxed) {
                let json = serde_json::to_string(W::spec()).unwrap_or_default();
                let stored = engine
                    .store()
                    .put_spec(W::FINGERPRINT, W::NAME, &json, engine.now())
                    .await;
                if stored.is_err() {
                    self.spec_stored.store(false, Ordering::Relaxed);
                }
                stored?;
            }
            Ok(())
        })
    }

    fn launch(&self, engine: Engine, run: crate::RunId, token: u64, events: Vec<Event>) {
        let launch = Launch::<W>::replay(&engine, run, &events);
        super::driver::launch::<W>(engine, self.shared.clone(), run, token, launch);
    }

    fn create<'a>(
        &'a self,
        engine: &'a Engine,
        input: Value,
        options: Options<'a>,
    ) -> BoxFuture<'a, Result<Created, RunError>> {
        Box::pin(async move {
            self.store_spec(engine).await?;
            super::plan::create::<W>(engine, self.shared.clone(), input, options).await
        })
    }

    fn prepare(
        &self,
        engine: &Engine,
        input: Value,
        options: &Options<'_>,
    ) -> Result<Prepared, RunError> {
        super::plan::prepare::<W>(engine, self.shared.clone(), input, options)
    }

    fn check_input(&self, input: &Value) -> Result<(), RunError> {
        super::plan::decode_input::<W>(crate::RunId(0), Some(input.clone())).map(drop)
    }

    fn admission(&self, input: &Value) -> crate::flow::Admission {
        super::plan::decode_input::<W>(crate::RunId(0), Some(input.clone()))
            .map(|input| W::admission(&input))
            .unwrap_or_default()
    }

    fn decision(&self, step: usize, decision: Value) -> Result<Value, CallError> {
        W::decision(step, decision)
    }

    fn decision_form(&self, step: usize) -> Option<Vec<crate::form::FormField>> {
        W::decision_form(step)
    }

    fn event(&self, step: usize, payload: Value) -> Result<Value, CallError> {
        W::event(step, payload)
    }

    fn outputs_value(&self, outputs: &[Option<Value>]) -> Result<Value, CallError> {
        W::outputs_value(&outputs)
    }

    fn check_output(&self, step: usize, output: &Value) -> Result<(), CallError> {
        W::check_output(step, output)
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// The user code of `W` the machine's rules need, over one run's inputs.
pub(super) struct WorkflowHooks<'a, W: Workflow> {
    pub(super) input: &'a W::Input,
}

impl<W: Workflow> Hooks for WorkflowHooks<'_, W> {
    fn condition(&self, step: usize, outputs: &[Option<Value>]) -> Result<bool, CallError> {
        W::condition(step, self.input, &outputs)
    }

    fn proposal(
        &self,
        step: usize,
        outputs: &[Option<Value>],
        item: Option<(usize, &Value)>,
    ) -> Value {
        match item {
            Some((index, value)) => {
                W::proposal(step, self.input, &WithItem::new(&outputs, index, value))
            }
            None => W::proposal(step, self.input, &outputs),
        }
    }

    fn items(&self, step: usize, outputs: &[Option<Value>]) -> Result<Vec<Value>, CallError> {
        W::items(step, self.input, &outputs)
    }

    fn event(&self, step: usize, payload: Value) -> Result<Value, CallError> {
        W::event(step, payload)
    }

    fn timeout_decision(&self, step: usize, approved: bool) -> Result<Value, CallError> {
        W::timeout_decision(step, approved)
    }

    fn decision(&self, step: usize, decision: Value) -> Result<Value, CallError> {
        W::decision(step, decision)
    }
}

/// Hooks for deciding without a run's inputs: the decision type of a registered workflow.
pub(super) struct DecisionHooks<'a>(pub(super) &'a dyn Registered);

impl Hooks for DecisionHooks<'_> {
    fn condition(&self, _: usize, _: &[Option<Value>]) -> Result<bool, CallError> {
        Ok(true)
    }

    fn proposal(&self, _: usize, _: &[Option<Value>], _: Option<(usize, &Value)>) -> Value {
        Value::Null
    }

    fn items(&self, step: usize, _: &[Option<Value>]) -> Result<Vec<Value>, CallError> {
        Err(CallError::NoSuchCall(step))
    }

    fn event(&self, step: usize, payload: Value) -> Result<Value, CallError> {
        self.0.event(step, payload)
    }

    fn timeout_decision(&self, step: usize, _: bool) -> Result<Value, CallError> {
        Err(CallError::NoSuchCall(step))
    }

    fn decision(&self, step: usize, decision: Value) -> Result<Value, CallError> {
        self.0.decision(step, decision)
    }
}

/// Every registration, by type and by version.
#[derive(Default)]
pub(super) struct Registry {
    inner: Mutex<Maps>,
}

#[derive(Default)]
struct Maps {
    by_type: HashMap<TypeId, Arc<dyn Registered>>,
    /// By journaled name and fingerprint, in registration order.
    by_version: Vec<Arc<dyn Registered>>,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Maps> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn insert<W: Workflow>(&self, registration: Registration<W>) {
        let registration: Arc<dyn Registered> = Arc::new(registration);
        let mut maps = self.lock();
        maps.by_type
            .insert(TypeId::of::<W>(), Arc::clone(&registration));
        maps.by_version
            .retain(|r| (r.name(), r.fingerprint()) != (W::NAME, W::FINGERPRINT));
        maps.by_version.push(registration);
    }

    /// The registration of the Rust type `W`.
    pub(super) fn typed<W: Workflow>(&self) -> Option<Arc<Registration<W>>> {
        let registered = self.lock().by_type.get(&TypeId::of::<W>()).cloned()?;
        registered.as_any().downcast::<Registration<W>>().ok()
    }

    /// The registration a run of `name` started under `fingerprint` resumes on.
    pub(super) fn version(&self, name: &str, fingerprint: &str) -> Option<Arc<dyn Registered>> {
        self.lock()
            .by_version
            .iter()
            .find(|r| r.name() == name && r.fingerprint() == fingerprint)
            .cloned()
    }

    /// The fingerprints registered under a name, newest registration first.
    pub(super) fn fingerprints(&self, name: &str) -> Vec<&'static str> {
        self.lock()
            .by_version
            .iter()
            .rev()
            .filter(|r| r.name() == name)
            .map(|r| r.fingerprint())
            .collect()
    }

    /// The newest registration of a name: where new runs of it start.
    pub(super) fn any(&self, name: &str) -> Option<Arc<dyn Registered>> {
        self.lock()
            .by_version
            .iter()
            .rev()
            .find(|r| r.name() == name)
            .cloned()
    }

    /// Every registered name, each once.
    pub(super) fn names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> =
            self.lock().by_version.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Every registered fingerprint.
    pub(super) fn all_fingerprints(&self) -> Vec<&'static str> {
        self.lock()
            .by_version
            .iter()
            .map(|r| r.fingerprint())
            .collect()
    }

    /// Every registration.
    /// Whether a registered workflow's starts are gated (it has flow control keys).
    pub(super) fn any_gated(&self) -> bool {
        self.all().iter().any(|r| super::limits::is_gated(r.spec()))
    }

    pub(super) fn all(&self) -> Vec<Arc<dyn Registered>> {
        self.lock().by_version.clone()
    }
}

/// One registered version, as the upgrade check reads it: its spec and its decoders.
#[derive(Clone)]
pub(crate) struct Version(pub(super) Arc<dyn Registered>);

impl Version {
    /// The spec.
    pub(crate) fn spec(&self) -> &'static Spec {
        self.0.spec()
    }

    /// Whether a start's inputs decode.
    pub(crate) fn check_input(&self, input: &Value) -> Result<(), RunError> {
        self.0.check_input(input)
    }

    /// Whether a journaled output of `step` decodes.
    pub(crate) fn check_output(&self, step: usize, output: &Value) -> Result<(), CallError> {
        self.0.check_output(step, output)
    }

    /// Whether a decision of human `step` decodes.
    pub(crate) fn decision(&self, step: usize, decision: Value) -> Result<Value, CallError> {
        self.0.decision(step, decision)
    }

    /// Whether an event payload of `step` decodes.
    pub(crate) fn event(&self, step: usize, payload: Value) -> Result<Value, CallError> {
        self.0.event(step, payload)
    }
}

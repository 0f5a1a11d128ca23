//! The [`Workflow`] trait: what `workflow!` generates and the engine drives.

use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde::Serialize;
use workflow_spec::Spec;

use crate::context::StepContext;
use crate::error::StepError;
use crate::journal::Value;

/// A boxed future, as the generated dispatch returns them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Everything a generated step call reads: the environment, the context, the inputs and
/// the journaled outputs of the steps before it.
pub struct Invocation<'a, W: Workflow> {
    /// The environment the workflow was registered with.
    pub env: &'a W::Env,
    /// The context of this attempt.
    pub ctx: &'a StepContext,
    /// The run's inputs.
    pub input: &'a W::Input,
    /// The journaled outputs of the steps this call reads.
    pub outputs: &'a dyn OutputSource,
}

impl<W: Workflow> std::fmt::Debug for Invocation<'_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invocation")
            .field("ctx", self.ctx)
            .finish_non_exhaustive()
    }
}

/// Where generated code reads journaled values from: step outputs, and for a call of a map
/// step the item it is made for.
pub trait OutputSource: Send + Sync {
    /// The output of `step`, if present. For the calls of one item of a map step
    /// (`compensate`, `reconcile`), the step's own output is that item's output.
    fn output(&self, step: usize) -> Option<&Value>;

    /// The item a call of a map step is made for: its index in the step's items and its
    /// journaled value ([`Workflow::items`]). `None` (the default) outside map steps.
    fn item(&self) -> Option<(usize, &Value)> {
        None
    }
}

/// Outputs plus the item of one call of a map step: what the runtime passes as
/// [`Invocation::outputs`] (and to [`Workflow::proposal`]) when it calls the action,
/// compensation or reconciler of item `index`.
#[derive(Clone, Copy)]
pub struct WithItem<'a> {
    outputs: &'a dyn OutputSource,
    index: usize,
    item: &'a Value,
}

impl<'a> WithItem<'a> {
    /// `outputs`, with `item` as the item at `index`.
    pub fn new(outputs: &'a dyn OutputSource, index: usize, item: &'a Value) -> Self {
        WithItem {
            outputs,
            index,
            item,
        }
    }
}

impl std::fmt::Debug for WithItem<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithItem")
            .field("index", &self.index)
            .field("item", self.item)
            .finish_non_exhaustive()
    }
}

impl OutputSource for WithItem<'_> {
    fn output(&self, step: usize) -> Option<&Value> {
        self.outputs.output(step)
    }

    fn item(&self) -> Option<(usize, &Value)> {
        Some((self.index, self.item))
    }
}

/// What starting the child run of a child workflow step takes, from
/// [`Workflow::child`]: the child's journaled name and fingerprint, and its typed input as
/// JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildStart {
    /// The child's journaled name, `<Child as Workflow>::NAME`.
    pub workflow: &'static str,
    /// The fingerprint of the child's spec this workflow was compiled against.
    pub fingerprint: &'static str,
    /// The child's `…Input`, built from the step's arguments and serialized.
    pub input: Value,
}

impl OutputSource for [Option<Value>] {
    fn output(&self, step: usize) -> Option<&Value> {
        self.get(step)?.as_ref()
    }
}

impl OutputSource for &[Option<Value>] {
    fn output(&self, step: usize) -> Option<&Value> {
        (**self).output(step)
    }
}

impl OutputSource for Vec<Option<Value>> {
    fn output(&self, step: usize) -> Option<&Value> {
        self.as_slice().output(step)
    }
}

/// A few outputs by step index: what one call needs, cheap to move into a task.
impl OutputSource for Vec<(usize, Value)> {
    fn output(&self, step: usize) -> Option<&Value> {
        self.iter()
            .find(|(index, _)| *index == step)
            .map(|(_, value)| value)
    }
}

/// Why a generated call could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// A required upstream output is absent.
    #[error("the output of step #{0} is absent")]
    Absent(usize),
    /// A journaled value does not deserialize into the current types.
    #[error("the journaled output of step #{step} does not match its type: {message}")]
    Decode {
        /// The step whose value failed.
        step: usize,
        /// The decode error.
        message: String,
    },
    /// The step has no such call (no compensation, no reconcile, not an action).
    #[error("step #{0} has no such call")]
    NoSuchCall(usize),
    /// A call of a map step was made without the item it is for ([`OutputSource::item`]).
    #[error("step #{0} maps over items and was called without one")]
    NoItem(usize),
    /// The step failed.
    #[error(transparent)]
    Step(#[from] StepError),
}

/// A workflow type generated by `workflow!`. You do not implement it by hand.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a workflow",
    label = "not a type declared with `workflow!`",
    note = "workflows (and the child workflows a step runs) are the types `workflow!` declares"
)]
pub trait Workflow: Sized + Send + Sync + 'static {
    /// The journaled inputs, a struct with a field per input.
    type Input: Serialize + DeserializeOwned + Clone + Send + Sync + 'static;
    /// The environment given at registration.
    type Env: Send + Sync + 'static;
    /// The typed outputs: a field per step. Journaled (a child workflow's outputs are its
    /// parent step's output), so serializable.
    type Outputs: Clone + Serialize + DeserializeOwned + Send + 'static;
    /// Typed handles for the human steps of a run.
    type Tasks: From<crate::engine::RunRef> + Send + Sync + 'static;

    /// The name runs are journaled under (store rows, idempotency keys
    /// `workflow/run/step`, registrations): `#[workflow(name = "...")]` when the spec sets
    /// it, else the type name. Two versions of one workflow share it.
    const NAME: &'static str;
    /// The fingerprint of the spec, computed at compile time.
    const FINGERPRINT: &'static str;
    /// How deep child workflows nest below this one: 0 without child steps, else one more
    /// than the deepest child. Evaluated at compile time, so a workflow that includes
    /// itself through its children is a compile error (a cycle in this constant).
    const CHILD_DEPTH: usize;

    /// The checked spec.
    fn spec() -> &'static Spec;

    /// The workflow's `schedule: { ... }`, if it declares one: the engine gives it a
    /// schedule row when the workflow is registered. `None` by default.
    fn schedule() -> Option<&'static workflow_spec::Schedule> {
        None
    }

    /// The values of the spec's `search: [..]` for a run's input, by name, in the order
    /// written; `None` where a value is absent (an `Option` field). Empty by default.
    fn search(input: &Self::Input) -> Vec<(&'static str, Option<String>)> {
        let _ = input;
        Vec::new()
    }

    /// The values of the spec's `concurrency`, `priority` and `debounce` for a run's input.
    fn admission(input: &Self::Input) -> crate::flow::Admission {
        let _ = input;
        Default::default()
    }

    /// The values of step `step`'s `concurrency` and `rate` keys for a run.
    fn step_keys(
        step: usize,
        input: &Self::Input,
        outputs: &dyn OutputSource,
    ) -> Result<crate::flow::StepKeys, CallError> {
        let _ = (step, input, outputs);
        Ok(Default::default())
    }

    /// Runs the action of `step`.
    fn action(
        step: usize,
        call: Invocation<'_, Self>,
    ) -> Result<BoxFuture<'_, Result<Value, StepError>>, CallError>;

    /// Runs the compensation of `step`.
    fn compensate(
        step: usize,
        call: Invocation<'_, Self>,
    ) -> Result<BoxFuture<'_, Result<(), StepError>>, CallError>;

    /// Asks the reconcile function of `step` whether its effect already happened.
    fn reconcile(
        step: usize,
        call: Invocation<'_, Self>,
    ) -> Result<BoxFuture<'_, Result<Option<Value>, StepError>>, CallError>;

    /// Evaluates the condition of `step` (true when it has none).
    fn condition(
        step: usize,
        input: &Self::Input,
        outputs: &dyn OutputSource,
    ) -> Result<bool, CallError>;

    /// The arguments `step` would be called with, for dry-run proposals (names to values;
    /// `env` and `ctx` left out).
    fn proposal(step: usize, input: &Self::Input, outputs: &dyn OutputSource) -> Value;

    /// Checks a decision for human `step` against its type; returns it normalised.
    fn decision(step: usize, decision: Value) -> Result<Value, CallError>;

    /// The decision `on_timeout: approve | reject` records for human `step`.
    fn timeout_decision(step: usize, approved: bool) -> Result<Value, CallError>;

    /// The form of human `step`'s decision, when its type derives
    /// [`DecisionForm`](crate::form::DecisionForm).
    fn decision_form(step: usize) -> Option<Vec<crate::form::FormField>> {
        let _ = step;
        None
    }

    /// Assembles the typed outputs of a finished run.
    fn outputs(outputs: &dyn OutputSource) -> Result<Self::Outputs, CallError>;

    /// Evaluates the source of map `step` once and returns its items in order, each
    /// serialized: what the runtime journals before it calls the action per item (through
    /// [`WithItem`]).
    fn items(
        step: usize,
        input: &Self::Input,
        outputs: &dyn OutputSource,
    ) -> Result<Vec<Value>, CallError>;

    /// The child run child workflow `step` starts: the child's typed input built from the
    /// step's arguments, with the child's journaled name and fingerprint.
    fn child(
        step: usize,
        input: &Self::Input,
        outputs: &dyn OutputSource,
    ) -> Result<ChildStart, CallError>;

    /// Checks the payload of event `step` against its type; returns it normalised.
    fn event(step: usize, payload: Value) -> Result<Value, CallError>;

    /// Whether a journaled output of `step` (a map step's: all its items' outputs) decodes
    /// into the step's type in this build: what [`upgrade::check`](crate::upgrade::check)
    /// asks of every journaled output. `Ok` by default.
    fn check_output(step: usize, output: &Value) -> Result<(), CallError> {
        let _ = (step, output);
        Ok(())
    }

    /// The typed outputs of a finished run as JSON: what a parent journals as the output
    /// of the child workflow step that ran this workflow.
    fn outputs_value(outputs: &dyn OutputSource) -> Result<Value, CallError> {
        let outputs = Self::outputs(outputs)?;
        serde_json::to_value(&outputs).map_err(|error| {
            CallError::Step(StepError::validation(format!(
                "the outputs of `{}` do not serialize: {error}",
                Self::NAME
            )))
        })
    }
}

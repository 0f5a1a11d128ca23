//! Support for the code `workflow!` generates. Not a public API: it may change in any
//! release.
#![doc(hidden)]

pub use serde;
pub use serde_json;
pub use workflow_spec;

pub use crate::approval::Approval;
pub use crate::context::StepContext;
pub use crate::engine::human::{EventHandle, HumanTask};
pub use crate::engine::workflow::{
    BoxFuture, CallError, ChildStart, Invocation, OutputSource, WithItem, Workflow,
};
pub use crate::engine::RunRef;
pub use crate::error::StepError;
pub use crate::journal::Value;
pub use crate::machine::Machine;
pub use crate::schedule::Tick;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The stored text of a `search` entry's value.
pub fn search_value<T: crate::search::SearchValue + ?Sized>(value: &T) -> Option<String> {
    value.search_value()
}

pub use crate::flow::{Admission, StepKeys};

/// A type whose values can be the value of a flow control key (`concurrency`, `debounce`,
/// `rate`): exactly the types that can be searched.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the key of a limit",
    label = "read as a key, but `{Self}` is not text or a whole number",
    note = "keys are `String`, `&str`, integers, `bool`, `char` or an `Option` of one (absent: the run is not limited); implement `workflow_core::SearchValue` for an id type of your own, or key by one of its fields"
)]
pub trait LimitKeyValue {
    /// The key's value as text; `None` when absent.
    fn limit_key(&self) -> Option<String>;
}

impl<T: crate::search::SearchValue + ?Sized> LimitKeyValue for T {
    fn limit_key(&self) -> Option<String> {
        self.search_value()
    }
}

/// The value of a flow control key read from a run's values.
pub fn limit_key<T: LimitKeyValue + ?Sized>(value: &T) -> Option<String> {
    value.limit_key()
}

/// The value of a `priority:` path read from a run's input.
pub fn priority_value<T: crate::flow::PriorityValue + ?Sized>(value: &T) -> i64 {
    value.priority_value()
}

/// The required output of `step`.
pub fn required<T: DeserializeOwned>(
    outputs: &dyn OutputSource,
    step: usize,
) -> Result<T, CallError> {
    match outputs.output(step) {
        Some(value) => decode(step, value),
        None => Err(CallError::Absent(step)),
    }
}

/// The maybe-absent output of `step`.
pub fn optional<T: DeserializeOwned>(
    outputs: &dyn OutputSource,
    step: usize,
) -> Result<Option<T>, CallError> {
    match outputs.output(step) {
        Some(value) => decode(step, value).map(Some),
        None => Ok(None),
    }
}

/// One step's journaled output as an [`OutputSource`]: what the upgrade check decodes.
#[derive(Debug, Clone, Copy)]
pub struct Only<'a>(pub usize, pub &'a Value);

impl OutputSource for Only<'_> {
    fn output(&self, step: usize) -> Option<&Value> {
        (step == self.0).then_some(self.1)
    }
}

fn decode<T: DeserializeOwned>(step: usize, value: &Value) -> Result<T, CallError> {
    T::deserialize(value).map_err(|error| CallError::Decode {
        step,
        message: error.to_string(),
    })
}

/// Encodes a step output for the journal.
pub fn encode<T: Serialize>(value: &T) -> Result<Value, StepError> {
    serde_json::to_value(value)
        .map_err(|error| StepError::validation(format!("the output does not serialize: {error}")))
}

/// Converts an action's result, fixing its output type to the one the spec declares.
pub fn step_result<T, E: Into<StepError>>(result: Result<T, E>) -> Result<T, StepError> {
    result.map_err(Into::into)
}

/// Converts a compensation's result.
pub fn unit_result<T, E: Into<StepError>>(result: Result<T, E>) -> Result<(), StepError> {
    result.map(drop).map_err(Into::into)
}

/// Converts a reconcile function's result: `Some(output)` when the effect already happened.
pub fn reconcile_result<T: Serialize, E: Into<StepError>>(
    result: Result<Option<T>, E>,
) -> Result<Option<Value>, StepError> {
    match result.map_err(Into::into)? {
        Some(value) => encode(&value).map(Some),
        None => Ok(None),
    }
}

/// Checks a decision value against its type.
pub fn decision<T: Serialize + DeserializeOwned>(
    step: usize,
    value: Value,
) -> Result<Value, CallError> {
    let typed: T = decode(step, &value)?;
    encode(&typed).map_err(CallError::Step)
}

pub use crate::form::probe::{IsForm, NotForm, Probe};

/// Checks a decision against the fields of its form, when its type is a form: a mistake
/// names the field.
pub fn form_decision(
    fields: Option<Vec<crate::form::FormField>>,
    value: &Value,
) -> Result<(), CallError> {
    match fields {
        Some(fields) => crate::form::check(&fields, value)
            .map_err(|error| CallError::Step(StepError::validation(error.to_string()))),
        None => Ok(()),
    }
}

/// A decision type `on_timeout: approve | reject` can make up: one built from an
/// [`Approval`](crate::Approval).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be decided by `on_timeout: approve | reject`",
    label = "a timeout cannot fill in this decision",
    note = "implement `From<Approval>` for `{Self}` to say what a timeout decides, or choose `on_timeout: escalate(\"group\")` or `abort`"
)]
pub trait TimeoutDecision: From<crate::Approval> {}

impl<T: From<crate::Approval>> TimeoutDecision for T {}

/// The decision recorded by `on_timeout: approve | reject`.
pub fn timeout_decision<T: Serialize + TimeoutDecision>(
    approved: bool,
) -> Result<Value, CallError> {
    let approval = crate::Approval {
        approved,
        by: crate::machine::TIMEOUT_DECIDER.to_owned(),
        comment: Some("decided by on_timeout".to_owned()),
    };
    encode(&T::from(approval)).map_err(CallError::Step)
}

/// A value for a dry-run proposal.
pub fn propose<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// The source of a map step, typed by its items: made once per generated function from a
/// closure evaluating the `for_each` expression, so that the item type flows from the
/// source to the action's parameter (a mismatch is a type error at the spec's argument).
///
/// Only [`map_source`] states the bounds on the source (iterable, items serializable), so
/// a source that breaks them is reported once, at the source in the spec.
pub struct MapSource<'f, In, T> {
    items: Box<ItemsFn<'f, In>>,
    decode: fn(&Value) -> Result<T, serde_json::Error>,
}

impl<In, T> std::fmt::Debug for MapSource<'_, In, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MapSource").finish_non_exhaustive()
    }
}

/// Evaluates a map's source and serializes its items.
type ItemsFn<'f, In> = dyn Fn(&In, &dyn OutputSource) -> Result<Vec<Value>, CallError> + 'f;

/// Wraps the source closure of a map step.
pub fn map_source<'f, In, F, I>(source: F) -> MapSource<'f, In, I::Item>
where
    F: Fn(&In, &dyn OutputSource) -> Result<I, CallError> + 'f,
    I: IntoIterator,
    I::Item: Serialize + DeserializeOwned,
{
    MapSource {
        items: Box::new(move |input, outputs| {
            source(input, outputs)?
                .into_iter()
                .map(|item| encode(&item).map_err(CallError::Step))
                .collect()
        }),
        decode: |value| serde::Deserialize::deserialize(value),
    }
}

impl<In, T> MapSource<'_, In, T> {
    /// Evaluates the source and serializes its items, in order.
    pub fn items(&self, input: &In, outputs: &dyn OutputSource) -> Result<Vec<Value>, CallError> {
        (self.items)(input, outputs)
    }

    /// The item the call is made for, decoded: `Err(NoItem)` without one.
    pub fn item(&self, outputs: &dyn OutputSource, step: usize) -> Result<T, CallError> {
        let (index, value) = outputs.item().ok_or(CallError::NoItem(step))?;
        (self.decode)(value).map_err(|error| CallError::Decode {
            step,
            message: format!("item #{index}: {error}"),
        })
    }
}

/// The item a call of a map step is made for, as JSON, for a dry-run proposal.
pub fn item_value(outputs: &dyn OutputSource) -> Value {
    outputs
        .item()
        .map_or(Value::Null, |(_, value)| value.clone())
}

/// The start of the child run of workflow `W` with `input`.
pub fn child_start<W: Workflow>(input: &W::Input) -> Result<ChildStart, CallError> {
    Ok(ChildStart {
        workflow: W::NAME,
        fingerprint: W::FINGERPRINT,
        input: encode(input).map_err(CallError::Step)?,
    })
}

/// Holds when `O` is the outputs type of workflow `W`: a child step's declared output must
/// be its child's `…Outputs`.
pub fn child_outputs<W: Workflow<Outputs = O>, O>() {}

/// `depth`, or one more than a child's depth if that is deeper.
pub const fn deeper(depth: usize, child: usize) -> usize {
    if child + 1 > depth {
        child + 1
    } else {
        depth
    }
}

/// Fills in the journaled name of child workflow `step` in a spec being built: the macro
/// cannot see another invocation, so the generated `spec()` asks the child type.
pub fn name_child(spec: &mut workflow_spec::Spec, step: usize, name: &str) {
    if let Some(workflow_spec::StepKind::Child(child)) =
        spec.steps.get_mut(step).map(|step| &mut step.kind)
    {
        child.name = Some(name.to_owned());
    }
}

/// The spec the macro embedded as JSON. It was serialized by the same model at compile
/// time, so it always deserializes; a mismatch would mean mixed crate versions.
pub fn spec_from_json(json: &str) -> workflow_spec::Spec {
    match serde_json::from_str(json) {
        Ok(spec) => spec,
        Err(error) => panic!(
            "the spec embedded by `workflow!` does not match this version of workflow-core: {error}"
        ),
    }
}

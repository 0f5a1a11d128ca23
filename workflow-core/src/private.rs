//! Support for the code `workflow!` generates. Not a public API: it may change in any
//! release.
#![doc(hidden)]

pub use serde;
pub use serde_json;
pub use workflow_spec;

pub use crate::approval::Approval;
pub use crate::context::StepContext;
pub use crate::engine::RunRef;
pub use crate::error::StepError;
pub use crate::human::HumanTask;
pub use crate::journal::Value;
pub use crate::machine::Machine;
pub use crate::workflow::{BoxFuture, CallError, Invocation, OutputSource, Workflow};

use serde::de::DeserializeOwned;
use serde::Serialize;

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

/// The decision recorded by `on_timeout: approve | reject`.
pub fn timeout_decision<T: Serialize + From<crate::Approval>>(
    approved: bool,
) -> Result<Value, CallError> {
    let approval = crate::Approval {
        approved,
        by: crate::human::TIMEOUT_DECIDER.to_owned(),
        comment: Some("decided by on_timeout".to_owned()),
    };
    encode(&T::from(approval)).map_err(CallError::Step)
}

/// A value for a dry-run proposal.
pub fn propose<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
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

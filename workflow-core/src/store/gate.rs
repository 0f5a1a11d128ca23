//! The gate a start of a limited workflow is queued with: its keys read from the spec and
//! the start's input, owned, and lent to the store as a [`Gate`]. Written once for the
//! engine (which reads the keys with the workflow's code) and the admin operations (which
//! read them from the journaled JSON input).

use workflow_spec::{LimitKey, Spec};

use crate::flow::Admission;
use crate::journal::Value;
use crate::store::limits::{DebounceStart, Gate};

/// Whether a spec's starts are gated: it has a workflow-level `concurrency`, `priority`
/// or `debounce`. Such starts are always queued, and admitted by the engine.
pub(crate) fn is_gated(spec: &Spec) -> bool {
    spec.concurrency.is_some() || spec.priority.is_some() || spec.debounce.is_some()
}

/// The scope of a key: `""` for a static key (one set of slots for every limit naming it),
/// the limit's name for a path key.
pub(crate) fn scope<'a>(key: &LimitKey, name: &'a str) -> &'a str {
    match key {
        LimitKey::Static(_) => "",
        LimitKey::Path(_) => name,
    }
}

/// The owned values of a start's [`Gate`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StartGate {
    concurrency: Option<(String, String)>,
    priority: i64,
    debounce: Option<(String, u64, Option<u64>)>,
}

impl StartGate {
    /// The gate of a start of `spec` whose keys read `admission`; `None` when the
    /// workflow is not gated.
    pub(crate) fn new(spec: &Spec, admission: Admission) -> Option<StartGate> {
        if !is_gated(spec) {
            return None;
        }
        let name = spec.journaled_name();
        Some(StartGate {
            concurrency: spec.concurrency.as_ref().and_then(|c| {
                let key = admission.concurrency?;
                Some((scope(&c.key, name).to_owned(), key))
            }),
            priority: admission.priority,
            debounce: spec.debounce.as_ref().and_then(|d| {
                let key = admission.debounce?;
                Some((
                    key,
                    d.window.as_millis() as u64,
                    d.max_wait.map(|m| m.as_millis() as u64),
                ))
            }),
        })
    }

    /// The gate of a start whose workflow's code is not registered here: its keys read
    /// from the JSON input by their paths (a path whose value is absent limits nothing).
    pub(crate) fn from_json(spec: &Spec, input: &Value) -> Option<StartGate> {
        let text = |key: &LimitKey| match key {
            LimitKey::Static(value) => Some(value.clone()),
            LimitKey::Path(path) => match read_path(input, path)? {
                Value::String(text) => Some(text.clone()),
                Value::Number(number) => Some(number.to_string()),
                Value::Bool(flag) => Some(flag.to_string()),
                _ => None,
            },
        };
        let priority = spec.priority.as_deref().map_or(0, |written| {
            written
                .trim()
                .parse::<i64>()
                .ok()
                .or_else(|| read_path(input, written.trim())?.as_i64())
                .unwrap_or(0)
        });
        let admission = Admission {
            concurrency: spec.concurrency.as_ref().and_then(|c| text(&c.key)),
            priority,
            debounce: spec.debounce.as_ref().and_then(|d| text(&d.key)),
        };
        StartGate::new(spec, admission)
    }

    /// The borrowed form the store takes.
    pub(crate) fn gate(&self) -> Gate<'_> {
        Gate {
            concurrency: self
                .concurrency
                .as_ref()
                .map(|(scope, key)| (scope.as_str(), key.as_str())),
            priority: self.priority,
            debounce: self
                .debounce
                .as_ref()
                .map(|(key, window_ms, max_wait_ms)| DebounceStart {
                    key,
                    window_ms: *window_ms,
                    max_wait_ms: *max_wait_ms,
                }),
        }
    }
}

/// `input.order.customer_id` read from a JSON input by its dotted path (the first segment
/// names an input).
fn read_path<'v>(input: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(input, |value, field| value.get(field))
}

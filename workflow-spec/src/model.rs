//! The checked model of a workflow spec.
//!
//! The parser lowers `workflow!` tokens into these types once every compile-time check has
//! passed; the macro embeds the result in the generated code, the runtime schedules from it,
//! and the renderers draw it. Declaration order is kept everywhere (`Vec` plus index), so
//! everything derived from a model is stable without sorting.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::retry::RetryPolicy;

/// A whole workflow: its name, inputs, environment type and steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The workflow's Rust type name, e.g. `UserOnboardingV1`: what diagrams, docs and the
    /// CLI's `--workflow` show. Runs are journaled under [`Spec::journaled_name`].
    pub name: String,
    /// The name set with `#[workflow(name = "UserOnboarding")]`, so that two versions of
    /// one workflow (two Rust types) share it; `None` when the attribute is absent.
    /// Read the name runs are journaled under through [`Spec::journaled_name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_name: Option<String>,
    /// The doc comment on the workflow, without the `///` markers.
    pub doc: String,
    /// The journaled inputs, in declaration order.
    pub inputs: Vec<Input>,
    /// The environment type given at registration (`env Services`), if any.
    pub env: Option<String>,
    /// The steps and human checkpoints, in declaration order.
    pub steps: Vec<Step>,
}

/// One journaled workflow input: `signup: Signup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// The input's name.
    pub name: String,
    /// Its type, as written in the spec.
    pub ty: String,
}

/// One node of the workflow: an action step or a human checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step id, unique in the workflow.
    pub id: String,
    /// The doc comment on the step.
    pub doc: String,
    /// The output type as written after `->`.
    pub output: String,
    /// What the step does.
    pub kind: StepKind,
    /// Every dependency (named arguments and `depends_on`), by step index, first mention first.
    pub deps: Vec<usize>,
    /// What a failure of this step does to the run.
    pub on_failure: OnFailure,
    /// The timeout of one attempt (action) or of the task (human checkpoint).
    pub timeout: Option<Duration>,
    /// The retry policy; `None` means exactly one attempt.
    pub retry: Option<RetryPolicy>,
    /// The condition expression, as written; false means the step is skipped.
    pub condition: Option<String>,
    /// Whether the output may be absent downstream (`continue`, a `condition`, or downstream
    /// of such a step); such outputs are passed as `Option<T>`.
    pub optional: bool,
}

impl Step {
    /// Whether this step is a human checkpoint.
    pub fn is_human(&self) -> bool {
        matches!(self.kind, StepKind::Human { .. })
    }

    /// The action call of an action step.
    pub fn action(&self) -> Option<&Call> {
        match &self.kind {
            StepKind::Action(action) => Some(&action.call),
            StepKind::Human(_) => None,
        }
    }

    /// How many attempts the step may make at most.
    pub fn max_attempts(&self) -> u32 {
        self.retry.as_ref().map_or(1, |retry| retry.max_attempts)
    }
}

/// The two kinds of step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepKind {
    /// `step id -> T { action: ... }`.
    Action(ActionStep),
    /// `human id -> Decision { assignee: ..., timeout: ..., on_timeout: ... }`.
    Human(HumanStep),
}

/// The parts of an action step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionStep {
    /// `action: path(args)`.
    pub call: Call,
    /// `compensate: path(args)`: the undo of the completed step.
    pub compensate: Option<Call>,
    /// `reconcile: path(args)`: asks whether an external effect already happened.
    pub reconcile: Option<Call>,
    /// `effect: external` marks a side effect outside the workflow.
    pub effect: Effect,
    /// `idempotent: true`: the action deduplicates by the context's idempotency key.
    pub idempotent: bool,
}

/// The parts of a human checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HumanStep {
    /// The group (or person) the task is assigned to.
    pub assignee: String,
    /// What happens when the task's deadline passes.
    pub on_timeout: OnTimeout,
    /// The text shown to the approver.
    pub prompt: Option<String>,
}

/// A call of a user function: `accounts::create_user_record(env, signup)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The function path as written.
    pub path: String,
    /// The arguments in order.
    pub args: Vec<Arg>,
}

/// One argument of a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arg {
    /// The output of the step with this index (a data dependency).
    Step(usize),
    /// The workflow input with this index.
    Input(usize),
    /// The reserved `env`: the registered environment, passed as `&Env`.
    Env,
    /// The reserved `ctx`: the step context, passed as `&StepContext`.
    Ctx,
    /// A literal, as written.
    Literal(String),
}

/// Whether a step reaches outside the workflow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    /// No side effect outside the workflow (the default).
    #[default]
    Internal,
    /// A side effect: suppressed in dry runs, retried only when idempotent or reconciled.
    External,
}

/// What a failed step does to its run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnFailure {
    /// Fail the run and compensate completed steps (the default).
    #[default]
    Abort,
    /// Settle the step as failed; downstream sees `None`.
    Continue,
}

/// What a human checkpoint does when its deadline passes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnTimeout {
    /// Reassign the task to this group with a fresh deadline.
    Escalate(String),
    /// Fail the step (and so the run, unless `on_failure: continue`).
    Abort,
    /// Decide the task as approved by the system.
    Approve,
    /// Decide the task as rejected by the system.
    Reject,
}

impl Spec {
    /// The index of the step with this id.
    pub fn step_index(&self, id: &str) -> Option<usize> {
        self.steps.iter().position(|step| step.id == id)
    }

    /// The steps that depend directly on `step`, in declaration order.
    pub fn dependents(&self, step: usize) -> impl Iterator<Item = usize> + '_ {
        self.steps
            .iter()
            .enumerate()
            .filter(move |(_, other)| other.deps.contains(&step))
            .map(|(index, _)| index)
    }

    /// The name runs of this workflow are journaled under: the store's `workflow` column,
    /// the first part of every idempotency key (`workflow/run/step`) and the name it is
    /// registered by. It is the `#[workflow(name = "...")]` attribute when present, else
    /// the type name.
    pub fn journaled_name(&self) -> &str {
        self.journal_name.as_deref().unwrap_or(&self.name)
    }
}

/// Formats a duration the way specs write it: `48h`, `2m`, `1500ms`, `7d`.
///
/// The largest exact unit wins, except that days are used from three days up, so the
/// usual `24h` and `48h` read as written.
pub fn format_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    const UNITS: [(u128, u128, &str); 4] = [
        (86_400_000, 3 * 86_400_000, "d"),
        (3_600_000, 3_600_000, "h"),
        (60_000, 60_000, "m"),
        (1_000, 1_000, "s"),
    ];
    for (size, from, unit) in UNITS {
        if ms >= from && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_in_the_largest_exact_unit() {
        assert_eq!(format_duration(Duration::from_secs(48 * 3600)), "48h");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_secs(86_400)), "24h");
        assert_eq!(format_duration(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::ZERO), "0ms");
    }
}

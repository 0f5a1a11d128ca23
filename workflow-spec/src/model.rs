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
    /// `schedule: { ... }`: when the workflow starts on its own, if it does. Outside the
    /// behavioural fingerprint: it governs when runs start, not what a run does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::schedule::Schedule>,
    /// `search: [order.customer_id, order.id]`: the business keys a run is found by, read
    /// from its inputs when it starts and stored with it. Outside the fingerprint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search: Vec<SearchKey>,
    /// `retention: 30d`: how long a finished run is kept before it is purged. Outside the
    /// fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Duration>,
    /// `concurrency: { key, limit, on_limit }`: how many runs may be in flight per key.
    /// Outside the fingerprint: it governs admission, not behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<crate::flow::RunConcurrency>,
    /// `priority: order.tier`: the expression as written, a path over the inputs or an
    /// integer literal; higher starts first. Outside the fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// `debounce: { key, window, max_wait }`: starts collapsed per key. Outside the
    /// fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce: Option<crate::flow::Debounce>,
}

/// One entry of `search: [..]`: a path over the workflow's inputs and the name its value
/// is stored and found under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchKey {
    /// The name: the path's last field (`customer_id`), unique in the workflow.
    pub name: String,
    /// The path as written: `order.customer_id`.
    pub path: String,
}

/// One journaled workflow input: `signup: Signup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Input {
    /// The input's name.
    pub name: String,
    /// Its type, as written in the spec.
    pub ty: String,
}

/// One node of the workflow: an action step (possibly a map over items), a child workflow,
/// a human checkpoint or an event wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step id, unique in the workflow.
    pub id: String,
    /// The doc comment on the step.
    pub doc: String,
    /// The output type as written after `->`. For a map step it is one item's output; the
    /// step's journaled output is [`Step::output_type`].
    pub output: String,
    /// What the step does.
    pub kind: StepKind,
    /// Every dependency (named arguments of the action or the child workflow, steps read by a
    /// map's source, and `depends_on`), by step index, first mention first.
    pub deps: Vec<usize>,
    /// What a failure of this step does to the run.
    pub on_failure: OnFailure,
    /// The timeout of one attempt (action; of one item's attempt in a map), of the task
    /// (human checkpoint), of the wait (event), or of the child run (child workflow).
    pub timeout: Option<Duration>,
    /// The retry policy (per item in a map); `None` means exactly one attempt.
    pub retry: Option<RetryPolicy>,
    /// The condition expression, as written; false means the step is skipped.
    pub condition: Option<String>,
    /// Whether the output may be absent downstream (`continue`, a `condition`, or downstream
    /// of such a step); such outputs are passed as `Option<T>`.
    pub optional: bool,
    /// `concurrency: { key, limit }`: attempts of this step in flight per key, across runs.
    /// Outside the fingerprint: it governs admission, not behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<crate::flow::StepConcurrency>,
    /// `rate: { key, limit, per, burst }`: attempts of this step started per key and
    /// period. Outside the fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<crate::flow::Rate>,
}

impl Step {
    /// Whether this step is a human checkpoint.
    pub fn is_human(&self) -> bool {
        matches!(self.kind, StepKind::Human { .. })
    }

    /// Whether this step waits for an event sent into the run.
    pub fn is_event(&self) -> bool {
        matches!(self.kind, StepKind::Event(_))
    }

    /// The action call of an action step (of each item, for a map step).
    pub fn action(&self) -> Option<&Call> {
        match &self.kind {
            StepKind::Action(action) => Some(&action.call),
            StepKind::Human(_) | StepKind::Child(_) | StepKind::Event(_) => None,
        }
    }

    /// The `for_each` of a map step.
    pub fn for_each(&self) -> Option<&ForEach> {
        match &self.kind {
            StepKind::Action(action) => action.for_each.as_ref(),
            StepKind::Human(_) | StepKind::Child(_) | StepKind::Event(_) => None,
        }
    }

    /// The child workflow a child step runs.
    pub fn child(&self) -> Option<&ChildStep> {
        match &self.kind {
            StepKind::Child(child) => Some(child),
            StepKind::Action(_) | StepKind::Human(_) | StepKind::Event(_) => None,
        }
    }

    /// The type of the step's journaled output, as downstream steps see it when it is
    /// present: `Vec<T>` for a map step (`Vec<Option<T>>` with `on_item_failure: skip`),
    /// [`Step::output`] otherwise.
    pub fn output_type(&self) -> String {
        match self.for_each() {
            Some(ForEach {
                on_item_failure: OnItemFailure::Skip,
                ..
            }) => format!("Vec<Option<{}>>", self.output),
            Some(_) => format!("Vec<{}>", self.output),
            None => self.output.clone(),
        }
    }

    /// How many attempts the step may make at most.
    pub fn max_attempts(&self) -> u32 {
        self.retry.as_ref().map_or(1, |retry| retry.max_attempts)
    }
}

/// The kinds of step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StepKind {
    /// `step id -> T { action: ... }`, and with `for_each` a map: one action per item.
    Action(ActionStep),
    /// `human id -> Decision { assignee: ..., timeout: ..., on_timeout: ... }`.
    Human(HumanStep),
    /// `step id -> ChildOutputs { workflow: Child(field: arg, ...) }`: a child run of
    /// another workflow; the step's output is the child's outputs.
    Child(ChildStep),
    /// `event id -> T { timeout: ..., on_timeout: ... }`: a wait for a typed payload sent
    /// into the run from outside; the step's output is the payload.
    Event(EventStep),
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
    /// `spawn: true`: each attempt runs as a tokio task of its own instead of being polled
    /// by its run's driver (for CPU-heavy or blocking actions). Not behaviour: outside the
    /// fingerprint.
    #[serde(default, skip_serializing_if = "is_false")]
    pub spawn: bool,
    /// `for_each: x in source`: the step is a map, its action called once per item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<ForEach>,
}

/// The items of a map step: `for_each: line in order.lines`, with `concurrency` and
/// `on_item_failure`.
///
/// The source is evaluated once, when the step starts; each item is journaled and keyed
/// on its own (`workflow/run/step/index`), has its own attempts (the step's `retry` and
/// `timeout` apply per item) and, on abort, its own compensation. The action (and
/// `compensate`, `reconcile`) take the item under [`ForEach::binding`] as [`Arg::Item`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForEach {
    /// The name each item is bound to: `line`.
    pub binding: String,
    /// The source expression as written: `order.lines`. It reads inputs and upstream
    /// outputs (each step it reads is a dependency) and yields the items in order.
    pub source: String,
    /// How many items may be in flight at once (at least 1; [`DEFAULT_CONCURRENCY`]).
    pub concurrency: u32,
    /// What a failed item does to the step.
    pub on_item_failure: OnItemFailure,
}

/// How many items of a map step are in flight at once when `concurrency` is not given.
pub const DEFAULT_CONCURRENCY: u32 = 16;

/// What a map step does when one item fails for good.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnItemFailure {
    /// The step fails (the default); then the step's `on_failure` applies.
    #[default]
    Abort,
    /// The item's output is `None` and the other items go on: the step's output is
    /// `Vec<Option<T>>`.
    Skip,
}

/// The parts of a child workflow step: `workflow: Shipping(order: order, holds: reserve_lines)`.
///
/// The child is its own run, linked to its parent and started once (keyed by the parent's
/// run and step); its failure is the step's failure, and cancelling the parent cancels it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildStep {
    /// The child workflow's type path as written: `Shipping`, `shipping::Shipping`.
    pub workflow: String,
    /// The child's journaled name (`<Child as Workflow>::NAME`). The macro cannot see
    /// another invocation, so it is `None` in the model it checks and renders; the
    /// generated `spec()` fills it in, and the generated `Workflow::child` returns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The child's inputs, one per field of its `…Input`, in the order written.
    pub args: Vec<ChildArg>,
}

/// One input of a child workflow: `holds: reserve_lines`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildArg {
    /// The field of the child's `…Input`.
    pub field: String,
    /// Its value: a step output, an input or a literal.
    pub arg: Arg,
}

/// The parts of an event step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventStep {
    /// What happens when no event arrives before the step's timeout.
    pub on_timeout: OnEventTimeout,
}

/// What an event step does when its deadline passes without an event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OnEventTimeout {
    /// Fail the step, and so the run (the default).
    #[default]
    Abort,
    /// Settle the step without a payload: downstream sees `None`.
    Continue,
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
    /// `approvals: N`: how many distinct people must approve (a rejection by anyone
    /// rejects); 1 by default.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub approvals: u32,
    /// `self_approval: false`: whoever started the run may not decide the task; `true`
    /// (allowed) by default.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub self_approval: bool,
    /// `title: "Refund {refund.amount_cents}"`: what the task is called in the inbox, with
    /// placeholders (see [`crate::title`]). Presentation: outside the fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `show: [refund.amount_cents, assess.note]`: values shown before the raw context,
    /// each a path from a workflow input or an upstream step. Presentation: outside the
    /// fingerprint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub show: Vec<String>,
}

impl HumanStep {
    /// A checkpoint with the defaults of every optional key.
    pub fn new(assignee: impl Into<String>, on_timeout: OnTimeout) -> HumanStep {
        HumanStep {
            assignee: assignee.into(),
            on_timeout,
            prompt: None,
            approvals: 1,
            self_approval: true,
            title: None,
            show: Vec::new(),
        }
    }
}

fn one() -> u32 {
    1
}

fn is_one(value: &u32) -> bool {
    *value == 1
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
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
    /// The current item of a map step (its `for_each` binding), passed owned.
    Item,
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
        if ms >= from && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Serde's `skip_serializing_if` for flags that are off by default.
fn is_false(value: &bool) -> bool {
    !*value
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

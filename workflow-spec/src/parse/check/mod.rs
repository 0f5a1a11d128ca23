//! The compile-time checks, one function per rule. Each records its errors in the
//! [`Ctxt`] and never stops the others.

pub mod flow;
pub mod human;
pub mod keys;
pub mod language;
mod reads;
pub mod schedule;

use std::collections::HashMap;

use proc_macro2::Span;
use syn::Ident;

use super::ast::{ArgAst, CallAst, OnTimeoutAst, StepAst, StepKw, WorkflowAst};
use super::ctxt::{did_you_mean, suggest, Ctxt};
use super::{retry_policy, step_dep_idents, Name, Names, RESERVED};
use crate::model::Effect;
use crate::retry::PolicyField;

pub use self::reads::condition_reads;

/// Runs every check.
pub fn run_all(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    workflow_has_steps(cx, ast);
    reserved_names(cx, ast);
    duplicate_names(cx, ast);
    action_present(cx, ast);
    call_arguments(cx, ast, names);
    depends_on(cx, ast, names);
    cycles(cx, ast, names);
    timeouts(cx, ast);
    retry_policies(cx, ast);
    human_checkpoints(cx, ast);
    human::approvals(cx, ast);
    human::titles(cx, ast, names);
    human::shows(cx, ast, names);
    handle_names_not_shadowed(cx, ast);
    external_effects(cx, ast);
    upstream_only_calls(cx, ast, names);
    conditions(cx, ast, names);
    language::map_bindings(cx, ast);
    language::map_keys(cx, ast);
    language::map_concurrency(cx, ast);
    language::map_items_used(cx, ast, names);
    language::map_sources(cx, ast, names);
    language::child_steps(cx, ast);
    language::child_keys(cx, ast);
    language::child_arguments(cx, ast, names);
    language::event_timeouts(cx, ast);
    schedule::schedule_cron(cx, ast);
    schedule::schedule_zone(cx, ast);
    schedule::schedule_bounds(cx, ast);
    schedule::scheduled_inputs(cx, ast);
    keys::search_not_empty(cx, ast);
    keys::search_reads_inputs(cx, ast, names);
    keys::search_names_unique(cx, ast);
    keys::retention_bounds(cx, ast);
    flow::limit_values(cx, ast);
    flow::workflow_key_reads(cx, ast, names);
    flow::step_limits(cx, ast, names);
}

/// A workflow needs at least one step.
pub fn workflow_has_steps(cx: &Ctxt, ast: &WorkflowAst) {
    if ast.steps.is_empty() && !cx.has_errors() {
        cx.error(
            ast.body_span,
            format!(
                "workflow `{}` has no steps\nhelp: add one, e.g. `step first -> () {{ action: my_fn(), }}`",
                ast.name
            ),
        );
    }
}

/// `env` and `ctx` are reserved argument names: no step or input may take them. Step ids
/// and input names are plain identifiers, not raw ones (`r#type`).
pub fn reserved_names(cx: &Ctxt, ast: &WorkflowAst) {
    let idents = ast
        .inputs
        .iter()
        .map(|input| (&input.name, "an input"))
        .chain(ast.steps.iter().map(|step| (&step.id, "a step id")));
    for (ident, what) in idents {
        let name = ident.to_string();
        if RESERVED.contains(&name.as_str()) {
            cx.error(
                ident.span(),
                format!(
                    "`{name}` is reserved and cannot be {what}: it names the {}\nhelp: rename it, e.g. `{name}_data`",
                    if name == "env" { "workflow's environment" } else { "step context" }
                ),
            );
        } else if let Some(plain) = name.strip_prefix("r#") {
            // A raw identifier would name journal entries, diagram nodes and generated
            // items `r#type`; keep names plain.
            cx.error(
                ident.span(),
                format!(
                    "`{name}` is a raw identifier and cannot be {what}\nhelp: rename it to a plain identifier, e.g. `{plain}_{}`",
                    if what == "an input" { "input" } else { "step" }
                ),
            );
        }
    }
}

/// Step ids are unique and do not reuse input names; the second copy is reported.
pub fn duplicate_names(cx: &Ctxt, ast: &WorkflowAst) {
    let mut seen: HashMap<String, Span> = HashMap::new();
    for input in &ast.inputs {
        let name = input.name.to_string();
        if seen.insert(name.clone(), input.name.span()).is_some() {
            cx.error(
                input.name.span(),
                format!(
                    "duplicate input `{name}`\nhelp: input names must be unique; rename this one"
                ),
            );
        }
    }
    let inputs: Vec<String> = ast.inputs.iter().map(|i| i.name.to_string()).collect();
    let mut steps: HashMap<String, ()> = HashMap::new();
    for step in &ast.steps {
        let name = step.id.to_string();
        if steps.insert(name.clone(), ()).is_some() {
            cx.error(
                step.id.span(),
                format!(
                    "duplicate step id `{name}`\nhelp: step ids must be unique; rename this one"
                ),
            );
        } else if inputs.contains(&name) {
            cx.error(
                step.id.span(),
                format!("step `{name}` has the same name as a workflow input\nhelp: rename the step or the input so arguments are unambiguous"),
            );
        }
    }
}

/// Whether `step` wrote `key`: as is, or misspelled as an unknown key whose suggestion is
/// `key` (that typo is already reported, so "missing `key`" would only repeat it).
fn wrote_key(step: &StepAst, key: &str) -> bool {
    let allowed = step.kw.keys();
    step.keys.iter().any(|written| {
        let written = written.to_string();
        written == key
            || (!allowed.contains(&written.as_str())
                && suggest(&written, allowed.iter().copied()) == Some(key))
    })
}

/// Every `step` has an `action` (or a `workflow`: a child workflow).
pub fn action_present(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        if step.kw == StepKw::Step && !wrote_key(step, "action") && !wrote_key(step, "workflow") {
            cx.error(
                step.id.span(),
                format!(
                    "step `{}` has no `action`\nhelp: add `action: module::function(args),` naming the async fn that does the work, or `workflow: Child(field: value),` to run a child workflow",
                    step.id
                ),
            );
        }
    }
}

/// The calls of a step whose arguments are checked: a child workflow step takes none
/// (its `compensate` or `reconcile` is an error of its own).
fn calls(step: &StepAst) -> impl Iterator<Item = &CallAst> {
    let fields = &step.fields;
    let child = fields.workflow.is_some() && fields.action.is_none();
    fields
        .action
        .iter()
        .chain(fields.compensate.iter().filter(move |_| !child))
        .chain(fields.reconcile.iter().filter(move |_| !child))
}

/// Arguments name known steps or inputs (or `env`, `ctx`), never the step itself, and use
/// `env` only when the workflow declares one.
pub fn call_arguments(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        // A `for_each` that did not parse (already reported) leaves its item unknown.
        let broken_map = step.fields.for_each.is_none() && wrote_key(step, "for_each");
        for call in calls(step) {
            let is_action = call.key == "action";
            for arg in &call.args {
                let ArgAst::Name(ident) = arg else { continue };
                let name = ident.to_string();
                match names.lookup_arg(index, &name) {
                    None if broken_map => {}
                    None => unknown_name(cx, ast, step, ident, Place::Argument(&call.key)),
                    Some(Name::Env) if ast.env.is_none() => cx.error(
                        ident.span(),
                        format!(
                            "`env` is passed to `{}` but workflow `{}` declares no environment\nhelp: declare it after the inputs: `workflow {}(...) env Services {{ ... }}`",
                            step.id, ast.name, ast.name
                        ),
                    ),
                    Some(Name::Step(_)) if is_action && *ident == step.id => cx.error(
                        ident.span(),
                        format!("step `{name}` cannot take its own output as an argument\nhelp: remove `{name}` from the arguments"),
                    ),
                    _ => {}
                }
            }
        }
    }
}

/// Where a name is read, for [`unknown_name`]'s suggestions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place<'a> {
    /// An argument of `action`, `compensate` or `reconcile` (the key).
    Argument(&'a Ident),
    /// An input of a child workflow (`workflow: Child(field: value)`).
    ChildInput,
    /// A condition.
    Condition,
    /// The source of a map (`for_each: x in source`).
    Source,
}

/// Reports an unknown name, suggesting the nearest of the names that may stand there:
/// the steps (the step itself only for `compensate` and `reconcile`), the inputs, for
/// arguments `ctx` and (when declared) `env`, and in a map step's own calls its item.
fn unknown_name(cx: &Ctxt, ast: &WorkflowAst, step: &StepAst, ident: &Ident, place: Place<'_>) {
    let name = ident.to_string();
    let (own, reserved): (bool, &[&str]) = match place {
        Place::Argument(key) if ast.env.is_some() => (key != "action", &["env", "ctx"]),
        Place::Argument(key) => (key != "action", &["ctx"]),
        Place::ChildInput | Place::Condition | Place::Source => (false, &[]),
    };
    let binding = match place {
        Place::Argument(_) => step
            .fields
            .for_each
            .as_ref()
            .map(|(_, for_each)| for_each.binding.to_string()),
        Place::ChildInput | Place::Condition | Place::Source => None,
    };
    let candidates: Vec<String> = binding
        .into_iter()
        .chain(
            ast.steps
                .iter()
                .filter(|other| own || other.id != step.id)
                .map(|other| other.id.to_string()),
        )
        .chain(ast.inputs.iter().map(|input| input.name.to_string()))
        .chain(reserved.iter().map(|r| (*r).to_owned()))
        .collect();
    let help = did_you_mean(&name, candidates.iter().map(String::as_str)).unwrap_or_else(|| {
        if candidates.is_empty() {
            "nothing is in scope here: declare an input or an upstream step".to_owned()
        } else {
            format!("the names in scope are {}", quoted(&candidates))
        }
    });
    let place = match place {
        Place::Argument(key) => format!("argument of `{key}`"),
        Place::ChildInput => format!("the inputs of the child workflow of `{}`", step.id),
        Place::Condition => format!("the condition of `{}`", step.id),
        Place::Source => format!("the items of `{}` (`for_each`)", step.id),
    };
    cx.error(
        ident.span(),
        format!("unknown step or input `{name}` in {place}\nhelp: {help}"),
    );
}

/// `depends_on` names known steps, not the step itself, each once.
pub fn depends_on(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for step in &ast.steps {
        let Some((_, list)) = &step.fields.depends_on else {
            continue;
        };
        let mut seen: Vec<String> = Vec::new();
        for ident in list {
            let name = ident.to_string();
            if *ident == step.id {
                cx.error(
                    ident.span(),
                    format!("step `{name}` cannot depend on itself\nhelp: remove `{name}` from `depends_on`"),
                );
            } else if language::is_binding(step, &name) && names.lookup(&name).is_none() {
                cx.error(
                    ident.span(),
                    format!("`{name}` is the item of map step `{}`, not a step; `depends_on` lists steps\nhelp: remove it; the step already reads the steps its items come from", step.id),
                );
            } else if seen.contains(&name) {
                cx.error(
                    ident.span(),
                    format!(
                        "`{name}` is listed twice in `depends_on`\nhelp: remove the second copy"
                    ),
                );
            } else {
                match names.lookup(&name) {
                    Some(Name::Step(_)) => {}
                    Some(Name::Input(_)) => cx.error(
                        ident.span(),
                        format!("`{name}` is a workflow input, not a step; `depends_on` lists steps\nhelp: inputs are always available; pass `{name}` as an argument instead"),
                    ),
                    Some(Name::Env | Name::Ctx | Name::Item) | None => {
                        let help = did_you_mean(&name, names.steps.iter().map(String::as_str))
                            .unwrap_or_else(|| format!("the steps are {}", quoted(&names.steps)));
                        cx.error(
                            ident.span(),
                            format!("unknown step `{name}` in `depends_on`\nhelp: {help}"),
                        );
                    }
                }
            }
            seen.push(name);
        }
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .take(12)
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Dependencies form no cycle; the error sits on the edge that closes one and spells it out.
pub fn cycles(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    let Some(cycle) = crate::graph::find_cycle(&names.deps) else {
        return;
    };
    // cycle = [a, b, c]: a depends on b, b on c, c on a. Report at the mention of `a`
    // inside `c`'s fields: the edge that closes the cycle.
    let (Some(&first), Some(&last)) = (cycle.first(), cycle.last()) else {
        return;
    };
    let closing = &ast.steps[last];
    let target = &names.steps[first];
    let span = step_dep_idents(closing)
        .iter()
        .find(|ident| *ident == target.as_str())
        .map_or(closing.id.span(), Ident::span);
    let mut path: Vec<&str> = cycle
        .iter()
        .rev()
        .map(|i| names.steps[*i].as_str())
        .collect();
    path.insert(0, &names.steps[first]);
    // path reads in execution order: first runs before ... before first again.
    let path = path.join(" -> ");
    cx.error(
        span,
        format!(
            "dependency cycle: {path}\nhelp: a workflow must be acyclic; remove one of these dependencies (this one closes the cycle)"
        ),
    );
}

/// Timeouts are longer than zero.
pub fn timeouts(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        if let Some((_, duration)) = &step.fields.timeout {
            if duration.value.is_zero() {
                cx.error(
                    duration.span,
                    format!("the timeout of `{}` must be longer than zero\nhelp: give it a positive duration such as `30s`", step.id),
                );
            }
        }
    }
}

/// Retry policies pass the same validation the runtime applies.
pub fn retry_policies(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        let Some((key, retry)) = &step.fields.retry else {
            continue;
        };
        let policy = retry_policy(retry);
        let timeout = step.fields.timeout.as_ref().map(|(_, d)| d.value);
        let Err(errors) = policy.validate(timeout) else {
            continue;
        };
        for error in errors {
            let span = match error.field {
                PolicyField::MaxAttempts => retry.max_attempts.map(|(_, s)| s),
                PolicyField::Initial => retry.initial.or(retry.max).map(|d| d.span),
                PolicyField::Max => retry.max.map(|d| d.span),
                PolicyField::Multiplier => retry.multiplier.map(|(_, s)| s),
                PolicyField::Jitter => retry.jitter.map(|(_, s)| s),
                PolicyField::Deadline => retry.deadline.map(|d| d.span),
                PolicyField::RetryOn(index) => retry
                    .retry_on
                    .as_ref()
                    .and_then(|kinds| kinds.get(index))
                    .map(|(_, s)| *s),
            }
            // Fall back on a key the user wrote when the default value is the culprit.
            .or_else(|| retry.initial.map(|d| d.span))
            .unwrap_or_else(|| key.span());
            cx.error_help(span, &error.message, error.help.as_ref());
        }
    }
}

/// Human checkpoints have a timeout and an `on_timeout` (escalation path) and an assignee.
pub fn human_checkpoints(cx: &Ctxt, ast: &WorkflowAst) {
    for step in ast.steps.iter().filter(|s| s.kw == StepKw::Human) {
        let fields = &step.fields;
        let id = &step.id;
        if fields.assignee.is_none() && !wrote_key(step, "assignee") {
            cx.error(
                id.span(),
                format!(
                    "human step `{id}` has no `assignee`\nhelp: add `assignee: \"team_name\",`"
                ),
            );
        }
        if fields.timeout.is_none() && !wrote_key(step, "timeout") {
            cx.error(
                id.span(),
                format!("human step `{id}` has no `timeout`: a checkpoint must not wait forever\nhelp: add `timeout: 48h,` and an `on_timeout`"),
            );
        }
        if fields.on_timeout.is_none() && !wrote_key(step, "on_timeout") {
            cx.error(
                id.span(),
                format!("human step `{id}` has no `on_timeout`: say what happens when nobody decides\nhelp: add `on_timeout: escalate(\"leads\"),` (or `abort`, `approve`, `reject`)"),
            );
        }
        if let (Some((_, OnTimeoutAst::Escalate(group))), Some((_, assignee))) =
            (&fields.on_timeout, &fields.assignee)
        {
            if group.value() == assignee.value() {
                cx.error(
                    group.span(),
                    format!("`{id}` escalates to its own assignee `{}`\nhelp: escalate to another group, e.g. its leads", group.value()),
                );
            }
        }
    }
}

/// The methods of a run handle; a human step or an event of the same name would be hidden
/// behind them.
pub const RUN_HANDLE_METHODS: &[&str] = &[
    "id",
    "run_ref",
    "outputs",
    "inspect",
    "proposals",
    "cancel",
    "was_created",
    "deref",
];

/// A human step's handle (and an event's) is reached as `run.<id>()`, so its id must not
/// be a method the run handle already has.
pub fn handle_names_not_shadowed(cx: &Ctxt, ast: &WorkflowAst) {
    for step in ast.steps.iter().filter(|s| s.kw != StepKw::Step) {
        let id = step.id.to_string();
        if RUN_HANDLE_METHODS.contains(&id.as_str()) {
            let (what, example) = match step.kw {
                StepKw::Event => ("an event", format!("{id}_received")),
                _ => ("a human step", format!("{id}_review")),
            };
            cx.error(
                step.id.span(),
                format!(
                    "{what} cannot be named `{id}`: `run.{id}()` is already a method of the run handle\nhelp: rename it, e.g. `{example}`"
                ),
            );
        }
    }
}

/// A retried external effect must be idempotent or reconciled, or a retry may repeat it.
pub fn external_effects(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        let fields = &step.fields;
        let Some((effect_key, Effect::External)) = &fields.effect else {
            continue;
        };
        let Some((_, retry)) = &fields.retry else {
            continue;
        };
        let retried = retry.max_attempts.map_or(3, |(n, _)| n) > 1;
        let idempotent = fields.idempotent.as_ref().is_some_and(|(_, v)| *v);
        if retried && !idempotent && fields.reconcile.is_none() {
            let span = retry.max_attempts.map_or(effect_key.span(), |(_, s)| s);
            cx.error(
                span,
                format!(
                    "step `{}` retries an external effect that is neither idempotent nor reconciled, so a retry could repeat it\nhelp: add `idempotent: true` (and pass `ctx` so the action can use its idempotency key), or `reconcile: path(args)`, or `max_attempts: 1`",
                    step.id
                ),
            );
        }
    }
}

/// `compensate` and `reconcile` read only the step's own output and what is upstream of it.
pub fn upstream_only_calls(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let calls = calls(step).filter(|call| call.key != "action");
        let mut upstream = None;
        for call in calls {
            for arg in &call.args {
                let ArgAst::Name(ident) = arg else { continue };
                let Some(Name::Step(other)) = names.lookup(&ident.to_string()) else {
                    continue;
                };
                if other == index {
                    if call.key == "reconcile" {
                        cx.error(
                            ident.span(),
                            format!("`reconcile` runs before `{}` has an output, so it cannot take it\nhelp: pass `ctx` and look the effect up by its idempotency key", step.id),
                        );
                    }
                    continue;
                }
                let upstream = upstream.get_or_insert_with(|| names.upstream(index));
                if !upstream[other] {
                    cx.error(
                        ident.span(),
                        format!(
                            "`{}` of step `{}` reads `{ident}`, which is not upstream of `{}`\nhelp: it may only take `{}`'s own output and steps it depends on; add `{ident}` to `depends_on` if it must run first",
                            call.key, step.id, step.id, step.id
                        ),
                    );
                }
            }
        }
    }
}

/// Conditions read only known names, and only steps upstream of the conditional step.
pub fn conditions(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let Some((_, expr)) = &step.fields.condition else {
            continue;
        };
        let mut upstream = None;
        for ident in condition_reads(expr) {
            let name = ident.to_string();
            if language::is_binding(step, &name) && names.lookup(&name).is_none() {
                cx.error(
                    ident.span(),
                    format!("the condition of `{}` cannot read its item `{name}`: it decides once whether the whole map runs\nhelp: read inputs and upstream outputs; to leave items out, filter the items in the `for_each` source", step.id),
                );
                continue;
            }
            match names.lookup(&name) {
                Some(Name::Step(other)) if other == index => cx.error(
                    ident.span(),
                    format!("the condition of `{name}` cannot read its own output: it decides whether the step runs\nhelp: read inputs and upstream outputs; to act on this output, give a downstream step the condition"),
                ),
                Some(Name::Step(other)) => {
                    let upstream = upstream.get_or_insert_with(|| names.upstream(index));
                    if !upstream[other] {
                        cx.error(
                            ident.span(),
                            format!(
                                "the condition of `{}` reads `{name}`, which is not upstream of it\nhelp: add `depends_on: [{name}]` so it has settled when the condition is evaluated",
                                step.id
                            ),
                        );
                    }
                }
                Some(Name::Input(_)) => {}
                Some(Name::Env | Name::Ctx | Name::Item) => cx.error(
                    ident.span(),
                    format!("the condition of `{}` cannot read `{name}`: a condition is a pure function of inputs and upstream outputs\nhelp: compute the value in a step (a step's action may take `{name}`) and read that step's output", step.id),
                ),
                None => unknown_name(cx, ast, step, &ident, Place::Condition),
            }
        }
    }
}

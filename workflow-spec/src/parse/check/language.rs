//! The checks of map steps (`for_each`), child workflows (`workflow:`) and events, one
//! function per rule.

use std::collections::HashSet;

use syn::Ident;

use super::super::ast::{ArgAst, ChildAst, StepAst, StepKw, WorkflowAst};
use super::super::ctxt::Ctxt;
use super::super::{Name, Names, RESERVED};
use super::{condition_reads, unknown_name, wrote_key, Place};

/// Whether `name` is the item binding of map step `step`.
pub(super) fn is_binding(step: &StepAst, name: &str) -> bool {
    step.fields
        .for_each
        .as_ref()
        .is_some_and(|(_, for_each)| for_each.binding == name)
}

fn binding(step: &StepAst) -> Option<&Ident> {
    step.fields
        .for_each
        .as_ref()
        .map(|(_, for_each)| &for_each.binding)
}

/// A map's item binding is a plain, unreserved name that shadows no step and no input:
/// in the step's calls it would hide them, and readers would not know which is meant.
pub fn map_bindings(cx: &Ctxt, ast: &WorkflowAst) {
    let steps: HashSet<String> = ast.steps.iter().map(|s| s.id.to_string()).collect();
    let inputs: HashSet<String> = ast.inputs.iter().map(|i| i.name.to_string()).collect();
    for step in &ast.steps {
        let Some(ident) = binding(step) else { continue };
        let name = ident.to_string();
        let id = &step.id;
        if RESERVED.contains(&name.as_str()) {
            cx.error(
                ident.span(),
                format!("`{name}` is reserved and cannot name the items of `{id}`\nhelp: name the item after what it is, e.g. `for_each: line in ...`"),
            );
        } else if let Some(plain) = name.strip_prefix("r#") {
            cx.error(
                ident.span(),
                format!("`{name}` is a raw identifier and cannot name the items of `{id}`\nhelp: rename it to a plain identifier, e.g. `{plain}_item`"),
            );
        } else if steps.contains(&name) {
            cx.error(
                ident.span(),
                format!("the item `{name}` of `{id}` has the name of a step\nhelp: rename the item, e.g. `for_each: {name}_item in ...`, so `{name}` keeps naming the step"),
            );
        } else if inputs.contains(&name) {
            cx.error(
                ident.span(),
                format!("the item `{name}` of `{id}` has the name of a workflow input\nhelp: rename the item, e.g. `for_each: {name}_item in ...`, so `{name}` keeps naming the input"),
            );
        }
    }
}

/// `concurrency` and `on_item_failure` belong to map steps, and a map runs an action per
/// item, not a child workflow.
pub fn map_keys(cx: &Ctxt, ast: &WorkflowAst) {
    for step in ast.steps.iter().filter(|s| s.kw == StepKw::Step) {
        let fields = &step.fields;
        let id = &step.id;
        if fields.for_each.is_none() && !wrote_key(step, "for_each") {
            let keys = [
                fields.concurrency.as_ref().map(|(key, _)| key),
                fields.on_item_failure.as_ref().map(|(key, _)| key),
            ];
            for key in keys.into_iter().flatten() {
                cx.error(
                    key.span(),
                    format!("`{key}` applies to the items of a map, but `{id}` has no `for_each`\nhelp: add `for_each: item in source,` to run the action once per item, or remove `{key}`"),
                );
            }
        }
        if let (Some((key, _)), Some(child)) = (&fields.for_each, &fields.workflow) {
            cx.error(
                key.span(),
                format!(
                    "step `{id}` maps over items and runs child workflow `{}`: a map runs an action per item\nhelp: map in a step whose action starts the work per item, or pass the items to the child workflow as one input",
                    super::super::tokens_to_string(&child.path)
                ),
            );
        }
    }
}

/// A map keeps at least one item in flight.
pub fn map_concurrency(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        if let Some((_, (0, span))) = &step.fields.concurrency {
            cx.error(
                *span,
                format!("`concurrency: 0` would never start an item of `{}`\nhelp: allow at least one item in flight, e.g. `concurrency: 8` (the default is 16)", step.id),
            );
        }
    }
}

/// A map's action takes its item: a map whose calls all look alike repeats one call.
/// (When the action names something unknown, that error is likely the misspelt item.)
pub fn map_items_used(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let (Some(ident), Some(action)) = (binding(step), &step.fields.action) else {
            continue;
        };
        let args: Vec<&Ident> = action
            .args
            .iter()
            .filter_map(|arg| match arg {
                ArgAst::Name(name) => Some(name),
                ArgAst::Literal(_) => None,
            })
            .collect();
        let passed = args.contains(&ident);
        let unknown = args
            .iter()
            .any(|name| names.lookup_arg(index, &name.to_string()).is_none());
        if !passed && !unknown {
            cx.error(
                ident.span(),
                format!(
                    "map step `{}` never passes its item `{ident}` to its action\nhelp: pass it: `action: {}(..., {ident})`",
                    step.id,
                    super::super::tokens_to_string(&action.path)
                ),
            );
        }
    }
}

/// A map's source reads known inputs and upstream outputs only: not `env` or `ctx` (it
/// is evaluated once and journaled, like a condition), not the step's own output or item.
pub fn map_sources(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let Some((_, for_each)) = &step.fields.for_each else {
            continue;
        };
        for ident in condition_reads(&for_each.source) {
            let name = ident.to_string();
            match names.lookup(&name) {
                Some(Name::Step(other)) if other == index => cx.error(
                    ident.span(),
                    format!("the items of `{name}` cannot come from its own output\nhelp: map over an input or an upstream step's output"),
                ),
                Some(Name::Step(_) | Name::Input(_)) => {}
                Some(Name::Env | Name::Ctx | Name::Item) => cx.error(
                    ident.span(),
                    format!("the items of `{}` cannot be read from `{name}`: the source is evaluated once and its items are journaled\nhelp: compute the items in a step (its action may take `{name}`) and map over its output", step.id),
                ),
                None if for_each.binding == name => cx.error(
                    ident.span(),
                    format!("the items of `{}` cannot be read from its own item `{name}`\nhelp: map over an input or an upstream step's output: `for_each: {name} in order.lines`", step.id),
                ),
                None => unknown_name(cx, ast, step, &ident, Place::Source),
            }
        }
    }
}

/// Whether a child workflow step names the workflow it is in: `Self`, its name, or
/// `self::` and its name. (Through another module's path rustc decides.)
pub fn names_itself(ast: &WorkflowAst, child: &ChildAst) -> bool {
    let segments: Vec<String> = child
        .path
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect();
    let own = ast.name.to_string();
    match segments.as_slice() {
        [only] => *only == own || only == "Self",
        [first, last] => first == "self" && *last == own,
        _ => false,
    }
}

/// A step runs an action or a child workflow, not both, and never its own workflow; a
/// child's inputs are named once each.
pub fn child_steps(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        let Some(child) = &step.fields.workflow else {
            continue;
        };
        let id = &step.id;
        if step.fields.action.is_some() {
            cx.error(
                child.key.span(),
                format!("step `{id}` has both an `action` and a `workflow`: a step runs one or the other\nhelp: keep the `action`, or split the child workflow into a step of its own"),
            );
        }
        let own = ast.name.to_string();
        if names_itself(ast, child) {
            cx.error_spanned(
                &child.path,
                format!("workflow `{own}` cannot run itself as a child: its runs would never end\nhelp: a workflow may include other workflows, never itself, directly or through a child"),
            );
        }
        let mut seen: Vec<String> = Vec::new();
        for field in &child.fields {
            let name = field.field.to_string();
            if seen.contains(&name) {
                cx.error(
                    field.field.span(),
                    format!("the input `{name}` of the child workflow is given twice\nhelp: remove one of the two"),
                );
            }
            seen.push(name);
        }
    }
}

/// The keys of a child workflow step: `workflow`, `depends_on`, `condition`, `on_failure`
/// and `timeout`. A child is not retried as a whole (its own steps retry), and its effects,
/// idempotency and compensations are its own steps'.
pub fn child_keys(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        let fields = &step.fields;
        if fields.workflow.is_none() || fields.action.is_some() {
            continue;
        }
        let keys = [
            fields.retry.as_ref().map(|(key, _)| key),
            fields.effect.as_ref().map(|(key, _)| key),
            fields.idempotent.as_ref().map(|(key, _)| key),
            fields.compensate.as_ref().map(|call| &call.key),
            fields.reconcile.as_ref().map(|call| &call.key),
            fields.spawn.as_ref().map(|(key, _)| key),
        ];
        for key in keys.into_iter().flatten() {
            let why = match key.to_string().as_str() {
                "retry" => "a child run is not retried as a whole: give the child's own steps their `retry`",
                "compensate" => "a child compensates its own completed steps when it aborts: give them their `compensate`",
                "spawn" => "a child run is driven as a run of its own: give the child's own steps `spawn: true` where they need a task",
                _ => "the child's own steps declare their effects, idempotency and reconcilers",
            };
            cx.error(
                key.span(),
                format!(
                    "`{key}` does not apply to child workflow step `{}`\nhelp: {why}",
                    step.id
                ),
            );
        }
    }
}

/// A child's inputs name known steps or inputs (or are literals): not `env` or `ctx`,
/// which are not journaled, and not the step's own output.
pub fn child_arguments(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let Some(child) = &step.fields.workflow else {
            continue;
        };
        for field in &child.fields {
            let ArgAst::Name(ident) = &field.arg else {
                continue;
            };
            let name = ident.to_string();
            match names.lookup(&name) {
                None => unknown_name(cx, ast, step, ident, Place::ChildInput),
                Some(Name::Env | Name::Ctx | Name::Item) => cx.error(
                    ident.span(),
                    format!("`{name}` cannot be passed to a child workflow: the child's input is journaled, and `{name}` is not\nhelp: the child gets its own `env` at its registration and its own `ctx` per step"),
                ),
                Some(Name::Step(other)) if other == index => cx.error(
                    ident.span(),
                    format!("step `{name}` cannot pass its own output to its child workflow\nhelp: the child's outputs are this step's output; pass inputs and upstream outputs"),
                ),
                Some(Name::Step(_) | Name::Input(_)) => {}
            }
        }
    }
}

/// An event waits at most its `timeout`: a wait must not wait forever.
pub fn event_timeouts(cx: &Ctxt, ast: &WorkflowAst) {
    for step in ast.steps.iter().filter(|s| s.kw == StepKw::Event) {
        if step.fields.timeout.is_none() && !wrote_key(step, "timeout") {
            let id = &step.id;
            cx.error(
                id.span(),
                format!("event `{id}` has no `timeout`: a wait must not wait forever\nhelp: add `timeout: 1h,` and say what happens then with `on_timeout: abort` (the default) or `continue`"),
            );
        }
    }
}

//! Checks of flow control: a workflow's `concurrency`, `priority` and `debounce`, and a
//! step's `concurrency: { .. }` and `rate`, one function per rule. Whether a key's type can
//! be a key (or a priority) is the compiler's to say: the generated code asks for
//! `workflow_core::SearchValue` (`PriorityValue`), spanned on the path.

use std::time::Duration;

use super::super::ast::{StepAst, WorkflowAst};
use super::super::ctxt::{did_you_mean, Ctxt};
use super::super::flow::{KeyAst, LimitAst, PathAst, PriorityAst, MAX_LIMIT};
use super::super::{Name, Names, RESERVED};
use super::keys::{expect_input, inputs_hint, NotAnInput};

/// Every `limit` and `burst` is from 1 to [`MAX_LIMIT`]; `window` and `per` are more than
/// zero; `max_wait` is at least `window`.
pub fn limit_values(cx: &Ctxt, ast: &WorkflowAst) {
    let blocks =
        ast.flow
            .concurrency
            .iter()
            .chain(&ast.flow.debounce)
            .chain(ast.steps.iter().flat_map(|step| {
                let limit = step.fields.limit.as_ref().map(|(_, limit)| limit);
                limit
                    .into_iter()
                    .chain(step.fields.rate.as_ref().map(|(_, rate)| rate))
            }));
    for block in blocks {
        let kind = block.name.to_string();
        for (field, value) in [("limit", block.limit), ("burst", block.burst)] {
            let Some((n, span)) = value else { continue };
            if n == 0 {
                let help = match (kind.as_str(), field) {
                    ("rate", "burst") => "a bucket holds at least one token; `burst: 1` (the default) lets attempts start one at a time at the refill rate".to_owned(),
                    ("rate", _) => "allow at least one attempt per period, e.g. `limit: 100, per: 1m`; to stop calls altogether, pause the workflow".to_owned(),
                    _ => "allow at least one in flight, e.g. `limit: 1`; to stop them altogether, pause the workflow".to_owned(),
                };
                cx.error(
                    span,
                    format!(
                        "`{field}: 0` in `{kind}` would never let anything start\nhelp: {help}"
                    ),
                );
            } else if n > MAX_LIMIT {
                cx.error(
                    span,
                    format!("`{field}` in `{kind}` is at most {MAX_LIMIT}\nhelp: a bigger limit limits nothing; remove `{kind}` to run without one"),
                );
            }
        }
        for (field, value) in [("window", block.window), ("per", block.per)] {
            let Some(value) = value else { continue };
            if value.value == Duration::ZERO {
                cx.error(
                    value.span,
                    format!("`{field}` in `{kind}` must be more than zero\nhelp: write e.g. `{field}: {}`", if field == "per" { "1m" } else { "5s" }),
                );
            }
        }
        if let (Some(window), Some(max_wait)) = (block.window, block.max_wait) {
            if max_wait.value < window.value {
                cx.error(
                    max_wait.span,
                    format!(
                        "`max_wait` ({}) is shorter than `window` ({}), so a burst would start before it is quiet\nhelp: make `max_wait` at least the `window`, or remove it to wait for a quiet `window` however long the burst",
                        crate::model::format_duration(max_wait.value),
                        crate::model::format_duration(window.value)
                    ),
                );
            }
        }
    }
}

/// The keys (and `priority`) of a workflow read its inputs only: they are read when the
/// run starts, before any step ran.
pub fn workflow_key_reads(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    let keys = [&ast.flow.concurrency, &ast.flow.debounce]
        .into_iter()
        .flatten()
        .filter_map(|block| match &block.key {
            Some(KeyAst::Path(path)) => Some((block.name.to_string(), path)),
            _ => None,
        });
    let priority = match &ast.flow.priority {
        Some((_, PriorityAst::Path(path))) => Some(("priority".to_owned(), path)),
        _ => None,
    };
    for (kind, path) in keys.chain(priority) {
        expect_input(cx, names, &path.root, |root| {
            NotAnInput {
                step: format!(
                    "`{root}` is a step, but the workflow's `{kind}` is read when the run starts, before any step ran\nhelp: read an input{}; a step's own `concurrency` or `rate` may read upstream outputs",
                    inputs_hint(names)
                ),
                reserved: format!(
                    "`{root}` is reserved and cannot be read by `{kind}`\nhelp: read an input{}",
                    inputs_hint(names)
                ),
                reader: format!("`{kind}`"),
            }
        });
    }
}

/// A step's `concurrency: { .. }` and `rate` are on action steps (and maps) only, and
/// their keys read inputs and upstream steps.
pub fn step_limits(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let blocks = [&step.fields.limit, &step.fields.rate];
        for (key, block) in blocks.into_iter().flatten() {
            if step.fields.workflow.is_some() {
                cx.error(
                    key.span(),
                    format!(
                        "step `{}` runs a child workflow, which takes no `{key}`\nhelp: limit the child's runs with `concurrency` in the child workflow, or put `{key}` on the child's steps",
                        step.id
                    ),
                );
                continue;
            }
            if let Some(KeyAst::Path(path)) = &block.key {
                step_key_reads(cx, names, step, index, block, path);
            }
        }
    }
}

fn step_key_reads(
    cx: &Ctxt,
    names: &Names,
    step: &StepAst,
    index: usize,
    block: &LimitAst,
    path: &PathAst,
) {
    let id = &step.id;
    let kind = block.name.to_string();
    let root = path.root.to_string();
    match names.lookup(&root) {
        Some(Name::Input(_)) => {}
        Some(Name::Step(other)) if other == index => cx.error(
            path.root.span(),
            format!("the `{kind}` key of `{id}` reads `{root}`, its own output, which does not exist before the attempt starts\nhelp: read inputs and upstream outputs"),
        ),
        Some(Name::Step(other)) => {
            if !names.upstream(index)[other] {
                cx.error(
                    path.root.span(),
                    format!("the `{kind}` key of `{id}` reads `{root}`, but step `{root}` is not upstream of `{id}`, so it may not have run when `{id}` starts\nhelp: add `depends_on: [{root}]` to `{id}`, or read an input"),
                );
            }
        }
        Some(Name::Env | Name::Ctx | Name::Item) => cx.error(
            path.root.span(),
            format!("the `{kind}` key of `{id}` cannot read `{root}`: a key is read from journaled values only\nhelp: read inputs and upstream outputs; a string literal (`key: \"psp\"`) is one key for every run"),
        ),
        None => {
            let candidates = names
                .inputs
                .iter()
                .chain(&names.steps)
                .map(String::as_str)
                .filter(|name| !RESERVED.contains(name));
            let help = did_you_mean(&root, candidates).unwrap_or_else(|| {
                format!("a step's key reads inputs{} and upstream steps", inputs_hint(names))
            });
            cx.error(
                path.root.span(),
                format!("unknown name `{root}` in the `{kind}` key of `{id}`\nhelp: {help}"),
            );
        }
    }
}

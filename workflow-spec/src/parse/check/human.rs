//! The rules of a human step's quorum and presentation keys: `approvals`,
//! `self_approval`, `title` and `show`.

use proc_macro2::Span;

use super::super::ast::{OnTimeoutAst, StepAst, WorkflowAst};
use super::super::ctxt::{did_you_mean, Ctxt};
use super::super::human::MAX_APPROVALS;
use super::super::{Name, Names};
use crate::title::{self, Piece, TitleError};

/// `approvals` is between 1 and [`MAX_APPROVALS`], and a quorum is not approved by a
/// timeout: with more than one approval, `on_timeout: approve` would approve on nobody's
/// word what several people must approve, so it is refused (`reject`, `abort` and
/// `escalate` stay allowed).
pub fn approvals(cx: &Ctxt, ast: &WorkflowAst) {
    for step in &ast.steps {
        let Some((_, (n, span))) = step.fields.approvals else {
            continue;
        };
        let id = &step.id;
        if n == 0 {
            cx.error(
                span,
                format!("`approvals: 0` would let `{id}` pass with nobody's approval\nhelp: ask for at least one approval (`approvals: 1`, the default), or remove the human step"),
            );
        } else if n > MAX_APPROVALS {
            cx.error(
                span,
                format!("`approvals: {n}` is more approvers than `{id}` can gather\nhelp: ask for at most {MAX_APPROVALS}"),
            );
        }
        if let Some((key, OnTimeoutAst::Approve)) = &step.fields.on_timeout {
            if n > 1 {
                cx.error(
                    key.span(),
                    format!("`on_timeout: approve` would approve `{id}` when nobody decides, without the {n} approvals it asks for\nhelp: use `on_timeout: reject`, `abort` or `escalate(\"group\")`, or `approvals: 1`"),
                );
            }
        }
    }
}

/// Every `{placeholder}` of a `title` is well formed and names a workflow input or an
/// upstream step (its fields are checked by rustc, in the generated code).
pub fn titles(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let Some((_, lit)) = &step.fields.title else {
            continue;
        };
        let text = lit.value();
        let pieces = match title::parse(&text) {
            Ok(pieces) => pieces,
            Err(error) => {
                let help = match error {
                    TitleError::Unclosed { .. } => "close it with `}`, or write `{{` for a brace",
                    TitleError::Unopened { .. } => "write `}}` for a brace",
                    TitleError::BadPlaceholder { .. } => {
                        "a placeholder is an input or an upstream step and its fields, e.g. `{refund.amount_cents}`"
                    }
                };
                cx.error(
                    lit.span(),
                    format!(
                        "the `title` of `{}` does not parse: {error}\nhelp: {help}",
                        step.id
                    ),
                );
                continue;
            }
        };
        for piece in pieces {
            let Piece::Value(path) = piece else { continue };
            let shown = path.join(".");
            reads(
                cx,
                names,
                step,
                index,
                &path[0],
                lit.span(),
                "title",
                &shown,
            );
        }
    }
}

/// Every value `show` lists names a workflow input or an upstream step, once.
pub fn shows(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    for (index, step) in ast.steps.iter().enumerate() {
        let Some((_, shown)) = &step.fields.show else {
            continue;
        };
        let mut seen = Vec::new();
        for value in shown {
            let path = value.path();
            if seen.contains(&path) {
                cx.error(
                    value.root.span(),
                    format!(
                        "`show` of `{}` lists `{path}` twice\nhelp: remove one of the two",
                        step.id
                    ),
                );
                continue;
            }
            seen.push(path.clone());
            let root = value.root.to_string();
            reads(
                cx,
                names,
                step,
                index,
                &root,
                value.root.span(),
                "show",
                &path,
            );
        }
    }
}

/// Checks that `name`, read by `key` of `step` (at `span`), is an input or a step upstream
/// of it.
#[allow(clippy::too_many_arguments)]
fn reads(
    cx: &Ctxt,
    names: &Names,
    step: &StepAst,
    index: usize,
    name: &str,
    span: Span,
    key: &str,
    path: &str,
) {
    let id = &step.id;
    match names.lookup(name) {
        Some(Name::Input(_)) => {}
        Some(Name::Step(other)) if other == index => cx.error(
            span,
            format!("`{key}` of `{id}` reads `{path}`, its own decision, which is not made when the task is shown\nhelp: show workflow inputs and upstream outputs"),
        ),
        Some(Name::Step(other)) => {
            if !names.upstream(index)[other] {
                cx.error(
                    span,
                    format!("`{key}` of `{id}` reads `{path}`, but step `{name}` is not upstream of `{id}`, so it may not have run when the task is shown\nhelp: add `depends_on: [{name}]` to `{id}`"),
                );
            }
        }
        Some(Name::Env | Name::Ctx | Name::Item) => cx.error(
            span,
            format!("`{key}` of `{id}` cannot read `{name}`: it shows journaled values only\nhelp: show workflow inputs and upstream outputs"),
        ),
        None => {
            let help = did_you_mean(name, names.steps.iter().chain(&names.inputs).map(String::as_str))
                .unwrap_or_else(|| {
                    format!(
                        "`{key}` reads workflow inputs and upstream steps: {}",
                        names
                            .inputs
                            .iter()
                            .chain(&names.steps)
                            .map(|n| format!("`{n}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                });
            cx.error(
                span,
                format!("`{key}` of `{id}` reads `{path}`, but there is no input or step `{name}`\nhelp: {help}"),
            );
        }
    }
}

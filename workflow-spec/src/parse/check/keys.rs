//! Checks of `search: [..]` and `retention: 30d`, one function per rule. Whether a value's
//! type can be searched is the compiler's to say: the generated code asks for
//! `workflow_core::SearchValue`, spanned on the entry.

use std::collections::HashMap;
use std::time::Duration;

use super::super::ast::WorkflowAst;
use proc_macro2::Ident;

use super::super::ctxt::{did_you_mean, Ctxt};
use super::super::{Name, Names, RESERVED};

/// The shortest `retention` a spec may declare.
pub const MIN_RETENTION: Duration = Duration::from_secs(60);

/// `search` lists at least one entry.
pub fn search_not_empty(cx: &Ctxt, ast: &WorkflowAst) {
    let Some(search) = &ast.search else {
        return;
    };
    if !search.written {
        cx.error(
            search.brackets,
            "`search` lists no entries\nhelp: name the inputs or fields a run is found by, e.g. `search: [order.customer_id, order.id]`, or remove the key",
        );
    }
}

/// Each entry starts at a workflow input: not a step (its output is not known when the
/// run starts), not `env` or `ctx`, not an unknown name.
pub fn search_reads_inputs(cx: &Ctxt, ast: &WorkflowAst, names: &Names) {
    let Some(search) = &ast.search else {
        return;
    };
    for entry in &search.entries {
        expect_input(cx, names, &entry.root, |root| {
            NotAnInput {
                step: format!(
                    "`{root}` is a step, but `search` reads the workflow's inputs\nhelp: search values are stored when the run starts, before any step ran; use an input{}",
                    inputs_hint(names)
                ),
                reserved: format!(
                    "`{root}` is reserved and cannot be searched\nhelp: `search` reads the workflow's inputs{}",
                    inputs_hint(names)
                ),
                reader: "`search`".to_owned(),
            }
        });
    }
}

/// What a check says when the first name of a path that must read a workflow input is
/// not one.
pub(super) struct NotAnInput {
    /// The message for a step.
    pub step: String,
    /// The message for `env` or `ctx`.
    pub reserved: String,
    /// What reads the input, for "unknown input `x` in …" and its help.
    pub reader: String,
}

/// Reports `root` at its token unless it names one of the workflow's inputs; `say` gives
/// the messages, for the name as written.
pub(super) fn expect_input(
    cx: &Ctxt,
    names: &Names,
    root: &Ident,
    say: impl FnOnce(&str) -> NotAnInput,
) {
    let name = root.to_string();
    let said = match names.lookup(&name) {
        Some(Name::Input(_)) => return,
        Some(kind) => (kind, say(&name)),
        None => (Name::Item, say(&name)),
    };
    match said {
        (Name::Step(_), say) => cx.error(root.span(), say.step),
        (Name::Env | Name::Ctx, say) => cx.error(root.span(), say.reserved),
        (_, say) => {
            let help =
                did_you_mean(&name, names.inputs.iter().map(String::as_str)).unwrap_or_else(|| {
                    format!(
                        "{} reads the workflow's inputs{}",
                        say.reader,
                        inputs_hint(names)
                    )
                });
            cx.error(
                root.span(),
                format!("unknown input `{name}` in {}\nhelp: {help}", say.reader),
            );
        }
    }
}

/// `: `a`, `b``, or a note that there are none.
pub(super) fn inputs_hint(names: &Names) -> String {
    let inputs: Vec<String> = names
        .inputs
        .iter()
        .filter(|name| !RESERVED.contains(&name.as_str()))
        .map(|name| format!("`{name}`"))
        .collect();
    if inputs.is_empty() {
        " (this workflow has none)".to_owned()
    } else {
        format!(": {}", inputs.join(", "))
    }
}

/// No entry twice, and no two entries under one name (their last field): a value is
/// found by its name.
pub fn search_names_unique(cx: &Ctxt, ast: &WorkflowAst) {
    let Some(search) = &ast.search else {
        return;
    };
    let mut seen: HashMap<String, String> = HashMap::new();
    for entry in &search.entries {
        let name = entry.name().to_string();
        let path = entry.path();
        match seen.get(&name) {
            Some(first) if *first == path => cx.error_spanned(
                &entry.tokens,
                format!("`{path}` is listed twice in `search`\nhelp: remove the second one"),
            ),
            Some(first) => cx.error(
                entry.name().span(),
                format!(
                    "`{path}` and `{first}` would both be searched as `{name}`\nhelp: a search value is named by its last field; search one of them, or an input or field with another name"
                ),
            ),
            None => {
                seen.insert(name, path);
            }
        }
    }
}

/// `retention` is at least [`MIN_RETENTION`].
pub fn retention_bounds(cx: &Ctxt, ast: &WorkflowAst) {
    let Some(retention) = ast.retention else {
        return;
    };
    if retention.value.value < MIN_RETENTION {
        cx.error(
            retention.value.span,
            "`retention` must be at least `1m`\nhelp: finished runs are purged once they are older than this; write e.g. `retention: 30d`",
        );
    }
}

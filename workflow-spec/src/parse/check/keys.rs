//! Checks of `search: [..]` and `retention: 30d`, one function per rule. Whether a value's
//! type can be searched is the compiler's to say: the generated code asks for
//! `workflow_core::SearchValue`, spanned on the entry.

use std::collections::HashMap;
use std::time::Duration;

use super::super::ast::WorkflowAst;
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
        let root = entry.root.to_string();
        match names.lookup(&root) {
            Some(Name::Input(_)) => {}
            Some(Name::Step(_)) => cx.error(
                entry.root.span(),
                format!(
                    "`{root}` is a step, but `search` reads the workflow's inputs\nhelp: search values are stored when the run starts, before any step ran; use an input{}",
                    inputs_hint(names)
                ),
            ),
            Some(Name::Env | Name::Ctx) => cx.error(
                entry.root.span(),
                format!(
                    "`{root}` is reserved and cannot be searched\nhelp: `search` reads the workflow's inputs{}",
                    inputs_hint(names)
                ),
            ),
            Some(Name::Item) | None => {
                let help = did_you_mean(&root, names.inputs.iter().map(String::as_str))
                    .unwrap_or_else(|| format!("`search` reads the workflow's inputs{}", inputs_hint(names)));
                cx.error(
                    entry.root.span(),
                    format!("unknown input `{root}` in `search`\nhelp: {help}"),
                );
            }
        }
    }
}

/// `: `a`, `b``, or a note that there are none.
fn inputs_hint(names: &Names) -> String {
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

//! Specs in files: seed 003's YAML, lowered onto the one spec model and its one set of
//! checks.
//!
//! A file is read into a position-keeping tree (`tree.rs`), lowered to the text of the
//! equivalent `workflow!` body with a map from every piece of that text back to the file
//! (`lower.rs`), and that text goes through the same [`parse`](crate::parse::parse) as an
//! inline spec: the same checks, the same model, the same fingerprint. Only the error
//! reporter knows where a node came from: an error's span, a line and column in the
//! lowered text, is mapped back to the file's line and column ([`FileError`](crate::yaml::FileError)).
//!
//! [`export`](crate::yaml::export) goes the other way, from a checked [`Spec`] to a file, and [`schema`](crate::yaml::schema()) is the
//! JSON Schema of the format for editors.

mod diag;
mod emit;
mod lower;
mod schema;
mod tree;

pub use diag::{FileError, Pos};
pub use emit::{export, ExportError};
pub use lower::{type_name, CallSite, Options, REQUEST_APPROVAL, STEP_KEYS, TOP_KEYS};
pub use schema::schema;

use crate::model::Spec;

/// What checking a spec file found.
#[derive(Debug, Clone, Default)]
pub struct Checked {
    /// The `workflow!` body the file lowers to, when the file is a readable mapping
    /// (also when it has errors, so the macro can still emit the workflow's types).
    pub text: Option<String>,
    /// The checked model; `Some` exactly when `errors` is empty.
    pub spec: Option<Spec>,
    /// Every error, in file order.
    pub errors: Vec<FileError>,
    /// Where each step's calls are written, for the checks only the compiler can make.
    pub calls: Vec<CallSite>,
}

/// Checks a spec file's text: its YAML, its shape, then every check of the spec language.
/// Never panics, whatever the text.
pub fn check(source: &str, options: &Options) -> Checked {
    // The lowered text is parsed with proc-macro2's own lexer even inside a proc macro,
    // so that every token's span has a line and column to map back to the file. No token
    // made here leaves this function: the result is plain data.
    let _fallback = Fallback::force();
    let root = match tree::parse(source) {
        Ok(root) => root,
        Err(error) => {
            return Checked {
                errors: vec![error],
                ..Checked::default()
            }
        }
    };
    let readable = matches!(root, tree::Node::Map(_));
    let lowering = lower::lower(&root, options);
    if !readable {
        return Checked {
            errors: lowering.errors,
            ..Checked::default()
        };
    }
    let parsed = crate::parse::parse_str(&lowering.text);
    let starts = line_starts(&lowering.text);
    let mut errors = lowering.errors.clone();
    for error in &parsed.errors {
        for single in error.clone() {
            let start = single.span().start();
            let offset = starts
                .get(start.line.saturating_sub(1))
                .map_or(0, |line| line + start.column);
            let message = single.to_string();
            if lowering.no_steps && message.contains("has no steps") {
                // Already said, in the file's terms, by the front end.
                continue;
            }
            let mut error = FileError::from_check(lowering.locate(offset), &message);
            error.help = match undeclared(&error) {
                Some(name) => Some(declare_input(&root, name)),
                None => error.help.map(|help| in_file_terms(&help)),
            };
            errors.push(error);
        }
    }
    errors.sort_by_key(|error| error.pos);
    errors.dedup();
    let spec = if errors.is_empty() { parsed.spec } else { None };
    Checked {
        text: Some(lowering.text),
        spec,
        errors,
        calls: lowering.calls,
    }
}

/// A check's help, which speaks the inline syntax, said in the file's keys where the two
/// differ. Only the wording changes: the checks themselves know no syntax.
fn in_file_terms(help: &str) -> String {
    if help.contains("step first -> ()") {
        return "add `steps:` with a list of steps, each `- id: name`".into();
    }
    if help.starts_with("add `action: module::function(args),`") {
        return "add `action: function_name` with its arguments under `inputs:`, or `workflow:` to run a child workflow".into();
    }
    if help.contains(" -> Approval { ... }` for a checkpoint") {
        return "add `kind: human` (or `action: request_approval`) for a checkpoint".into();
    }
    // `timeout: 48h,` -> `timeout: 48h`: a file's values end at the line's end.
    let help = help.replace(",`", "`");
    // `escalate("group")` -> `escalate` with `escalate_to: group`.
    match help.split_once("escalate(\"") {
        Some((before, rest)) => match rest.split_once("\")`") {
            Some((group, after)) => {
                format!("{before}escalate` with `escalate_to: {group}`{after}")
            }
            None => help.clone(),
        },
        None => help,
    }
}

/// The name an action's argument reads that is neither a step, an input nor `env` or
/// `ctx`, when the checks found nothing near it to suggest: in a file, most often an input
/// the seed's format leaves untyped.
fn undeclared(error: &FileError) -> Option<&str> {
    let rest = error.message.strip_prefix("unknown step or input `")?;
    let (name, place) = rest.split_once('`')?;
    let near = error
        .help
        .as_deref()
        .is_some_and(|help| help.starts_with("did you mean"));
    (place.starts_with(" in argument of `") && !near).then_some(name)
}

/// How to declare input `name`: the `inputs:` mapping to write at the top of the file,
/// with the inputs it already declares.
fn declare_input(root: &tree::Node, name: &str) -> String {
    let declared: Vec<(String, String)> = match root {
        tree::Node::Map(top) => match top.get("inputs") {
            Some(tree::Node::Map(inputs)) => inputs
                .entries
                .iter()
                .filter_map(|(key, ty)| match ty {
                    tree::Node::Scalar(ty) => Some((key.text.clone(), ty.text.clone())),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    let mut help = format!(
        "`{name}` is read but not declared: declare it under `inputs:` at the top of the file with its Rust type, e.g."
    );
    help.push_str("\n    inputs:");
    for (input, ty) in &declared {
        help.push_str(&format!("\n      {input}: {ty}"));
    }
    help.push_str(&format!("\n      {name}: String"));
    help
}

/// The character offset where each line of `text` starts.
fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    let mut offset = 0;
    for c in text.chars() {
        offset += 1;
        if c == '\n' {
            starts.push(offset);
        }
    }
    starts
}

/// Keeps proc-macro2 on its own implementation while it lives.
struct Fallback;

impl Fallback {
    fn force() -> Self {
        proc_macro2::fallback::force();
        Fallback
    }
}

impl Drop for Fallback {
    fn drop(&mut self) {
        proc_macro2::fallback::unforce();
    }
}

#[cfg(test)]
mod tests {
    use super::in_file_terms;

    #[test]
    fn helps_speak_the_files_keys() {
        assert_eq!(
            in_file_terms("add `on_timeout: escalate(\"leads\"),` (or `abort`)"),
            "add `on_timeout: escalate` with `escalate_to: leads` (or `abort`)"
        );
        assert_eq!(
            in_file_terms("add `timeout: 48h,` and"),
            "add `timeout: 48h` and"
        );
        assert_eq!(
            in_file_terms("write `human r -> Approval { ... }` for a checkpoint"),
            "add `kind: human` (or `action: request_approval`) for a checkpoint"
        );
    }
}

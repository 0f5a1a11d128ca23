//! Values copied from the file into the lowered text: made safe first (they lex as Rust
//! tokens, their groups balance, they have no top-level comma), then written with their
//! file positions.

#[allow(unused_imports)]
use proc_macro2::Literal;

use super::*;

pub(super) fn is_ident(text: &str) -> bool {
    syn::parse_str::<syn::Ident>(text).is_ok()
}

/// How deep brackets may nest in one value. syn parses recursively, so a value is
/// measured before it is parsed; the checks bound whole specs the same way.
pub(super) const MAX_VALUE_NESTING: usize = 64;

/// `text` parsed as a `T`, when it parses and does not nest too deep.
pub(super) fn parse_value<T: syn::parse::Parse>(text: &str) -> Option<T> {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for c in text.chars() {
        match c {
            '(' | '[' | '{' | '<' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' | '>' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    if deepest > MAX_VALUE_NESTING {
        return None;
    }
    syn::parse_str::<T>(text).ok()
}

/// Whether `text` can be copied into a field's value: it lexes, and it has no top-level
/// comma or semicolon (groups are balanced by the lexer).
pub(super) fn safe(text: &str) -> bool {
    match text.parse::<TokenStream>() {
        Ok(tokens) => !tokens.into_iter().any(
            |tt| matches!(&tt, TokenTree::Punct(p) if p.as_char() == ',' || p.as_char() == ';'),
        ),
        Err(_) => false,
    }
}

/// Whether a plain scalar reads as a Rust literal of its own (a number or a boolean).
pub(super) fn rust_literal(text: &str) -> bool {
    text == "true"
        || text == "false"
        || parse_value::<syn::Lit>(text.strip_prefix('-').unwrap_or(text))
            .is_some_and(|lit| matches!(lit, syn::Lit::Int(_) | syn::Lit::Float(_)))
}

/// The keys whose values are numbers, at the top of a file, in a step, or in a block under
/// one of them (`retry`, `concurrency`, `rate`): the integers and numbers of the schema.
pub(super) const NUMBER_KEYS: &[&str] = &[
    "max_attempts",
    "multiplier",
    "approvals",
    "concurrency",
    "limit",
    "burst",
    "priority",
];

/// The keys whose values are literals of the action or the child workflow, where a quoted
/// number is text on purpose (`with: { code: "042" }`).
const LITERAL_KEYS: &[&str] = &["with", "workflow", "compensate", "reconcile"];

/// Refuses a number written in quotes under a key that takes a number
/// (`max_attempts: "3"`): YAML reads it as text, and the schema editors check against says
/// number. Looks into blocks (`retry: { .. }`), not into literal arguments.
pub(super) fn quoted_numbers(out: &mut Lowering, key: &Scalar, value: &Node) {
    if LITERAL_KEYS.contains(&key.text.as_str()) {
        return;
    }
    match value {
        Node::Scalar(scalar)
            if scalar.quoted
                && NUMBER_KEYS.contains(&key.text.as_str())
                && rust_literal(scalar.text.trim())
                && !matches!(scalar.text.trim(), "true" | "false") =>
        {
            out.error(
                scalar.pos,
                format!(
                    "`{}` takes a number, found the text \"{}\"",
                    key.text, scalar.text
                ),
                Some(format!(
                    "remove the quotes: `{}: {}`",
                    key.text,
                    scalar.text.trim()
                )),
            );
        }
        Node::Map(map) => {
            for (key, value) in &map.entries {
                quoted_numbers(out, key, value);
            }
        }
        _ => {}
    }
}

/// Whether `value` can be copied as tokens: a scalar, a list of scalars, or a mapping of
/// names to such values, each scalar one value (see [`safe`]). Reports why not.
pub(super) fn copyable(out: &mut Lowering, value: &Node) -> bool {
    match value {
        Node::Scalar(scalar) => copyable_scalar(out, scalar),
        Node::Seq(seq) => seq.items.iter().fold(true, |ok, item| match item {
            Node::Scalar(scalar) => copyable_scalar(out, scalar) && ok,
            other => {
                out.error(
                    other.pos(),
                    format!(
                        "expected a single value in this list, found {}",
                        other.what()
                    ),
                    None::<String>,
                );
                false
            }
        }),
        Node::Map(map) => map.entries.iter().fold(true, |ok, (key, value)| {
            if is_ident(&key.text) {
                copyable(out, value) && ok
            } else {
                out.error(
                    key.pos,
                    format!("`{}` is not a key", key.text),
                    None::<String>,
                );
                false
            }
        }),
    }
}

pub(super) fn copyable_scalar(out: &mut Lowering, scalar: &Scalar) -> bool {
    if scalar.text.trim().is_empty() {
        out.error(
            scalar.pos,
            "expected a value here, found nothing",
            None::<String>,
        );
        false
    } else if !safe(&scalar.text) {
        out.error(
            scalar.pos,
            format!("`{}` is not a value a spec takes here", scalar.text),
            Some("a value is one name, number, duration or expression, without `,` or `;` outside brackets"),
        );
        false
    } else {
        true
    }
}

/// A value [`copyable`] passed, as tokens: a scalar, a list `[a, b]` of them, or a
/// mapping `{ key: value, .. }`.
pub(super) fn raw_or_list(out: &mut Lowering, value: &Node) {
    match value {
        Node::Scalar(scalar) => raw(out, scalar),
        Node::Seq(seq) => {
            out.at(seq.pos, "[");
            for item in &seq.items {
                if let Node::Scalar(scalar) = item {
                    raw(out, scalar);
                    out.push(", ");
                }
            }
            out.push("]");
        }
        Node::Map(map) => {
            out.at(map.pos, "{ ");
            for (key, value) in &map.entries {
                out.scalar(key);
                out.push(": ");
                match value {
                    // A limit's `key: "psp"` (quoted) is a static key; unquoted, a path.
                    Node::Scalar(text) if key.text == "key" && text.quoted => {
                        out.at(text.pos, &Literal::string(&text.text).to_string());
                    }
                    _ => raw_or_list(out, value),
                }
                out.push("\n,\n");
            }
            out.push("}");
        }
    }
}

/// A scalar [`copyable`] already passed, copied as it is written.
pub(super) fn raw(out: &mut Lowering, scalar: &Scalar) {
    if safe(&scalar.text) {
        out.scalar(scalar);
    } else {
        out.at(scalar.pos, "()");
    }
}

pub(super) fn verbatim_of(scalar: &Scalar) -> (Pos, bool) {
    match scalar.verbatim {
        Some(col) => (
            Pos {
                line: scalar.pos.line,
                col,
            },
            true,
        ),
        None => (scalar.pos, false),
    }
}

/// `a`, `b` or `c`, for messages.
pub(crate) fn list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| format!("`{item}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}

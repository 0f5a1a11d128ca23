//! A human step's `title` and `show`: the text with `{placeholders}` and the values shown
//! before a task's raw context.
//!
//! A placeholder names a workflow input or an upstream step, then fields:
//! `{refund.amount_cents}`. `{{` and `}}` stand for literal braces. The macro checks every
//! placeholder at compile time (the name, that a step is upstream, and, through rustc, the
//! fields); [`render`] fills them in from a run's journaled values.

use serde_json::Value;

/// One piece of a title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// `{name.field...}`: a workflow input or a step output, then fields.
    Value(Vec<String>),
}

/// Why a title does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TitleError {
    /// A `{` without its `}`.
    #[error("`{{` at character {at} is not closed")]
    Unclosed {
        /// The character offset of the `{`.
        at: usize,
    },
    /// A `}` that closes nothing.
    #[error("`}}` at character {at} closes nothing")]
    Unopened {
        /// The character offset of the `}`.
        at: usize,
    },
    /// A placeholder that is not `name` or `name.field...` of identifiers.
    #[error("`{{{text}}}` is not a name and its fields")]
    BadPlaceholder {
        /// What was between the braces.
        text: String,
    },
}

/// Splits a title into text and placeholders.
pub fn parse(title: &str) -> Result<Vec<Piece>, TitleError> {
    let chars: Vec<char> = title.chars().collect();
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '{' if chars.get(i + 1) == Some(&'{') => {
                text.push('{');
                i += 2;
            }
            '}' if chars.get(i + 1) == Some(&'}') => {
                text.push('}');
                i += 2;
            }
            '}' => return Err(TitleError::Unopened { at: i }),
            '{' => {
                let close = chars[i + 1..]
                    .iter()
                    .position(|c| *c == '}')
                    .ok_or(TitleError::Unclosed { at: i })?;
                let inner: String = chars[i + 1..i + 1 + close].iter().collect();
                if inner.contains('{') {
                    return Err(TitleError::Unclosed { at: i });
                }
                let path = placeholder_path(&inner).ok_or_else(|| TitleError::BadPlaceholder {
                    text: inner.clone(),
                })?;
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Value(path));
                i += close + 2;
            }
            c => {
                text.push(c);
                i += 1;
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// `name.field.field` as its parts, each an identifier; `None` otherwise.
pub fn placeholder_path(text: &str) -> Option<Vec<String>> {
    let parts: Vec<String> = text.trim().split('.').map(str::to_owned).collect();
    parts.iter().all(|part| is_ident(part)).then_some(parts)
}

fn is_ident(text: &str) -> bool {
    let mut chars = text.chars();
    text != "_"
        && matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// The value at `path` (`["refund", "amount_cents"]`) among a run's values: `root` gives
/// the input or step output its first part names, fields are read from there on.
pub fn lookup<'a>(path: &[String], root: impl Fn(&str) -> Option<&'a Value>) -> Option<&'a Value> {
    let (first, fields) = path.split_first()?;
    fields
        .iter()
        .try_fold(root(first)?, |value, field| value.get(field.as_str()))
}

/// A value as a person reads it in a title: strings without quotes, `null` as `-`,
/// anything else as compact JSON.
pub fn display(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => "-".to_owned(),
        other => other.to_string(),
    }
}

/// The title with its placeholders filled in from `root` (see [`lookup`]); a value that
/// is absent (a skipped step, a field that is not there) reads `-`. A title that does not
/// parse (the macro refuses those) is returned as written.
pub fn render<'a>(title: &str, root: impl Fn(&str) -> Option<&'a Value>) -> String {
    let Ok(pieces) = parse(title) else {
        return title.to_owned();
    };
    pieces
        .iter()
        .map(|piece| match piece {
            Piece::Text(text) => text.clone(),
            Piece::Value(path) => lookup(path, &root).map_or_else(|| "-".to_owned(), display),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_and_escaped_braces() {
        assert_eq!(
            parse("Refund {refund.amount_cents} for {{vip}} {who}").unwrap(),
            vec![
                Piece::Text("Refund ".into()),
                Piece::Value(vec!["refund".into(), "amount_cents".into()]),
                Piece::Text(" for {vip} ".into()),
                Piece::Value(vec!["who".into()]),
            ]
        );
        assert_eq!(parse("a {b").unwrap_err(), TitleError::Unclosed { at: 2 });
        assert_eq!(
            parse("a {b {c}}").unwrap_err(),
            TitleError::Unclosed { at: 2 }
        );
        assert_eq!(parse("a } b").unwrap_err(), TitleError::Unopened { at: 2 });
        assert!(matches!(
            parse("{a..b}").unwrap_err(),
            TitleError::BadPlaceholder { .. }
        ));
        assert!(matches!(
            parse("{}").unwrap_err(),
            TitleError::BadPlaceholder { .. }
        ));
    }

    #[test]
    fn titles_fill_in_values_and_mark_absent_ones() {
        let refund = json!({ "amount_cents": 4200, "customer": "Ada" });
        let root = |name: &str| (name == "refund").then_some(&refund);
        assert_eq!(
            render("Refund {refund.amount_cents} for {refund.customer}", root),
            "Refund 4200 for Ada"
        );
        assert_eq!(render("{refund.missing} {nothing}", root), "- -");
        assert_eq!(render("broken {", root), "broken {");
    }
}

//! A bound on nesting, checked before syn sees the tokens: syn's parsers recurse once per
//! level of `&&&&T`, `Vec<Vec<…>>`, `((…))`, `!!!!x` or `|a| |b| …` and would overflow the
//! stack on absurd input. Real specs nest a handful of levels; the bound is far above that.

use proc_macro2::{Span, TokenStream, TokenTree};

/// Levels of nesting a spec may use.
pub(crate) const MAX_DEPTH: usize = 128;

/// The error for the first place the tokens nest deeper than [`MAX_DEPTH`], if any.
///
/// Depth is measured per group level as the longest run of prefix tokens (`&`, `*`, `!`,
/// `-`, `|`, `<`, `fn`, `return`, ...) not interrupted by an operand, plus the number of
/// open `<`, plus closure and `fn` heads since the last `,` or `;`, on top of the depth of
/// the enclosing groups. Walked with an explicit stack: no recursion here either.
pub(crate) fn too_deep(tokens: &TokenStream) -> Option<syn::Error> {
    struct Level {
        tokens: proc_macro2::token_stream::IntoIter,
        run: usize,
        angles: usize,
        heads: usize,
        operand_before: bool,
    }
    let level = |stream: TokenStream| Level {
        tokens: stream.into_iter(),
        run: 0,
        angles: 0,
        heads: 0,
        operand_before: false,
    };
    let mut stack = vec![level(tokens.clone())];
    while let Some(top) = stack.last_mut() {
        let Some(token) = top.tokens.next() else {
            stack.pop();
            continue;
        };
        let span = token.span();
        match token {
            TokenTree::Group(group) => {
                top.run = 0;
                top.operand_before = true;
                stack.push(level(group.stream()));
            }
            TokenTree::Literal(_) => {
                top.run = 0;
                top.operand_before = true;
            }
            TokenTree::Ident(ident) => {
                let word = ident.to_string();
                let prefix = matches!(
                    word.as_str(),
                    "fn" | "return" | "break" | "move" | "dyn" | "impl" | "mut" | "as" | "let"
                );
                if prefix {
                    top.run += 1;
                    top.heads += usize::from(word == "fn");
                    top.operand_before = false;
                } else {
                    top.run = 0;
                    top.operand_before = true;
                }
            }
            TokenTree::Punct(punct) => match punct.as_char() {
                ',' | ';' => {
                    top.run = 0;
                    top.angles = 0;
                    top.heads = 0;
                    top.operand_before = false;
                }
                '<' => {
                    top.angles += 1;
                    top.run += 1;
                    top.operand_before = false;
                }
                '>' => {
                    top.angles = top.angles.saturating_sub(1);
                    top.operand_before = true;
                }
                '|' => {
                    top.heads += 1;
                    top.run += 1;
                    top.operand_before = false;
                }
                '&' | '*' | '!' | '-' => {
                    if !top.operand_before || top.run > 0 {
                        top.run += 1;
                    }
                    top.operand_before = false;
                }
                _ => {
                    top.operand_before = false;
                }
            },
        }
        let depth = stack.len() - 1;
        if let Some(top) = stack.last() {
            if depth + top.run.max(top.angles).max(top.heads / 2) > MAX_DEPTH {
                return Some(error(span));
            }
        }
        if stack.len() > MAX_DEPTH {
            return Some(error(span));
        }
    }
    None
}

fn error(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        format!(
            "this spec nests more than {MAX_DEPTH} levels deep here, more than a workflow can \
             mean\nhelp: name the deeply nested type with a `type` alias, or move the logic \
             into the action"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deep(source: &str) -> bool {
        too_deep(&source.parse().unwrap()).is_some()
    }

    #[test]
    fn absurd_nesting_is_caught_and_real_specs_are_not() {
        assert!(deep(&format!("step a -> {}u8 {{}}", "&".repeat(300))));
        assert!(deep(&format!("{}x{}", "(".repeat(200), ")".repeat(200))));
        assert!(deep(&format!(
            "{}u8{}",
            "Vec<".repeat(200),
            ">".repeat(200)
        )));
        assert!(deep(&format!("condition: {}x", "|v| ".repeat(300))));
        assert!(deep(&format!("-> {}u8", "fn() -> ".repeat(300))));
        assert!(deep(&format!("condition: {}x", "!".repeat(300))));
        assert!(!deep(&format!(
            "condition: {}",
            vec!["a && b"; 300].join(" && ")
        )));
        assert!(!deep(
            "condition: order.total > 0 && score.map_or(false, |s| s.iter().any(|v| *v < 3)),"
        ));
        assert!(!deep(
            "step a -> Vec<HashMap<String, Option<(u32, &'static str)>>> {}"
        ));
    }
}

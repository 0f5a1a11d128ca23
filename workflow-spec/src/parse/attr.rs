//! The outer attribute of a workflow: `#[workflow(name = "UserOnboarding")]`.
//!
//! It sets the name runs are journaled under, so that an old and a new version of one
//! workflow (two Rust types) can be registered side by side.

use syn::parse::ParseStream;
use syn::{Attribute, Ident, LitStr, Token};

use super::ctxt::{did_you_mean, Ctxt};

/// The keys `#[workflow(...)]` takes.
pub const WORKFLOW_ATTR_KEYS: &[&str] = &["name"];

/// Takes the `#[workflow(...)]` attributes out of `attrs`, returning the journaled name
/// they set and the other attributes (kept for the generated type). Every mistake is
/// recorded in `cx` at its token: a malformed attribute, an unknown key, a value that is
/// not a string, an empty or ill-formed name, a second `name`.
pub fn workflow_attrs(cx: &Ctxt, attrs: Vec<Attribute>) -> (Option<LitStr>, Vec<Attribute>) {
    let mut name: Option<LitStr> = None;
    let mut rest = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("workflow") {
            rest.push(attr);
            continue;
        }
        let syn::Meta::List(list) = &attr.meta else {
            cx.error_spanned(
                &attr,
                "expected `#[workflow(name = \"...\")]`\nhelp: name the workflow runs are journaled under, e.g. `#[workflow(name = \"UserOnboarding\")]`",
            );
            continue;
        };
        let parser = |input: ParseStream<'_>| -> syn::Result<()> {
            while !input.is_empty() {
                let key: Ident = input.parse()?;
                if key != "name" {
                    let help = did_you_mean(&key.to_string(), WORKFLOW_ATTR_KEYS.iter().copied())
                        .unwrap_or_else(|| "`#[workflow(...)]` takes only `name = \"...\"`".into());
                    cx.error(
                        key.span(),
                        format!("unknown key `{key}` in `#[workflow(...)]`\nhelp: {help}"),
                    );
                    skip_to_comma(input);
                    continue;
                }
                input.parse::<Token![=]>()?;
                let value: syn::Expr = input.parse()?;
                match value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(lit),
                        ..
                    }) => {
                        if name.is_some() {
                            cx.error(
                                key.span(),
                                "the workflow's journaled name is set twice\nhelp: keep one `name = \"...\"`",
                            );
                        } else if let Some(problem) = name_problem(&lit.value()) {
                            cx.error(lit.span(), problem);
                        } else {
                            name = Some(lit);
                        }
                    }
                    other => cx.error_spanned(
                        &other,
                        "the journaled name must be a string literal\nhelp: write `name = \"UserOnboarding\"`",
                    ),
                }
                if input.is_empty() {
                    break;
                }
                input.parse::<Token![,]>()?;
            }
            Ok(())
        };
        if let Err(error) = syn::parse::Parser::parse2(parser, list.tokens.clone()) {
            cx.push(syn::Error::new(
                error.span(),
                format!("{error}\nhelp: write `#[workflow(name = \"UserOnboarding\")]`"),
            ));
        }
    }
    (name, rest)
}

fn skip_to_comma(input: ParseStream<'_>) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            rest = next;
            if matches!(&tt, proc_macro2::TokenTree::Punct(p) if p.as_char() == ',') {
                break;
            }
        }
        Ok(((), rest))
    });
}

/// Why `name` cannot be a journaled name, if it cannot: it is part of idempotency keys
/// (`workflow/run/step`) and store rows, so it is non-empty, short, and made of letters,
/// digits, `_`, `-`, `.` and `:`.
pub fn name_problem(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some(
            "the journaled name must not be empty\nhelp: write the name runs are journaled under, e.g. `name = \"UserOnboarding\"`"
                .to_owned(),
        );
    }
    if name.chars().count() > 128 {
        return Some("the journaled name is longer than 128 characters".to_owned());
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
    {
        let shown = bad.escape_default();
        return Some(format!(
            "the journaled name `{name}` contains `{shown}`\nhelp: use letters, digits, `_`, `-`, `.` and `:`; the name is part of every idempotency key (`workflow/run/step`)"
        ));
    }
    None
}

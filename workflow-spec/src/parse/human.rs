//! The values of a human step's quorum and presentation keys: `approvals`,
//! `self_approval`, `title` and `show`.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Ident, LitStr, Token};

use super::ast::ShownAst;
use super::ctxt::Ctxt;
use super::values::first_span;

/// The most approvals a step may ask for.
pub const MAX_APPROVALS: u32 = 100;

/// `approvals: 2`: a whole number of distinct approvers (its range is checked with the
/// other rules of the step, so that `0` gets its own message).
pub(super) fn parse_approvals(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<(u32, Span)> {
    let span = first_span(&value);
    match syn::parse2::<syn::LitInt>(value) {
        Ok(int) if int.suffix().is_empty() => match int.base10_parse::<u32>() {
            Ok(n) => Some((n, int.span())),
            Err(_) => {
                cx.error(
                    int.span(),
                    format!(
                        "`{key}` must be a whole number of approvers from 1 to {MAX_APPROVALS}"
                    ),
                );
                None
            }
        },
        _ => {
            cx.error(
                span,
                format!("`{key}` expects how many distinct people must approve, e.g. `{key}: 2`"),
            );
            None
        }
    }
}

/// `self_approval: false`.
pub(super) fn parse_self_approval(
    cx: &Ctxt,
    key: &Ident,
    value: TokenStream,
) -> Option<(bool, Span)> {
    match syn::parse2::<syn::LitBool>(value.clone()) {
        Ok(lit) => Some((lit.value, lit.span)),
        Err(_) => {
            cx.error(
                first_span(&value),
                format!("expected `true` or `false` for `{key}`\nhelp: `{key}: false` keeps whoever started the run from deciding it"),
            );
            None
        }
    }
}

/// `title: "Refund {refund.amount_cents}"`: a non-empty string literal (its placeholders
/// are checked with the other rules of the step).
pub(super) fn parse_title(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<LitStr> {
    match syn::parse2::<LitStr>(value.clone()) {
        Ok(lit) if lit.value().trim().is_empty() => {
            cx.error(lit.span(), format!("`{key}` must not be empty\nhelp: write what the task is about, e.g. `{key}: \"Refund {{refund.amount_cents}} for {{refund.customer}}\"`"));
            None
        }
        Ok(lit) => Some(lit),
        Err(_) => {
            cx.error(
                first_span(&value),
                format!("expected a string literal for `{key}`, e.g. `{key}: \"Refund {{refund.amount_cents}}\"`"),
            );
            None
        }
    }
}

/// `show: [refund.amount_cents, assess.note]`: names of inputs or steps, each with fields.
pub(super) fn parse_show(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<Vec<ShownAst>> {
    let shown = |input: ParseStream<'_>| -> syn::Result<ShownAst> {
        let root = Ident::parse_any(input)?;
        let mut fields = Vec::new();
        while input.peek(Token![.]) {
            input.parse::<Token![.]>()?;
            fields.push(Ident::parse_any(input)?);
        }
        Ok(ShownAst { root, fields })
    };
    let parser = |input: ParseStream<'_>| {
        let content;
        syn::bracketed!(content in input);
        content.parse_terminated(shown, Token![,])
    };
    match parser.parse2(value) {
        Ok(list) if list.is_empty() => {
            cx.error(
                key.span(),
                format!("`{key}` lists no values\nhelp: name inputs or upstream steps and their fields, e.g. `{key}: [refund.amount_cents]`, or remove it"),
            );
            None
        }
        Ok(list) => Some(list.into_iter().collect()),
        Err(error) => {
            cx.error(
                error.span(),
                format!("`{key}` expects a list of inputs or upstream steps and their fields in brackets\nhelp: write `{key}: [refund.amount_cents, assess.note]`"),
            );
            None
        }
    }
}

//! Parsers of the values that name things: calls and their arguments, lists of ids, a
//! map's `for_each`, and a child workflow's `workflow: Child(field: arg, ...)`.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Token};

use super::ast::{ArgAst, CallAst, ChildAst, ChildFieldAst, ForEachAst};
use super::ctxt::Ctxt;
use super::values::first_span;

/// `path(args)`: a call of a user function whose arguments are names or literals.
pub(super) fn parse_call(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<CallAst> {
    let expr = match syn::parse2::<Expr>(value) {
        Ok(expr) => expr,
        Err(error) => {
            cx.push(error);
            return None;
        }
    };
    let Expr::Call(call) = expr else {
        let help = match &expr {
            Expr::Path(path) => format!(
                "call it with its arguments: `{key}: {}(...)`",
                path.to_token_stream().to_string().replace(' ', "")
            ),
            _ => format!("write `{key}: module::function(args)`"),
        };
        cx.error_spanned(
            &expr,
            format!("`{key}` expects a function call, e.g. `accounts::create_user(env, signup)`\nhelp: {help}"),
        );
        return None;
    };
    let Expr::Path(func) = *call.func else {
        cx.error_spanned(
            &call.func,
            format!("`{key}` must call a function by its path"),
        );
        return None;
    };
    let args = call
        .args
        .into_iter()
        .filter_map(|arg| parse_arg(cx, arg))
        .collect();
    Some(CallAst {
        key: key.clone(),
        path: func.path,
        args,
    })
}

/// One argument of a call or a child workflow: a name, or a literal (possibly negated).
/// Anything else is an error: derived values are computed in a step.
fn parse_arg(cx: &Ctxt, arg: Expr) -> Option<ArgAst> {
    match arg {
        Expr::Path(path) if path.qself.is_none() && path.path.get_ident().is_some() => {
            path.path.get_ident().cloned().map(ArgAst::Name)
        }
        Expr::Lit(_) => Some(ArgAst::Literal(Box::new(arg))),
        Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            ref expr,
            ..
        }) if matches!(**expr, Expr::Lit(_)) => Some(ArgAst::Literal(Box::new(arg))),
        other => {
            cx.error_spanned(
                &other,
                "an argument must name a step, a workflow input, `env` or `ctx`, or be a literal\n\
                 help: compute derived values inside the action, or in a step of their own",
            );
            None
        }
    }
}

/// Parses `[a, b, c]`. Keywords are accepted as names (`unsafe` is an error kind), so
/// that a wrong name gets a precise error from the check that knows the valid ones.
pub(super) fn parse_ident_list(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<Vec<Ident>> {
    let (what, example) = if key == "retry_on" {
        ("error kinds", "[timeout, unavailable]")
    } else {
        ("step ids", "[create_account]")
    };
    let single = Ident::parse_any.parse2(value.clone()).ok();
    let parser = |input: ParseStream<'_>| {
        let content;
        syn::bracketed!(content in input);
        content.parse_terminated(Ident::parse_any, Token![,])
    };
    match parser.parse2(value) {
        Ok(list) => Some(list.into_iter().collect()),
        Err(error) => {
            let help = match single {
                Some(ident) => format!("put it in brackets: `{key}: [{ident}]`"),
                None => format!("write `{key}: {example}`"),
            };
            // syn's error sits on the offending token (inside the brackets, if any).
            cx.error(
                error.span(),
                format!("`{key}` expects a list of {what} in brackets\nhelp: {help}"),
            );
            None
        }
    }
}

/// `for_each: line in order.lines`: one name, `in`, and the expression yielding the items.
pub(super) fn parse_for_each(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<ForEachAst> {
    let help =
        format!("write `{key}: line in order.lines`: a name for each item, `in`, and the items");
    let parser = |input: ParseStream<'_>| -> syn::Result<ForEachAst> {
        if input.peek(syn::token::Paren) || input.peek(syn::token::Bracket) {
            return Err(syn::Error::new(
                input.span(),
                "a map binds each item to one name, not a pattern",
            ));
        }
        let binding = Ident::parse_any(input).map_err(|error| {
            syn::Error::new(error.span(), format!("`{key}` expects `item in source`"))
        })?;
        if !input.peek(Token![in]) {
            return Err(syn::Error::new(
                if input.is_empty() {
                    binding.span()
                } else {
                    input.span()
                },
                format!("expected `in` after `{binding}`"),
            ));
        }
        input.parse::<Token![in]>()?;
        if input.is_empty() {
            return Err(syn::Error::new(
                binding.span(),
                format!("`{key}` needs the items after `in`"),
            ));
        }
        let source: Expr = input.parse()?;
        Ok(ForEachAst { binding, source })
    };
    match parser.parse2(value.clone()) {
        Ok(for_each) => Some(for_each),
        Err(error) => {
            cx.error(error.span(), format!("{error}\nhelp: {help}"));
            // Keep the item's name when it was readable, so the calls that take it are
            // not reported as naming something unknown; the source is left empty.
            match value.into_iter().next() {
                Some(TokenTree::Ident(binding)) => Some(ForEachAst {
                    binding,
                    source: Expr::Verbatim(TokenStream::new()),
                }),
                _ => None,
            }
        }
    }
}

/// `concurrency: 8`: how many items of a map are in flight at once. Zero is parsed (the
/// check that rejects it points at the literal); a value that is not a whole number is not.
pub(super) fn parse_concurrency(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<(u32, Span)> {
    let span = first_span(&value);
    match syn::parse2::<syn::LitInt>(value) {
        Ok(int) if int.suffix().is_empty() => match int.base10_parse::<u32>() {
            Ok(n) => Some((n, int.span())),
            Err(_) => {
                cx.error(
                    int.span(),
                    format!(
                        "`{key}` must be a whole number of items from 1 to {}",
                        u32::MAX
                    ),
                );
                None
            }
        },
        _ => {
            cx.error(
                span,
                format!(
                    "`{key}` expects a whole number of items in flight at once, e.g. `{key}: 8`"
                ),
            );
            None
        }
    }
}

/// `workflow: Shipping(order: order, holds: reserve_lines)`: the child workflow's type path
/// and its inputs by field; a field alone (`order`) passes the name of the same spelling.
pub(super) fn parse_child(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<ChildAst> {
    let span = first_span(&value);
    let example = format!("`{key}: Shipping(order: order, holds: reserve_lines)`");
    let tokens: Vec<TokenTree> = value.clone().into_iter().collect();
    let (path_tokens, args) = match tokens.split_last() {
        Some((TokenTree::Group(group), path)) if group.delimiter() == Delimiter::Parenthesis => {
            (path.iter().cloned().collect::<TokenStream>(), group.clone())
        }
        _ => {
            let help = match syn::parse2::<syn::Path>(value) {
                Ok(path) => format!(
                    "pass the child's inputs: `{key}: {}(...)`, one `field: value` per input",
                    path.to_token_stream().to_string().replace(' ', "")
                ),
                Err(_) => format!("write {example}"),
            };
            cx.error(
                span,
                format!("`{key}` expects a workflow type and its inputs, `Child(field: value, ...)`\nhelp: {help}"),
            );
            return None;
        }
    };
    let path = match syn::Path::parse_mod_style.parse2(path_tokens) {
        Ok(path) => path,
        Err(error) => {
            cx.error(
                error.span(),
                format!("`{key}` expects the path of a workflow type, e.g. {example}"),
            );
            return None;
        }
    };
    let field = |input: ParseStream<'_>| -> syn::Result<(Ident, Option<Expr>)> {
        let field: Ident = input.parse()?;
        if input.peek(Token![:]) && !input.peek(Token![::]) {
            input.parse::<Token![:]>()?;
            Ok((field, Some(input.parse()?)))
        } else {
            Ok((field, None))
        }
    };
    let parser =
        |input: ParseStream<'_>| Punctuated::<_, Token![,]>::parse_terminated_with(input, field);
    let parsed = match parser.parse2(args.stream()) {
        Ok(parsed) => parsed,
        Err(error) => {
            cx.error(
                error.span(),
                format!("the inputs of a child workflow are `field: value` pairs\nhelp: write {example}"),
            );
            return None;
        }
    };
    let mut fields = Vec::new();
    for (field, value) in parsed {
        let arg = match value {
            Some(expr) => match parse_arg(cx, expr) {
                Some(arg) => arg,
                None => continue,
            },
            None => ArgAst::Name(field.clone()),
        };
        fields.push(ChildFieldAst { field, arg });
    }
    Some(ChildAst {
        key: key.clone(),
        path,
        fields,
    })
}

//! The workflow-level keys about finding and keeping runs: `search: [order.customer_id,
//! order.id]` and `retention: 30d`. Syntax only; the checks are in
//! [`check::keys`](super::check::keys).
//!
//! The nodes hold syn types, which implement `Debug` only with syn's `extra-traits`.
#![allow(missing_debug_implementations)]

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::Ident;

use super::ast::DurationLit;
use super::ctxt::Ctxt;
use super::values::{first_span, parse_duration};

/// `search: [order.customer_id, order.id]` as written.
#[derive(Clone)]
pub struct SearchAst {
    /// The `search` key, for spans.
    pub key: Ident,
    /// The span of the brackets.
    pub brackets: Span,
    /// The entries, in order; entries that are not a path of fields are reported and left
    /// out.
    pub entries: Vec<SearchEntryAst>,
    /// Whether anything was written between the brackets.
    pub written: bool,
}

/// One entry of `search`: an input, or a path of fields from one (`order.customer_id`).
#[derive(Clone)]
pub struct SearchEntryAst {
    /// The input it starts from: `order`.
    pub root: Ident,
    /// The fields after it: `customer_id`.
    pub fields: Vec<Ident>,
    /// The entry as written, for spans.
    pub tokens: TokenStream,
}

impl SearchEntryAst {
    /// The entry's name: its last field (`customer_id`), or the input itself.
    pub fn name(&self) -> &Ident {
        self.fields.last().unwrap_or(&self.root)
    }

    /// The entry as written, without spaces: `order.customer_id`.
    pub fn path(&self) -> String {
        std::iter::once(&self.root)
            .chain(&self.fields)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// `retention: 30d` as written.
#[derive(Clone, Copy)]
pub struct RetentionAst {
    /// The span of the `retention` key.
    pub key: Span,
    /// The duration.
    pub value: DurationLit,
}

/// Reads the value of `search:`.
pub(super) fn parse_search(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<SearchAst> {
    let span = first_span(&value);
    let mut tokens = value.into_iter();
    let (Some(TokenTree::Group(group)), None) = (tokens.next(), tokens.next()) else {
        cx.error(
            span,
            "`search` expects a list of inputs or their fields\nhelp: write e.g. `search: [order.customer_id, order.id]`",
        );
        return None;
    };
    if group.delimiter() != Delimiter::Bracket {
        cx.error(
            group.span(),
            "`search` expects a list in brackets\nhelp: write e.g. `search: [order.customer_id, order.id]`",
        );
        return None;
    }
    let mut search = SearchAst {
        key: key.clone(),
        brackets: group.span(),
        entries: Vec::new(),
        written: !group.stream().is_empty(),
    };
    let mut entry = TokenStream::new();
    for tt in group.stream() {
        match &tt {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                push_entry(cx, &mut search, std::mem::take(&mut entry), p.span());
            }
            _ => entry.extend([tt]),
        }
    }
    if !entry.is_empty() {
        push_entry(cx, &mut search, entry, group.span_close());
    }
    Some(search)
}

/// Reads one entry: `ident (. ident)*`.
fn push_entry(cx: &Ctxt, search: &mut SearchAst, entry: TokenStream, comma: Span) {
    if entry.is_empty() {
        cx.error(
            comma,
            "expected an entry of `search` before this comma\nhelp: remove the extra comma",
        );
        return;
    }
    let help = "an entry is an input or a path of its fields, e.g. `order.customer_id`";
    let parsed = match syn::parse2::<syn::Expr>(entry.clone()) {
        Ok(expr) => path_of(&expr),
        Err(_) => None,
    };
    match parsed {
        Some((root, fields)) => search.entries.push(SearchEntryAst {
            root,
            fields,
            tokens: entry,
        }),
        None => cx.error(
            entry.span(),
            format!(
                "`{}` is not an input or a path of its fields\nhelp: {help}; search values are read from the inputs when the run starts",
                crate::parse::tokens_to_string(&entry)
            ),
        ),
    }
}

/// `a` or `a.b.c` with named fields only.
fn path_of(expr: &syn::Expr) -> Option<(Ident, Vec<Ident>)> {
    match expr {
        syn::Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
            Some((path.path.get_ident()?.clone(), Vec::new()))
        }
        syn::Expr::Field(field) if field.attrs.is_empty() => {
            let syn::Member::Named(name) = &field.member else {
                return None;
            };
            let (root, mut fields) = path_of(&field.base)?;
            fields.push(name.clone());
            Some((root, fields))
        }
        _ => None,
    }
}

/// Reads the value of `retention:`.
pub(super) fn parse_retention(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<RetentionAst> {
    parse_duration(cx, key, value).map(|value| RetentionAst {
        key: key.span(),
        value,
    })
}

/// The checked `search` entries, in the model's terms.
pub(super) fn lower_search(ast: &super::ast::WorkflowAst) -> Vec<crate::model::SearchKey> {
    ast.search
        .iter()
        .flat_map(|search| &search.entries)
        .map(|entry| crate::model::SearchKey {
            name: entry.name().to_string(),
            path: entry.path(),
        })
        .collect()
}

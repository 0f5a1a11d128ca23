//! Flow control keys as written: a workflow's `concurrency: { key, limit, on_limit }`,
//! `priority: expr` and `debounce: { key, window, max_wait }`, and a step's
//! `concurrency: { key, limit }` and `rate: { key, limit, per, burst }`. Syntax only; the
//! checks are in [`check::flow`](super::check::flow).
//!
//! The nodes hold syn types, which implement `Debug` only with syn's `extra-traits`.
#![allow(missing_debug_implementations)]

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Ident, LitStr};

use super::ast::DurationLit;
use super::ctxt::Ctxt;
use super::values::{first_span, keyed_block, parse_choice, parse_duration, Block};
use crate::flow::{Debounce, LimitKey, OnLimit, Rate, RunConcurrency, StepConcurrency};

/// The keys of a workflow's `concurrency: { ... }`.
pub const RUN_CONCURRENCY_KEYS: &[&str] = &["key", "limit", "on_limit"];
/// The keys of a step's `concurrency: { ... }`.
pub const STEP_CONCURRENCY_KEYS: &[&str] = &["key", "limit"];
/// The keys of `debounce: { ... }`.
pub const DEBOUNCE_KEYS: &[&str] = &["key", "window", "max_wait"];
/// The keys of `rate: { ... }`.
pub const RATE_KEYS: &[&str] = &["key", "limit", "per", "burst"];

/// The largest `limit` (and `burst`) a spec may declare.
pub const MAX_LIMIT: u64 = 1_000_000;

/// The key of a limit as written: a string literal or a path of fields.
#[derive(Clone)]
pub enum KeyAst {
    /// `key: "psp"`.
    Static(LitStr),
    /// `key: order.customer_id`: the name it starts from and the fields after it.
    Path(PathAst),
}

/// A path of fields from an input (or, on a step, an upstream step): `order.customer_id`.
#[derive(Clone)]
pub struct PathAst {
    /// The name it starts from: `order`.
    pub root: Ident,
    /// The fields after it: `customer_id`.
    pub fields: Vec<Ident>,
    /// The path as written, for spans.
    pub tokens: TokenStream,
}

impl PathAst {
    /// The path as written, without spaces: `order.customer_id`.
    pub fn path(&self) -> String {
        std::iter::once(&self.root)
            .chain(&self.fields)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }
}

impl KeyAst {
    /// The key in the model's terms.
    pub fn lower(&self) -> LimitKey {
        match self {
            KeyAst::Static(lit) => LimitKey::Static(lit.value()),
            KeyAst::Path(path) => LimitKey::Path(path.path()),
        }
    }
}

/// A `{ key: ..., ... }` block of flow control as written; which keys it may hold depends
/// on the block (`what`).
#[derive(Clone)]
pub struct LimitAst {
    /// The block's key: `concurrency`, `debounce` or `rate`.
    pub name: Ident,
    /// `key: ...`.
    pub key: Option<KeyAst>,
    /// `limit: N` (or `burst: N`), with the literal's span; kept wide so that a value too
    /// big is reported by the checks.
    pub limit: Option<(u64, Span)>,
    /// `burst: N`.
    pub burst: Option<(u64, Span)>,
    /// `on_limit: queue | skip | cancel_previous`.
    pub on_limit: Option<OnLimit>,
    /// `window: 5s` (debounce).
    pub window: Option<DurationLit>,
    /// `max_wait: 1m` (debounce).
    pub max_wait: Option<DurationLit>,
    /// `per: 1m` (rate).
    pub per: Option<DurationLit>,
}

/// `priority: expr` as written.
#[derive(Clone)]
pub enum PriorityAst {
    /// `priority: order.tier`.
    Path(PathAst),
    /// `priority: 10` (or `-1`), with the literal's span.
    Literal(i64, Span),
}

impl PriorityAst {
    /// The expression as the model keeps it: the path or the integer.
    pub fn lower(&self) -> String {
        match self {
            PriorityAst::Path(path) => path.path(),
            PriorityAst::Literal(value, _) => value.to_string(),
        }
    }
}

/// The flow control keys of a workflow, written before its first step.
#[derive(Default, Clone)]
pub struct WorkflowFlow {
    /// `concurrency: { key, limit, on_limit }`.
    pub concurrency: Option<LimitAst>,
    /// `priority: expr`.
    pub priority: Option<(Ident, PriorityAst)>,
    /// `debounce: { key, window, max_wait }`.
    pub debounce: Option<LimitAst>,
}

/// Reads a `{ ... }` block of flow control under `name` (`concurrency` on a workflow when
/// `workflow` is set, else on a step; `debounce`; `rate`). Reports a missing `key` (and
/// `limit`, `window`, `per` where the block needs one) at `name`.
pub(super) fn parse_limit(
    cx: &Ctxt,
    name: &Ident,
    value: TokenStream,
    workflow: bool,
) -> Option<LimitAst> {
    let kind = name.to_string();
    let (keys, example): (&[&str], &str) = match (kind.as_str(), workflow) {
        ("debounce", _) => (
            DEBOUNCE_KEYS,
            "{ key: order.cart_id, window: 5s, max_wait: 1m }",
        ),
        ("rate", _) => (
            RATE_KEYS,
            "{ key: order.merchant_id, limit: 100, per: 1m, burst: 20 }",
        ),
        (_, true) => (
            RUN_CONCURRENCY_KEYS,
            "{ key: order.customer_id, limit: 1, on_limit: queue }",
        ),
        (_, false) => (STEP_CONCURRENCY_KEYS, "{ key: \"psp\", limit: 5 }"),
    };
    let mut limit = LimitAst {
        name: name.clone(),
        key: None,
        limit: None,
        burst: None,
        on_limit: None,
        window: None,
        max_wait: None,
        per: None,
    };
    let mut written = Vec::new();
    let errors_before = cx.len();
    keyed_block(
        cx,
        name,
        value,
        &Block {
            what: &kind,
            keys,
            example,
            first_key: "key",
        },
        |key, value| {
            let field = key.to_string();
            written.push(field.clone());
            let Some(value) = value else {
                return;
            };
            match field.as_str() {
                "key" => limit.key = parse_key(cx, &kind, value),
                "limit" | "burst" => {
                    let parsed = parse_count(cx, &field, value);
                    if field == "limit" {
                        limit.limit = parsed;
                    } else {
                        limit.burst = parsed;
                    }
                }
                "on_limit" => {
                    limit.on_limit = parse_choice(
                        cx,
                        &key,
                        value,
                        &[
                            ("queue", OnLimit::Queue),
                            ("skip", OnLimit::Skip),
                            ("cancel_previous", OnLimit::CancelPrevious),
                        ],
                    )
                }
                "window" => limit.window = parse_duration(cx, &key, value),
                "max_wait" => limit.max_wait = parse_duration(cx, &key, value),
                "per" => limit.per = parse_duration(cx, &key, value),
                _ => {}
            }
        },
    )?;
    let required: &[&str] = match kind.as_str() {
        "debounce" => &["key", "window"],
        "rate" => &["key", "limit", "per"],
        _ => &["key", "limit"],
    };
    // A block with a mistake inside (a misspelt `limt`) reports that mistake only.
    let required = if cx.len() > errors_before {
        &[][..]
    } else {
        required
    };
    for needed in required {
        if !written.iter().any(|field| field == needed) {
            cx.error(
                name.span(),
                format!(
                    "`{kind}` needs `{needed}`\nhelp: write e.g. `{kind}: {example}`{}",
                    if *needed == "key" {
                        "; a key is a string literal (one key for every run) or a path over the inputs"
                    } else {
                        ""
                    }
                ),
            );
        }
    }
    Some(limit)
}

/// `"psp"` or `order.customer_id`.
fn parse_key(cx: &Ctxt, kind: &str, value: TokenStream) -> Option<KeyAst> {
    if let Ok(lit) = syn::parse2::<LitStr>(value.clone()) {
        if lit.value().trim().is_empty() {
            cx.error(
                lit.span(),
                format!("the `key` of `{kind}` must not be empty\nhelp: name the resource the limit protects, e.g. `key: \"psp\"`"),
            );
            return None;
        }
        return Some(KeyAst::Static(lit));
    }
    match path_of_tokens(&value) {
        Some(path) => Some(KeyAst::Path(path)),
        None => {
            cx.error(
                value.span(),
                format!(
                    "the `key` of `{kind}` is `{}`, not a string or a path of fields\nhelp: write a string literal for one key shared by every run (`key: \"psp\"`) or a path read per run (`key: order.customer_id`)",
                    super::tokens_to_string(&value)
                ),
            );
            None
        }
    }
}

/// `a` or `a.b.c` with named fields only.
pub(super) fn path_of_tokens(tokens: &TokenStream) -> Option<PathAst> {
    fn walk(expr: &syn::Expr) -> Option<(Ident, Vec<Ident>)> {
        match expr {
            syn::Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
                Some((path.path.get_ident()?.clone(), Vec::new()))
            }
            syn::Expr::Field(field) if field.attrs.is_empty() => {
                let syn::Member::Named(name) = &field.member else {
                    return None;
                };
                let (root, mut fields) = walk(&field.base)?;
                fields.push(name.clone());
                Some((root, fields))
            }
            _ => None,
        }
    }
    let expr = syn::parse2::<syn::Expr>(tokens.clone()).ok()?;
    let (root, fields) = walk(&expr)?;
    Some(PathAst {
        root,
        fields,
        tokens: tokens.clone(),
    })
}

/// A whole number for `limit` or `burst`.
fn parse_count(cx: &Ctxt, field: &str, value: TokenStream) -> Option<(u64, Span)> {
    let span = first_span(&value);
    match syn::parse2::<syn::LitInt>(value) {
        Ok(int) if int.suffix().is_empty() => match int.base10_parse::<u64>() {
            Ok(n) => Some((n, int.span())),
            Err(_) => Some((u64::MAX, int.span())),
        },
        _ => {
            cx.error(
                span,
                format!("`{field}` expects a whole number, e.g. `{field}: 5`"),
            );
            None
        }
    }
}

/// Reads the value of a workflow's `priority:`: a path over the inputs or an integer.
pub(super) fn parse_priority(cx: &Ctxt, value: TokenStream) -> Option<PriorityAst> {
    if let Ok(expr) = syn::parse2::<syn::Expr>(value.clone()) {
        let (negative, inner) = match &expr {
            syn::Expr::Unary(unary) if matches!(unary.op, syn::UnOp::Neg(_)) => {
                (true, &*unary.expr)
            }
            other => (false, other),
        };
        if let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Int(int),
            ..
        }) = inner
        {
            return match int.base10_parse::<i64>() {
                Ok(n) if int.suffix().is_empty() => Some(PriorityAst::Literal(
                    if negative { -n } else { n },
                    int.span(),
                )),
                _ => {
                    cx.error(
                        int.span(),
                        "`priority` expects a whole number that fits in an `i64`, without a suffix\nhelp: write e.g. `priority: 10`",
                    );
                    None
                }
            };
        }
    }
    match path_of_tokens(&value) {
        Some(path) => Some(PriorityAst::Path(path)),
        None => {
            cx.error(
                value.span(),
                format!(
                    "`priority: {}` is not an input's field or a whole number\nhelp: write a path over the inputs (`priority: order.tier`) or an integer (`priority: 10`); higher starts first; compute anything else into an input field",
                    super::tokens_to_string(&value)
                ),
            );
            None
        }
    }
}

/// A checked workflow `concurrency` in the model's terms (`None` only when the checks
/// refused it).
pub(super) fn lower_run_concurrency(limit: &LimitAst) -> Option<RunConcurrency> {
    Some(RunConcurrency {
        key: limit.key.as_ref()?.lower(),
        limit: u32::try_from(limit.limit?.0).ok()?,
        on_limit: limit.on_limit.unwrap_or_default(),
    })
}

/// A checked `debounce` in the model's terms.
pub(super) fn lower_debounce(limit: &LimitAst) -> Option<Debounce> {
    Some(Debounce {
        key: limit.key.as_ref()?.lower(),
        window: limit.window?.value,
        max_wait: limit.max_wait.map(|wait| wait.value),
    })
}

/// A checked step `concurrency: { .. }` in the model's terms.
pub(super) fn lower_step_concurrency(limit: &LimitAst) -> Option<StepConcurrency> {
    Some(StepConcurrency {
        key: limit.key.as_ref()?.lower(),
        limit: u32::try_from(limit.limit?.0).ok()?,
    })
}

/// A checked `rate` in the model's terms; `burst` is 1 when not written.
pub(super) fn lower_rate(limit: &LimitAst) -> Option<Rate> {
    Some(Rate {
        key: limit.key.as_ref()?.lower(),
        limit: u32::try_from(limit.limit?.0).ok()?,
        per: limit.per?.value,
        burst: limit
            .burst
            .map_or(Some(1), |(n, _)| u32::try_from(n).ok())?,
    })
}

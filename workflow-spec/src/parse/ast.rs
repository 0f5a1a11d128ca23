//! The syntax of `workflow!`, parsed with syn. Nodes keep their tokens and spans so that
//! checks can point at the offending token and the macro can span generated code on it.
//!
//! Parsing is forgiving: a bad field value is recorded in the [`Ctxt`] and parsing goes on
//! with the next field, so one typo does not hide the others.
//!
//! The nodes hold syn types, which implement `Debug` only with syn's `extra-traits`
//! feature; that feature would slow every build of the macro, so they do not derive it.
#![allow(missing_debug_implementations)]

use std::time::Duration;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Attribute, Expr, Ident, LitStr, Token, Type, Visibility};

use super::ctxt::{did_you_mean, Ctxt};
use super::fields::parse_field;
use crate::kind::ErrorKind;
use crate::model::{Effect, OnFailure, OnItemFailure};
use crate::retry::{Backoff, Jitter};

pub use super::values::parse_duration;

/// A whole `workflow!` invocation.
pub struct WorkflowAst {
    /// Outer attributes other than docs and `#[workflow(...)]` (kept for the generated type).
    pub attrs: Vec<Attribute>,
    /// `#[workflow(name = "...")]`: the name runs are journaled under, if set.
    pub journal_name: Option<LitStr>,
    /// Doc lines.
    pub docs: Vec<String>,
    /// `pub`, `pub(crate)` or nothing.
    pub vis: Visibility,
    /// The workflow's type name.
    pub name: Ident,
    /// The inputs between parentheses.
    pub inputs: Vec<InputAst>,
    /// `env Type`.
    pub env: Option<Type>,
    /// `schedule: { ... }`, written before the first step.
    pub schedule: Option<super::schedule::ScheduleAst>,
    /// `search: [..]`, written before the first step.
    pub search: Option<super::search::SearchAst>,
    /// `retention: 30d`, written before the first step.
    pub retention: Option<super::search::RetentionAst>,
    /// `concurrency`, `priority` and `debounce`, written before the first step.
    pub flow: super::flow::WorkflowFlow,
    /// The steps, in order.
    pub steps: Vec<StepAst>,
    /// The span of the braces around the steps.
    pub body_span: Span,
}

/// `name: Type` in the workflow's parentheses.
pub struct InputAst {
    /// The input's name.
    pub name: Ident,
    /// Its type.
    pub ty: Type,
}

/// `step`, `human` or `event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKw {
    /// `step`: an action (a map with `for_each`), or a child workflow with `workflow`.
    Step,
    /// `human`: a checkpoint.
    Human,
    /// `event`: a wait for a typed payload sent into the run.
    Event,
}

impl StepKw {
    /// The keys this kind of item takes.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            StepKw::Step => STEP_KEYS,
            StepKw::Human => HUMAN_KEYS,
            StepKw::Event => EVENT_KEYS,
        }
    }

    /// What an item of this kind is called in messages: `step`, `human step`, `event`.
    pub fn what(self) -> &'static str {
        match self {
            StepKw::Step => "step",
            StepKw::Human => "human step",
            StepKw::Event => "event",
        }
    }
}

/// One `step id -> T { ... }`, `human id -> T { ... }` or `event id -> T { ... }`.
pub struct StepAst {
    /// Doc lines.
    pub docs: Vec<String>,
    /// Whether this is a `step`, a `human` or an `event`.
    pub kw: StepKw,
    /// The keyword token, for spans.
    pub kw_span: Span,
    /// The step id.
    pub id: Ident,
    /// The output type; `None` for a human step without `-> T` (defaults to `Approval`).
    pub output: Option<Type>,
    /// The fields, as parsed.
    pub fields: Fields,
    /// Every key written, in order (duplicates included).
    pub keys: Vec<Ident>,
}

/// The recognised fields of a step. Each keeps the key's span for errors.
#[derive(Default)]
pub struct Fields {
    /// `action: path(args)`.
    pub action: Option<CallAst>,
    /// `compensate: path(args)`.
    pub compensate: Option<CallAst>,
    /// `reconcile: path(args)`.
    pub reconcile: Option<CallAst>,
    /// `depends_on: [ids]`.
    pub depends_on: Option<(Ident, Vec<Ident>)>,
    /// `on_failure: abort | continue`.
    pub on_failure: Option<(Ident, OnFailure)>,
    /// `retry: { ... }`.
    pub retry: Option<(Ident, RetryAst)>,
    /// `timeout: 30s`.
    pub timeout: Option<(Ident, DurationLit)>,
    /// `condition: expr`.
    pub condition: Option<(Ident, Expr)>,
    /// `effect: external | internal`.
    pub effect: Option<(Ident, Effect)>,
    /// `idempotent: true | false`.
    pub idempotent: Option<(Ident, bool)>,
    /// `spawn: true | false`: the action runs as a task of its own.
    pub spawn: Option<(Ident, bool)>,
    /// `assignee: "group"`.
    pub assignee: Option<(Ident, LitStr)>,
    /// `on_timeout: escalate("group") | abort | approve | reject`.
    pub on_timeout: Option<(Ident, OnTimeoutAst)>,
    /// `prompt: "text"`.
    pub prompt: Option<(Ident, LitStr)>,
    /// `for_each: item in source`.
    pub for_each: Option<(Ident, ForEachAst)>,
    /// `concurrency: 8`, with the literal's span.
    pub concurrency: Option<(Ident, (u32, Span))>,
    /// `concurrency: { key, limit }`: attempts in flight per key, across runs.
    pub limit: Option<(Ident, super::flow::LimitAst)>,
    /// `rate: { key, limit, per, burst }`.
    pub rate: Option<(Ident, super::flow::LimitAst)>,
    /// `on_item_failure: abort | skip`.
    pub on_item_failure: Option<(Ident, OnItemFailure)>,
    /// `workflow: Child(field: arg, ...)`.
    pub workflow: Option<ChildAst>,
    /// `approvals: 2`: distinct approvers needed, with the literal's span.
    pub approvals: Option<(Ident, (u32, Span))>,
    /// `self_approval: false`, with the literal's span.
    pub self_approval: Option<(Ident, (bool, Span))>,
    /// `title: "Refund {refund.amount_cents}"`.
    pub title: Option<(Ident, LitStr)>,
    /// `show: [refund.amount_cents, assess.note]`.
    pub show: Option<(Ident, Vec<ShownAst>)>,
}

/// One value a human step shows: `refund.amount_cents`, a name and its fields.
#[derive(Clone)]
pub struct ShownAst {
    /// The workflow input or upstream step it reads.
    pub root: Ident,
    /// The fields, outermost first.
    pub fields: Vec<Ident>,
}

impl ShownAst {
    /// The path as written: `refund.amount_cents`.
    pub fn path(&self) -> String {
        std::iter::once(&self.root)
            .chain(&self.fields)
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// `for_each: line in order.lines`.
#[derive(Clone)]
pub struct ForEachAst {
    /// The name each item is bound to.
    pub binding: Ident,
    /// The expression yielding the items.
    pub source: Expr,
}

/// `workflow: Shipping(order: order, holds: reserve_lines)`.
#[derive(Clone)]
pub struct ChildAst {
    /// The key (`workflow`), for spans.
    pub key: Ident,
    /// The child workflow's type path.
    pub path: syn::Path,
    /// The inputs, in the order written; `order` alone stands for `order: order`.
    pub fields: Vec<ChildFieldAst>,
}

/// One input of a child workflow: `holds: reserve_lines`.
#[derive(Clone)]
pub struct ChildFieldAst {
    /// The field of the child's `…Input`.
    pub field: Ident,
    /// Its value: a name or a literal.
    pub arg: ArgAst,
}

/// A call of a user function with its arguments.
#[derive(Clone)]
pub struct CallAst {
    /// The key it was given under (`action`, `compensate`, `reconcile`).
    pub key: Ident,
    /// The function path.
    pub path: syn::Path,
    /// The arguments.
    pub args: Vec<ArgAst>,
}

/// One argument: a name or a literal.
#[derive(Clone)]
pub enum ArgAst {
    /// A step, an input, `env` or `ctx`.
    Name(Ident),
    /// A literal (possibly negated).
    Literal(Box<Expr>),
}

/// `on_timeout` values.
#[derive(Clone)]
pub enum OnTimeoutAst {
    /// `escalate("group")`.
    Escalate(LitStr),
    /// `abort`.
    Abort,
    /// `approve`.
    Approve,
    /// `reject`.
    Reject,
    /// `continue` (events only).
    Continue,
}

/// A duration literal such as `48h`, with its span.
#[derive(Debug, Clone, Copy)]
pub struct DurationLit {
    /// The value.
    pub value: Duration,
    /// The literal's span.
    pub span: Span,
}

/// The fields of `retry: { ... }`, each with its value's span.
#[derive(Debug, Default, Clone)]
pub struct RetryAst {
    /// `max_attempts: N`.
    pub max_attempts: Option<(u32, Span)>,
    /// `backoff: fixed | linear | exponential`.
    pub backoff: Option<(Backoff, Span)>,
    /// `initial: 1s`.
    pub initial: Option<DurationLit>,
    /// `max: 60s`.
    pub max: Option<DurationLit>,
    /// `multiplier: 2` or `2.0`.
    pub multiplier: Option<(f64, Span)>,
    /// `jitter: none | full | equal | N%`.
    pub jitter: Option<(Jitter, Span)>,
    /// `deadline: 10m`.
    pub deadline: Option<DurationLit>,
    /// `retry_on: [kinds]`.
    pub retry_on: Option<Vec<(ErrorKind, Span)>>,
}

/// The keys a `step` takes.
pub const STEP_KEYS: &[&str] = &[
    "action",
    "workflow",
    "for_each",
    "concurrency",
    "on_item_failure",
    "depends_on",
    "on_failure",
    "compensate",
    "retry",
    "timeout",
    "condition",
    "effect",
    "idempotent",
    "reconcile",
    "spawn",
    "rate",
];

/// The keys a `human` checkpoint takes.
pub const HUMAN_KEYS: &[&str] = &[
    "assignee",
    "depends_on",
    "timeout",
    "on_timeout",
    "prompt",
    "condition",
    "on_failure",
    "approvals",
    "self_approval",
    "title",
    "show",
];

/// The keys an `event` takes.
pub const EVENT_KEYS: &[&str] = &["depends_on", "timeout", "on_timeout", "condition"];

/// The keys of a `retry: { ... }` block.
pub const RETRY_KEYS: &[&str] = &[
    "max_attempts",
    "backoff",
    "initial",
    "max",
    "multiplier",
    "jitter",
    "deadline",
    "retry_on",
];

/// Parses a whole invocation. Returns `None` only when the header (name, inputs) is too
/// broken to name the workflow; every other problem is recorded in `cx`.
pub fn parse_workflow(cx: &Ctxt, tokens: TokenStream) -> Option<WorkflowAst> {
    let parser = |input: ParseStream<'_>| -> syn::Result<Option<WorkflowAst>> {
        Ok(parse_workflow_inner(cx, input))
    };
    match parser.parse2(tokens) {
        Ok(ast) => ast,
        Err(error) => {
            cx.push(error);
            None
        }
    }
}

fn parse_workflow_inner(cx: &Ctxt, input: ParseStream<'_>) -> Option<WorkflowAst> {
    let header = (|| -> syn::Result<_> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        let kw: Ident = input.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected `workflow Name(inputs) { ... }`, e.g. `pub workflow Onboarding(signup: Signup) { ... }`",
            )
        })?;
        if kw != "workflow" {
            return Err(syn::Error::new(
                kw.span(),
                format!("expected the keyword `workflow`, found `{kw}`"),
            ));
        }
        let name: Ident = input.parse()?;
        let content;
        syn::parenthesized!(content in input);
        let mut inputs = Vec::new();
        while !content.is_empty() {
            let name: Ident = content.parse()?;
            content.parse::<Token![:]>()?;
            let ty: Type = content.parse()?;
            inputs.push(InputAst { name, ty });
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        let env = if input.peek(Ident) && !input.peek(syn::token::Brace) {
            let kw: Ident = input.parse()?;
            if kw != "env" {
                return Err(syn::Error::new(
                    kw.span(),
                    format!("expected `env Type` or `{{`, found `{kw}`"),
                ));
            }
            Some(input.parse::<Type>()?)
        } else {
            None
        };
        Ok((attrs, vis, name, inputs, env))
    })();
    let (attrs, vis, name, inputs, env) = match header {
        Ok(header) => header,
        Err(error) => {
            cx.push(error);
            return None;
        }
    };
    let (docs, attrs) = split_docs(attrs);
    let (journal_name, attrs) = super::attr::workflow_attrs(cx, attrs);
    let body;
    let braced = (|| -> syn::Result<_> {
        let body;
        let brace = syn::braced!(body in input);
        Ok((brace, body))
    })();
    let brace = match braced {
        Ok((brace, inner)) => {
            body = inner;
            brace
        }
        Err(error) => {
            cx.push(error);
            return Some(WorkflowAst {
                attrs,
                journal_name,
                docs,
                vis,
                name,
                inputs,
                env,
                schedule: None,
                search: None,
                retention: None,
                flow: Default::default(),
                steps: Vec::new(),
                body_span: Span::call_site(),
            });
        }
    };
    let mut keys = super::schedule::WorkflowKeys::default();
    while super::schedule::at_key(&body) {
        super::schedule::parse_workflow_key(cx, &body, &mut keys, false);
    }
    let mut steps = Vec::new();
    while !body.is_empty() {
        if super::schedule::at_key(&body) {
            super::schedule::parse_workflow_key(cx, &body, &mut keys, true);
            continue;
        }
        match parse_step(cx, &body) {
            Ok(step) => steps.push(step),
            Err(error) => {
                cx.push(error);
                // Skip to the end of the next braced group and go on with the next step.
                skip_past_brace(&body);
            }
        }
    }
    if !input.is_empty() {
        cx.error(
            input.span(),
            "unexpected tokens after the workflow's closing brace",
        );
    }
    Some(WorkflowAst {
        attrs,
        journal_name,
        docs,
        vis,
        name,
        inputs,
        env,
        schedule: keys.schedule,
        search: keys.search,
        retention: keys.retention,
        flow: keys.flow,
        steps,
        body_span: brace.span.join(),
    })
}

fn skip_past_brace(input: ParseStream<'_>) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            rest = next;
            if let TokenTree::Group(group) = &tt {
                if group.delimiter() == Delimiter::Brace {
                    break;
                }
            }
        }
        Ok(((), rest))
    });
}

fn split_docs(attrs: Vec<Attribute>) -> (Vec<String>, Vec<Attribute>) {
    let mut docs = Vec::new();
    let mut rest = Vec::new();
    for attr in attrs {
        if attr.path().is_ident("doc") {
            if let syn::Meta::NameValue(syn::MetaNameValue {
                value:
                    Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(text),
                        ..
                    }),
                ..
            }) = &attr.meta
            {
                let line = text.value();
                docs.push(line.strip_prefix(' ').unwrap_or(&line).to_owned());
                continue;
            }
        }
        rest.push(attr);
    }
    (docs, rest)
}

fn parse_step(cx: &Ctxt, input: ParseStream<'_>) -> syn::Result<StepAst> {
    let attrs = input.call(Attribute::parse_outer)?;
    let (docs, others) = split_docs(attrs);
    for attr in others {
        cx.error_spanned(&attr, "only doc comments are allowed on a step");
    }
    let kw_ident: Ident = input.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected `step id -> Type { ... }`, `human id -> Type { ... }` or `event id -> Type { ... }`",
        )
    })?;
    let kw = if kw_ident == "step" {
        StepKw::Step
    } else if kw_ident == "human" {
        StepKw::Human
    } else if kw_ident == "event" {
        StepKw::Event
    } else {
        let help = did_you_mean(&kw_ident.to_string(), ["step", "human", "event"])
            .unwrap_or_else(|| "start each item with `step`, `human` or `event`".into());
        return Err(syn::Error::new(
            kw_ident.span(),
            format!("expected `step`, `human` or `event`, found `{kw_ident}`\nhelp: {help}"),
        ));
    };
    let id: Ident = input.parse()?;
    let output = if input.peek(Token![->]) {
        input.parse::<Token![->]>()?;
        Some(input.parse::<Type>()?)
    } else if kw == StepKw::Step {
        cx.error(
            id.span(),
            format!(
                "step `{id}` needs an output type after `->`\n\
                 help: write `step {id} -> Type {{ ... }}` with the type its action returns (`-> ()` for none)"
            ),
        );
        // Go on with the body as if it were `-> ()`, so the step's other mistakes are
        // reported and steps reading it do not fail as unknown.
        Some(syn::parse_quote_spanned!(id.span()=> ()))
    } else if kw == StepKw::Event {
        cx.error(
            id.span(),
            format!(
                "event `{id}` needs the type of its payload after `->`\n\
                 help: write `event {id} -> PaymentConfirmed {{ ... }}` with the type the sender sends"
            ),
        );
        Some(syn::parse_quote_spanned!(id.span()=> ()))
    } else {
        None
    };
    let content;
    syn::braced!(content in input);
    let mut fields = Fields::default();
    let mut keys = Vec::new();
    let allowed = kw.keys();
    while !content.is_empty() {
        let key: Ident = match content.parse() {
            Ok(key) => key,
            Err(error) => {
                cx.push(syn::Error::new(
                    error.span(),
                    "expected a key such as `action:`",
                ));
                skip_field(&content);
                continue;
            }
        };
        if let Err(error) = content.parse::<Token![:]>() {
            cx.push(syn::Error::new(
                error.span(),
                format!("expected `:` after `{key}`"),
            ));
            skip_field(&content);
            continue;
        }
        let value = take_value(&content);
        keys.push(key.clone());
        parse_field(cx, kw, allowed, &id, &key, value, &mut fields);
    }
    Ok(StepAst {
        docs,
        kw,
        kw_span: kw_ident.span(),
        id,
        output,
        fields,
        keys,
    })
}

/// Takes the tokens of one value, up to the next top-level comma (consumed).
pub(super) fn take_value(input: ParseStream<'_>) -> TokenStream {
    input
        .step(|cursor| {
            let mut rest = *cursor;
            let mut tokens = TokenStream::new();
            while let Some((tt, next)) = rest.token_tree() {
                rest = next;
                if let TokenTree::Punct(punct) = &tt {
                    if punct.as_char() == ',' {
                        break;
                    }
                }
                tokens.extend([tt]);
            }
            Ok((tokens, rest))
        })
        .unwrap_or_default()
}

pub(super) fn skip_field(input: ParseStream<'_>) {
    let _ = take_value(input);
}

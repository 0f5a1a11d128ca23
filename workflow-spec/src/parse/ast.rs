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
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Ident, LitStr, Token, Type, Visibility};

use super::ctxt::{did_you_mean, Ctxt};
use crate::kind::ErrorKind;
use crate::model::{Effect, OnFailure};
use crate::retry::{Backoff, Jitter};

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

/// `step` or `human`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKw {
    /// `step`: an action.
    Step,
    /// `human`: a checkpoint.
    Human,
}

/// One `step id -> T { ... }` or `human id -> T { ... }`.
pub struct StepAst {
    /// Doc lines.
    pub docs: Vec<String>,
    /// Whether this is a `step` or a `human`.
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
    /// `assignee: "group"`.
    pub assignee: Option<(Ident, LitStr)>,
    /// `on_timeout: escalate("group") | abort | approve | reject`.
    pub on_timeout: Option<(Ident, OnTimeoutAst)>,
    /// `prompt: "text"`.
    pub prompt: Option<(Ident, LitStr)>,
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
    "depends_on",
    "on_failure",
    "compensate",
    "retry",
    "timeout",
    "condition",
    "effect",
    "idempotent",
    "reconcile",
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
];

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
                steps: Vec::new(),
                body_span: Span::call_site(),
            });
        }
    };
    let mut steps = Vec::new();
    while !body.is_empty() {
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
            "expected `step id -> Type { ... }` or `human id -> Type { ... }`",
        )
    })?;
    let kw = if kw_ident == "step" {
        StepKw::Step
    } else if kw_ident == "human" {
        StepKw::Human
    } else {
        let help = did_you_mean(&kw_ident.to_string(), ["step", "human"])
            .unwrap_or_else(|| "start each item with `step` or `human`".into());
        return Err(syn::Error::new(
            kw_ident.span(),
            format!("expected `step` or `human`, found `{kw_ident}`\nhelp: {help}"),
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
    } else {
        None
    };
    let content;
    syn::braced!(content in input);
    let mut fields = Fields::default();
    let mut keys = Vec::new();
    let allowed = match kw {
        StepKw::Step => STEP_KEYS,
        StepKw::Human => HUMAN_KEYS,
    };
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
fn take_value(input: ParseStream<'_>) -> TokenStream {
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

fn skip_field(input: ParseStream<'_>) {
    let _ = take_value(input);
}

fn parse_field(
    cx: &Ctxt,
    kw: StepKw,
    allowed: &[&str],
    id: &Ident,
    key: &Ident,
    value: TokenStream,
    fields: &mut Fields,
) {
    let name = key.to_string();
    if value.is_empty() {
        cx.error(key.span(), format!("`{name}` needs a value"));
        return;
    }
    if !allowed.contains(&name.as_str()) {
        let what = match kw {
            StepKw::Step => "step",
            StepKw::Human => "human step",
        };
        let message = match (kw, name.as_str()) {
            (StepKw::Human, "retry") => format!(
                "human step `{id}` cannot be retried: a person decides once\nhelp: use `timeout` and `on_timeout: escalate(\"group\")` to chase a late decision"
            ),
            (StepKw::Human, "action" | "compensate" | "reconcile" | "effect" | "idempotent") => format!(
                "a human step has no `{name}`: it waits for a decision\nhelp: make it a `step` if it runs code; a human step takes {}",
                list(HUMAN_KEYS)
            ),
            (StepKw::Step, "assignee" | "on_timeout" | "prompt") => format!(
                "`{name}` belongs to human checkpoints, not to `step {id}`\nhelp: write `human {id} -> Approval {{ ... }}` for a checkpoint"
            ),
            _ => {
                let help = did_you_mean(&name, allowed.iter().copied())
                    .unwrap_or_else(|| format!("a {what} takes {}", list(allowed)));
                format!("unknown key `{name}` in {what} `{id}`\nhelp: {help}")
            }
        };
        cx.error(key.span(), message);
        return;
    }
    macro_rules! set {
        ($field:ident, $value:expr) => {{
            if fields.$field.is_some() {
                cx.error(
                    key.span(),
                    format!(
                        "duplicate key `{name}` in {} `{id}`\nhelp: remove one of the two",
                        if kw == StepKw::Human {
                            "human step"
                        } else {
                            "step"
                        }
                    ),
                );
            } else if let Some(value) = $value {
                fields.$field = Some(value);
            }
        }};
    }
    match name.as_str() {
        "action" | "compensate" | "reconcile" => {
            let call = parse_call(cx, key, value);
            match name.as_str() {
                "action" => set!(action, call),
                "compensate" => set!(compensate, call),
                _ => set!(reconcile, call),
            }
        }
        "depends_on" => set!(
            depends_on,
            parse_ident_list(cx, key, value).map(|l| (key.clone(), l))
        ),
        "on_failure" => set!(
            on_failure,
            parse_choice(
                cx,
                key,
                value,
                &[
                    ("abort", OnFailure::Abort),
                    ("continue", OnFailure::Continue)
                ]
            )
            .map(|v| (key.clone(), v))
        ),
        "retry" => set!(retry, parse_retry(cx, key, value).map(|r| (key.clone(), r))),
        "timeout" => set!(
            timeout,
            parse_duration(cx, key, value).map(|d| (key.clone(), d))
        ),
        "condition" => set!(
            condition,
            match syn::parse2::<Expr>(value) {
                Ok(expr) => Some((key.clone(), expr)),
                Err(error) => {
                    cx.push(error);
                    None
                }
            }
        ),
        "effect" => set!(
            effect,
            parse_choice(
                cx,
                key,
                value,
                &[
                    ("external", Effect::External),
                    ("internal", Effect::Internal)
                ]
            )
            .map(|v| (key.clone(), v))
        ),
        "idempotent" => set!(
            idempotent,
            match syn::parse2::<syn::LitBool>(value.clone()) {
                Ok(lit) => Some((key.clone(), lit.value)),
                Err(_) => {
                    cx.error(
                        first_span(&value),
                        "expected `true` or `false` for `idempotent`",
                    );
                    None
                }
            }
        ),
        "assignee" | "prompt" => {
            let lit = match syn::parse2::<LitStr>(value.clone()) {
                Ok(lit) if lit.value().trim().is_empty() => {
                    cx.error(lit.span(), format!("`{name}` must not be empty"));
                    None
                }
                Ok(lit) => Some((key.clone(), lit)),
                Err(_) => {
                    cx.error(
                        first_span(&value),
                        format!("expected a string literal for `{name}`, e.g. `{name}: \"trust_and_safety_team\"`"),
                    );
                    None
                }
            };
            if name == "assignee" {
                set!(assignee, lit)
            } else {
                set!(prompt, lit)
            }
        }
        "on_timeout" => set!(
            on_timeout,
            parse_on_timeout(cx, value).map(|v| (key.clone(), v))
        ),
        _ => cx.error(key.span(), format!("unknown key `{name}`")),
    }
}

/// What the choices of a key mean, for a `help:` when no choice is a near miss.
fn choice_help(key: &Ident) -> Option<String> {
    let help = match key.to_string().as_str() {
        "on_failure" => "`abort` fails the run and compensates; `continue` goes on with this step's output absent",
        "effect" => "`external` marks a side effect outside the workflow; `internal` (the default) marks none",
        "backoff" => "`fixed` waits `initial` each time, `linear` adds `initial` per retry, `exponential` multiplies by `multiplier`",
        _ => return None,
    };
    Some(help.to_owned())
}

/// `` `a`, `b` or `c` ``.
fn one_of(choices: &[&str]) -> String {
    match choices.split_last() {
        Some((last, [])) => format!("`{last}`"),
        Some((last, rest)) => format!("{} or `{last}`", list(rest)),
        None => String::new(),
    }
}

fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn first_span(tokens: &TokenStream) -> Span {
    tokens
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |tt| tt.span())
}

fn parse_call(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<CallAst> {
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
    let mut args = Vec::new();
    for arg in call.args {
        match arg {
            Expr::Path(path) if path.qself.is_none() && path.path.get_ident().is_some() => {
                if let Some(ident) = path.path.get_ident() {
                    args.push(ArgAst::Name(ident.clone()));
                }
            }
            Expr::Lit(_) => args.push(ArgAst::Literal(Box::new(arg))),
            Expr::Unary(syn::ExprUnary {
                op: syn::UnOp::Neg(_),
                ref expr,
                ..
            }) if matches!(**expr, Expr::Lit(_)) => args.push(ArgAst::Literal(Box::new(arg))),
            other => cx.error_spanned(
                &other,
                "an argument must name a step, a workflow input, `env` or `ctx`, or be a literal\n\
                 help: compute derived values inside the action, or in a step of their own",
            ),
        }
    }
    Some(CallAst {
        key: key.clone(),
        path: func.path,
        args,
    })
}

/// Parses `[a, b, c]`. Keywords are accepted as names (`unsafe` is an error kind), so
/// that a wrong name gets a precise error from the check that knows the valid ones.
fn parse_ident_list(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<Vec<Ident>> {
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

fn parse_choice<T: Copy>(
    cx: &Ctxt,
    key: &Ident,
    value: TokenStream,
    choices: &[(&str, T)],
) -> Option<T> {
    let span = first_span(&value);
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    match Ident::parse_any.parse2(value) {
        Ok(ident) => {
            let text = ident.to_string();
            if let Some((_, choice)) = choices.iter().find(|(name, _)| *name == text) {
                return Some(*choice);
            }
            let help = did_you_mean(&text, names.iter().copied()).or_else(|| choice_help(key));
            cx.error_help(
                ident.span(),
                format!(
                    "unknown `{key}` value `{text}`; expected {}",
                    one_of(&names)
                ),
                help,
            );
            None
        }
        Err(_) => {
            cx.error_help(
                span,
                format!("`{key}` expects {}", one_of(&names)),
                choice_help(key),
            );
            None
        }
    }
}

fn parse_on_timeout(cx: &Ctxt, value: TokenStream) -> Option<OnTimeoutAst> {
    let span = first_span(&value);
    let choices = ["escalate(\"group\")", "abort", "approve", "reject"];
    let expected = format!("expected {}", one_of(&choices));
    match syn::parse2::<Expr>(value) {
        Ok(Expr::Path(path)) if path.path.get_ident().is_some() => {
            let ident = path
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            match ident.as_str() {
                "abort" => Some(OnTimeoutAst::Abort),
                "approve" => Some(OnTimeoutAst::Approve),
                "reject" => Some(OnTimeoutAst::Reject),
                "escalate" => {
                    cx.error(
                        span,
                        "`escalate` needs the group to escalate to\nhelp: write `on_timeout: escalate(\"trust_and_safety_leads\")`",
                    );
                    None
                }
                other => {
                    let help = did_you_mean(other, ["escalate", "abort", "approve", "reject"])
                        .unwrap_or_else(|| "escalate to a group with `escalate(\"group\")`".into());
                    cx.error(
                        span,
                        format!("unknown `on_timeout` value `{other}`; {expected}\nhelp: {help}"),
                    );
                    None
                }
            }
        }
        Ok(Expr::Call(call)) if matches!(&*call.func, Expr::Path(p) if p.path.is_ident("escalate")) =>
        {
            let args: Vec<_> = call.args.iter().collect();
            match args.as_slice() {
                [Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(group),
                    ..
                })] => {
                    if group.value().trim().is_empty() {
                        cx.error(group.span(), "the escalation group must not be empty");
                        None
                    } else {
                        Some(OnTimeoutAst::Escalate(group.clone()))
                    }
                }
                [other] => {
                    let shown = other.to_token_stream().to_string();
                    cx.error(
                        other.span(),
                        format!("the escalation group must be a string literal\nhelp: write `escalate(\"{shown}\")`"),
                    );
                    None
                }
                _ => {
                    cx.error(
                        call.paren_token.span.join(),
                        "`escalate` takes exactly one group\nhelp: write `escalate(\"trust_and_safety_leads\")`",
                    );
                    None
                }
            }
        }
        _ => {
            cx.error(
                span,
                format!(
                    "`on_timeout` {expected}\nhelp: escalate to a group with `escalate(\"group\")`"
                ),
            );
            None
        }
    }
}

/// Parses `48h`, `30s`, `500ms`, `2m`, `1d` (also `1.5s`).
pub fn parse_duration(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<DurationLit> {
    let span = first_span(&value);
    let help = "write a number with a unit: `500ms`, `30s`, `2m`, `48h` or `1d`";
    let lit = match syn::parse2::<syn::Lit>(value) {
        Ok(lit) => lit,
        Err(_) => {
            cx.error(span, format!("`{key}` expects a duration\nhelp: {help}"));
            return None;
        }
    };
    let (digits, suffix) = match &lit {
        syn::Lit::Int(int) => (int.base10_digits().to_owned(), int.suffix().to_owned()),
        syn::Lit::Float(float) => (float.base10_digits().to_owned(), float.suffix().to_owned()),
        syn::Lit::Str(text) if !text.value().trim().is_empty() => {
            cx.error(
                lit.span(),
                format!(
                    "`{key}` expects a duration literal, not a string\nhelp: write it without quotes: `{}`",
                    text.value().trim()
                ),
            );
            return None;
        }
        _ => (String::new(), String::new()),
    };
    let Some(number) = digits.parse::<f64>().ok() else {
        cx.error(
            lit.span(),
            format!("`{key}` expects a duration\nhelp: {help}"),
        );
        return None;
    };
    let unit_ms = match suffix.as_str() {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        "" => {
            cx.error(
                lit.span(),
                format!(
                    "the duration `{digits}` has no unit\nhelp: add one: `{digits}ms`, `{digits}s`, `{digits}m`, `{digits}h` or `{digits}d`"
                ),
            );
            return None;
        }
        other => {
            let unit = match other {
                "sec" | "secs" | "second" | "seconds" => Some("s"),
                "min" | "mins" | "minute" | "minutes" => Some("m"),
                "hr" | "hrs" | "hour" | "hours" => Some("h"),
                "day" | "days" => Some("d"),
                "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => Some("ms"),
                _ => super::ctxt::suggest(other, ["ms", "s", "m", "h", "d"]),
            };
            let hint = unit.map_or_else(String::new, |unit| format!("write `{digits}{unit}`; "));
            cx.error(
                lit.span(),
                format!("unknown duration unit `{other}`\nhelp: {hint}the units are `ms`, `s`, `m`, `h` and `d`"),
            );
            return None;
        }
    };
    let ms = number * unit_ms;
    // Ten years is far beyond any sane timeout and keeps arithmetic on deadlines safe.
    if !ms.is_finite() || ms > 315_360_000_000.0 {
        cx.error(
            lit.span(),
            format!("the duration for `{key}` is too long (at most 3650d)"),
        );
        return None;
    }
    Some(DurationLit {
        value: Duration::from_micros((ms * 1000.0).round() as u64),
        span: lit.span(),
    })
}

fn parse_retry(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<RetryAst> {
    let span = first_span(&value);
    let mut tokens = value.into_iter();
    let group = match (tokens.next(), tokens.next()) {
        (Some(TokenTree::Group(group)), None) if group.delimiter() == Delimiter::Brace => group,
        _ => {
            cx.error(
                span,
                format!("`{key}` expects a block such as `{{ max_attempts: 3, backoff: exponential, initial: 1s, max: 60s }}`"),
            );
            return None;
        }
    };
    let mut retry = RetryAst::default();
    let parser = |input: ParseStream<'_>| -> syn::Result<()> {
        let mut seen: Vec<String> = Vec::new();
        while !input.is_empty() {
            let key: Ident = match input.parse() {
                Ok(key) => key,
                Err(error) => {
                    cx.push(syn::Error::new(
                        error.span(),
                        "expected a retry key such as `max_attempts:`",
                    ));
                    skip_field(input);
                    continue;
                }
            };
            if let Err(error) = input.parse::<Token![:]>() {
                cx.push(syn::Error::new(
                    error.span(),
                    format!("expected `:` after `{key}`"),
                ));
                skip_field(input);
                continue;
            }
            let value = take_value(input);
            let name = key.to_string();
            if !RETRY_KEYS.contains(&name.as_str()) {
                let help = did_you_mean(&name, RETRY_KEYS.iter().copied())
                    .unwrap_or_else(|| format!("a retry block takes {}", list(RETRY_KEYS)));
                cx.error(
                    key.span(),
                    format!("unknown retry key `{name}`\nhelp: {help}"),
                );
                continue;
            }
            if seen.contains(&name) {
                cx.error(
                    key.span(),
                    format!("duplicate retry key `{name}`\nhelp: remove one of the two"),
                );
                continue;
            }
            seen.push(name.clone());
            if value.is_empty() {
                cx.error(key.span(), format!("`{name}` needs a value"));
                continue;
            }
            let vspan = first_span(&value);
            match name.as_str() {
                "max_attempts" => match syn::parse2::<syn::LitInt>(value) {
                    Ok(int) => match int.base10_parse::<u32>() {
                        Ok(n) => retry.max_attempts = Some((n, int.span())),
                        Err(_) => cx.error(
                            int.span(),
                            "`max_attempts` must be a whole number from 1 to 100",
                        ),
                    },
                    Err(_) => cx.error(
                        vspan,
                        "`max_attempts` expects a whole number, e.g. `max_attempts: 3`",
                    ),
                },
                "backoff" => {
                    retry.backoff = parse_choice(
                        cx,
                        &key,
                        value,
                        &[
                            ("fixed", Backoff::Fixed),
                            ("linear", Backoff::Linear),
                            ("exponential", Backoff::Exponential),
                        ],
                    )
                    .map(|b| (b, vspan))
                }
                "initial" => retry.initial = parse_duration(cx, &key, value),
                "max" => retry.max = parse_duration(cx, &key, value),
                "deadline" => retry.deadline = parse_duration(cx, &key, value),
                "multiplier" => match syn::parse2::<syn::Lit>(value) {
                    Ok(syn::Lit::Float(f)) if f.suffix().is_empty() => {
                        match f.base10_parse::<f64>() {
                            Ok(v) => retry.multiplier = Some((v, f.span())),
                            Err(e) => cx.push(e),
                        }
                    }
                    Ok(syn::Lit::Int(i)) if i.suffix().is_empty() => {
                        match i.base10_parse::<u32>() {
                            Ok(v) => retry.multiplier = Some((f64::from(v), i.span())),
                            Err(e) => cx.push(e),
                        }
                    }
                    _ => cx.error(vspan, "`multiplier` expects a number such as `2` or `1.5`"),
                },
                "jitter" => retry.jitter = parse_jitter(cx, value).map(|j| (j, vspan)),
                "retry_on" => {
                    if let Some(idents) = parse_ident_list(cx, &key, value) {
                        let mut kinds = Vec::new();
                        for ident in idents {
                            let text = ident.to_string();
                            match text.parse::<ErrorKind>() {
                                Ok(kind) => kinds.push((kind, ident.span())),
                                Err(_) => {
                                    let names = ErrorKind::ALL.map(ErrorKind::as_str);
                                    let help = did_you_mean(&text, names.iter().copied())
                                        .unwrap_or_else(|| {
                                            format!("the kinds are {}", list(&names))
                                        });
                                    cx.error(
                                        ident.span(),
                                        format!("unknown error kind `{text}`\nhelp: {help}"),
                                    );
                                }
                            }
                        }
                        retry.retry_on = Some(kinds);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    };
    if let Err(error) = parser.parse2(group.stream()) {
        cx.push(error);
    }
    Some(retry)
}

fn parse_jitter(cx: &Ctxt, value: TokenStream) -> Option<Jitter> {
    let span = first_span(&value);
    let expected = "`jitter` expects `none`, `full`, `equal` or a percentage such as `10%`";
    let tokens: Vec<TokenTree> = value.into_iter().collect();
    match tokens.as_slice() {
        [TokenTree::Ident(ident)] => match ident.to_string().as_str() {
            "none" => Some(Jitter::None),
            "full" => Some(Jitter::Full),
            "equal" => Some(Jitter::Equal),
            other => {
                let help = did_you_mean(other, ["none", "full", "equal"])
                    .map_or_else(String::new, |h| format!("\nhelp: {h}"));
                cx.error(ident.span(), format!("{expected}{help}"));
                None
            }
        },
        [TokenTree::Literal(lit), TokenTree::Punct(percent)] if percent.as_char() == '%' => {
            match lit.to_string().parse::<u32>() {
                Ok(n) if n <= 100 => Some(Jitter::Percent(n as u8)),
                Ok(n) => {
                    cx.error(
                        lit.span(),
                        format!("`jitter: {n}%` would take off more than the whole delay\nhelp: use a percentage from 0% to 100%; `full` is 100%"),
                    );
                    None
                }
                Err(_) => {
                    cx.error(
                        lit.span(),
                        "a jitter percentage must be a whole number from 0% to 100%\nhelp: write it like `10%`",
                    );
                    None
                }
            }
        }
        _ => {
            cx.error(span, expected);
            None
        }
    }
}

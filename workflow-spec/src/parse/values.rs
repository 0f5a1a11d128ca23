//! Parsers of field values: choices, `on_timeout`, durations, retry blocks and jitter.

use std::time::Duration;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::spanned::Spanned;
use syn::{Expr, Ident, Token};

use super::ast::{skip_field, take_value, DurationLit, OnTimeoutAst, RetryAst, RETRY_KEYS};
use super::calls::parse_ident_list;
use super::ctxt::{did_you_mean, Ctxt};
use crate::kind::ErrorKind;
use crate::retry::{Backoff, Jitter};

/// `` `a`, `b` or `c` ``.
pub(super) fn one_of(choices: &[&str]) -> String {
    match choices.split_last() {
        Some((last, [])) => format!("`{last}`"),
        Some((last, rest)) => format!("{} or `{last}`", list(rest)),
        None => String::new(),
    }
}

pub(super) fn list(keys: &[&str]) -> String {
    keys.iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn first_span(tokens: &TokenStream) -> Span {
    tokens
        .clone()
        .into_iter()
        .next()
        .map_or_else(Span::call_site, |tt| tt.span())
}

/// One of `choices`, by name; anything else is an error with the nearest choice.
pub(super) fn parse_choice<T: Clone>(
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
                return Some(choice.clone());
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

/// A human step's `on_timeout`: `escalate("group")`, `abort`, `approve` or `reject`.
pub(super) fn parse_on_timeout(cx: &Ctxt, value: TokenStream) -> Option<OnTimeoutAst> {
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

/// An event's `on_timeout`: `abort` or `continue`. A human step's escalation or decision
/// is refused with a word on why: an event has nobody to escalate to or decide for.
pub(super) fn parse_event_timeout(
    cx: &Ctxt,
    key: &Ident,
    value: TokenStream,
) -> Option<OnTimeoutAst> {
    let span = first_span(&value);
    let word = match syn::parse2::<Expr>(value.clone()) {
        Ok(Expr::Call(call)) => call.func.to_token_stream().to_string(),
        Ok(Expr::Path(path)) => path.to_token_stream().to_string(),
        _ => String::new(),
    };
    if matches!(word.as_str(), "escalate" | "approve" | "reject") {
        cx.error(
            span,
            format!("an event's `on_timeout` is `abort` or `continue`; `{word}` is for human checkpoints\nhelp: `abort` fails the run; `continue` goes on without the payload (downstream sees `None`)"),
        );
        return None;
    }
    parse_choice(
        cx,
        key,
        value,
        &[
            ("abort", OnTimeoutAst::Abort),
            ("continue", OnTimeoutAst::Continue),
        ],
    )
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

/// A `retry: { ... }` block, key by key.
pub(super) fn parse_retry(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<RetryAst> {
    let mut retry = RetryAst::default();
    keyed_block(
        cx,
        key,
        value,
        &Block {
            what: "retry",
            keys: RETRY_KEYS,
            example: "{ max_attempts: 3, backoff: exponential, initial: 1s, max: 60s }",
            first_key: "max_attempts",
        },
        |key, value| {
            let Some(value) = value else {
                return;
            };
            let name = key.to_string();
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
        },
    )?;
    Some(retry)
}

/// The shape of a `key: { name: value, ... }` block: its keys and how to write it.
pub(super) struct Block<'a> {
    /// What the block is, in messages: `retry`, `schedule`.
    pub(super) what: &'a str,
    /// The keys it takes.
    pub(super) keys: &'a [&'a str],
    /// A whole example: `{ max_attempts: 3 }`.
    pub(super) example: &'a str,
    /// The key the message for a malformed field names: `max_attempts`.
    pub(super) first_key: &'a str,
}

/// Reads a `key: { name: value, ... }` block, giving `field` each well-formed, known,
/// first-written key with its value as it comes (`None` when it has none: reported here,
/// but the key still counts as written). Malformed fields, unknown keys (with a
/// suggestion) and duplicates are reported and left out. `None` when the value is not a
/// block at all.
pub(super) fn keyed_block(
    cx: &Ctxt,
    key: &Ident,
    value: TokenStream,
    block: &Block<'_>,
    mut field: impl FnMut(Ident, Option<TokenStream>),
) -> Option<()> {
    let span = first_span(&value);
    let mut tokens = value.into_iter();
    let group = match (tokens.next(), tokens.next()) {
        (Some(TokenTree::Group(group)), None) if group.delimiter() == Delimiter::Brace => group,
        _ => {
            cx.error(
                span,
                format!("`{key}` expects a block such as `{}`", block.example),
            );
            return None;
        }
    };
    let what = block.what;
    let mut seen: Vec<String> = Vec::new();
    let parser = |input: ParseStream<'_>| -> syn::Result<()> {
        while !input.is_empty() {
            let key: Ident = match input.parse() {
                Ok(key) => key,
                Err(error) => {
                    cx.push(syn::Error::new(
                        error.span(),
                        format!("expected a {what} key such as `{}:`", block.first_key),
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
            if !block.keys.contains(&name.as_str()) {
                let help = did_you_mean(&name, block.keys.iter().copied())
                    .unwrap_or_else(|| format!("a {what} block takes {}", list(block.keys)));
                cx.error(
                    key.span(),
                    format!("unknown {what} key `{name}`\nhelp: {help}"),
                );
                continue;
            }
            if seen.contains(&name) {
                cx.error(
                    key.span(),
                    format!("duplicate {what} key `{name}`\nhelp: remove one of the two"),
                );
                continue;
            }
            seen.push(name.clone());
            if value.is_empty() {
                cx.error(key.span(), format!("`{name}` needs a value"));
                field(key, None);
                continue;
            }
            field(key, Some(value));
        }
        Ok(())
    };
    if let Err(error) = parser.parse2(group.stream()) {
        cx.push(error);
    }
    Some(())
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

/// What the choices of a key mean, for a `help:` when no choice is a near miss.
pub(super) fn choice_help(key: &Ident) -> Option<String> {
    let help = match key.to_string().as_str() {
        "on_failure" => "`abort` fails the run and compensates; `continue` goes on with this step's output absent",
        "effect" => "`external` marks a side effect outside the workflow; `internal` (the default) marks none",
        "backoff" => "`fixed` waits `initial` each time, `linear` adds `initial` per retry, `exponential` multiplies by `multiplier`",
        "on_timeout" => "`abort` fails the run; `continue` goes on without the payload (downstream sees `None`)",
        "on_item_failure" => "`abort` fails the step when an item fails; `skip` leaves that item's output `None` and goes on",
        _ => return None,
    };
    Some(help.to_owned())
}

//! Workflow-level keys, written before the first step: `schedule: { ... }` here,
//! `search: [..]` and `retention: 30d` in [`search`](super::search).
//!
//! The parser here reads syntax only; the values are checked by
//! [`check::schedule`](super::check) with the same functions the runtime validates a
//! schedule with ([`crate::schedule`]).
//!
//! The nodes hold syn types, which implement `Debug` only with syn's `extra-traits`.
#![allow(missing_debug_implementations)]

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Ident, LitStr, Token};

use super::ast::{skip_field, take_value, DurationLit};
use super::ctxt::{did_you_mean, Ctxt};
use super::values::{first_span, keyed_block, list, one_of, parse_choice, parse_duration, Block};
use crate::schedule::{Catchup, DstGap, Overlap};

/// The keys a workflow takes before its first step.
pub const WORKFLOW_KEYS: &[&str] = &[
    "schedule",
    "search",
    "retention",
    "concurrency",
    "priority",
    "debounce",
];

/// The keys of a `schedule: { ... }` block.
pub const SCHEDULE_KEYS: &[&str] = &[
    "cron", "tz", "overlap", "catchup", "window", "dst_gap", "jitter",
];

/// `schedule: { ... }` as written, each value with its span.
#[derive(Clone)]
pub struct ScheduleAst {
    /// The `schedule` key, for spans.
    pub key: Ident,
    /// `cron: "0 9 * * MON-FRI"`.
    pub cron: Option<LitStr>,
    /// Whether a `cron` key was written (its value may have been refused).
    pub cron_written: bool,
    /// `tz: "Europe/Berlin"`.
    pub tz: Option<LitStr>,
    /// `overlap: skip | buffer_one | allow | cancel_previous`.
    pub overlap: Option<(Overlap, Span)>,
    /// `catchup: latest | all(max: N) | none`, with the span of `N` for `all`.
    pub catchup: Option<(Catchup, Span)>,
    /// `window: 6h`.
    pub window: Option<DurationLit>,
    /// `dst_gap: next_valid | skip`.
    pub dst_gap: Option<(DstGap, Span)>,
    /// `jitter: 30s`.
    pub jitter: Option<DurationLit>,
}

/// The workflow-level keys read before the first step.
#[derive(Default, Clone)]
pub struct WorkflowKeys {
    /// `schedule: { ... }`.
    pub schedule: Option<ScheduleAst>,
    /// `search: [order.customer_id, ...]`.
    pub search: Option<super::search::SearchAst>,
    /// `retention: 30d`.
    pub retention: Option<super::search::RetentionAst>,
    /// `concurrency`, `priority` and `debounce`.
    pub flow: super::flow::WorkflowFlow,
}

/// Whether the next tokens are `key:` (a workflow-level key) rather than an item.
pub(super) fn at_key(input: ParseStream<'_>) -> bool {
    input.peek(Ident) && input.peek2(Token![:]) && !input.peek2(Token![::])
}

/// Reads one `key: value,` at the top of a workflow body into `keys`.
pub(super) fn parse_workflow_key(
    cx: &Ctxt,
    input: ParseStream<'_>,
    keys: &mut WorkflowKeys,
    after_steps: bool,
) {
    let Ok(key) = input.parse::<Ident>() else {
        skip_field(input);
        return;
    };
    let _ = input.parse::<Token![:]>();
    let value = take_value(input);
    let name = key.to_string();
    if name == "rate" {
        cx.error(
            key.span(),
            "`rate` limits how often one step's attempts start, so it is a step key\nhelp: move `rate: { key: ..., limit: ..., per: ... }` into the step that calls the rate-limited service; a workflow limits its runs with `concurrency: { key: ..., limit: ... }`",
        );
        return;
    }
    if !WORKFLOW_KEYS.contains(&name.as_str()) {
        let help = did_you_mean(&name, WORKFLOW_KEYS.iter().copied()).unwrap_or_else(|| {
            format!(
                "a workflow takes {} before its first step; steps start with `step`, `human` or `event`",
                list(WORKFLOW_KEYS)
            )
        });
        cx.error(
            key.span(),
            format!("unknown workflow key `{name}`\nhelp: {help}"),
        );
        return;
    }
    if after_steps {
        cx.error(
            key.span(),
            format!("`{name}` is a workflow-level key and must come before the first step\nhelp: move `{name}: ...` to the top of the workflow's body"),
        );
        return;
    }
    let taken = match name.as_str() {
        "search" => keys.search.is_some(),
        "retention" => keys.retention.is_some(),
        "concurrency" => keys.flow.concurrency.is_some(),
        "priority" => keys.flow.priority.is_some(),
        "debounce" => keys.flow.debounce.is_some(),
        _ => keys.schedule.is_some(),
    };
    if taken {
        let help = match name.as_str() {
            "search" => "list every entry in one `search: [..]`",
            "retention" => "a workflow has one retention",
            "concurrency" | "priority" | "debounce" => "remove one of the two",
            _ => "a workflow has one schedule; create more at run time with `Engine::schedules()`",
        };
        cx.error(
            key.span(),
            format!("duplicate workflow key `{name}`\nhelp: {help}"),
        );
        return;
    }
    match name.as_str() {
        "search" => keys.search = super::search::parse_search(cx, &key, value),
        "retention" => keys.retention = super::search::parse_retention(cx, &key, value),
        "concurrency" => keys.flow.concurrency = super::flow::parse_limit(cx, &key, value, true),
        "debounce" => keys.flow.debounce = super::flow::parse_limit(cx, &key, value, true),
        "priority" => {
            keys.flow.priority = super::flow::parse_priority(cx, value).map(|p| (key.clone(), p))
        }
        _ => keys.schedule = parse_schedule(cx, &key, value),
    }
}

fn parse_schedule(cx: &Ctxt, key: &Ident, value: TokenStream) -> Option<ScheduleAst> {
    let mut schedule = ScheduleAst {
        key: key.clone(),
        cron: None,
        cron_written: false,
        tz: None,
        overlap: None,
        catchup: None,
        window: None,
        dst_gap: None,
        jitter: None,
    };
    keyed_block(
        cx,
        key,
        value,
        &Block {
            what: "schedule",
            keys: SCHEDULE_KEYS,
            example: "{ cron: \"0 9 * * MON-FRI\", tz: \"Europe/Berlin\" }",
            first_key: "cron",
        },
        |key, value| {
            let name = key.to_string();
            schedule.cron_written |= name == "cron";
            let Some(value) = value else {
                return;
            };
            let vspan = first_span(&value);
            match name.as_str() {
                "cron" | "tz" => match syn::parse2::<LitStr>(value) {
                    Ok(text) if name == "cron" => schedule.cron = Some(text),
                    Ok(text) => schedule.tz = Some(text),
                    Err(_) => {
                        let example = if name == "cron" {
                            "cron: \"0 9 * * MON-FRI\""
                        } else {
                            "tz: \"Europe/Berlin\""
                        };
                        cx.error(
                            vspan,
                            format!("`{name}` expects a string\nhelp: write e.g. `{example}`"),
                        );
                    }
                },
                "overlap" => {
                    schedule.overlap = parse_choice(
                        cx,
                        &key,
                        value,
                        &[
                            ("skip", Overlap::Skip),
                            ("buffer_one", Overlap::BufferOne),
                            ("allow", Overlap::Allow),
                            ("cancel_previous", Overlap::CancelPrevious),
                        ],
                    )
                    .map(|o| (o, vspan))
                }
                "dst_gap" => {
                    schedule.dst_gap = parse_choice(
                        cx,
                        &key,
                        value,
                        &[("next_valid", DstGap::NextValid), ("skip", DstGap::Skip)],
                    )
                    .map(|g| (g, vspan))
                }
                "catchup" => schedule.catchup = parse_catchup(cx, value),
                "window" => schedule.window = parse_duration(cx, &key, value),
                "jitter" => schedule.jitter = parse_duration(cx, &key, value),
                _ => {}
            }
        },
    )?;
    Some(schedule)
}

/// `latest`, `none` or `all(max: N)`.
fn parse_catchup(cx: &Ctxt, value: TokenStream) -> Option<(Catchup, Span)> {
    let span = first_span(&value);
    let choices = ["latest", "all(max: N)", "none"];
    let expected = format!(
        "`catchup` expects {}\nhelp: `latest` runs the newest missed tick, `all(max: 10)` up to ten of them, `none` none; older ones are recorded as missed",
        one_of(&choices)
    );
    let mut tokens = value.into_iter();
    let first = tokens.next();
    let second = tokens.next();
    let rest = tokens.next();
    match (first, second, rest) {
        (Some(TokenTree::Ident(ident)), None, None) => match ident.to_string().as_str() {
            "latest" => Some((Catchup::Latest, ident.span())),
            "none" => Some((Catchup::None, ident.span())),
            "all" => {
                cx.error(
                    ident.span(),
                    "`catchup: all` needs a bound\nhelp: write `all(max: 10)`: a long outage must not start a storm of runs",
                );
                None
            }
            other => {
                let help = did_you_mean(other, ["latest", "none", "all"])
                    .unwrap_or_else(|| "write `latest`, `all(max: 10)` or `none`".into());
                cx.error(
                    ident.span(),
                    format!(
                        "unknown `catchup` value `{other}`; expected {}\nhelp: {help}",
                        one_of(&choices)
                    ),
                );
                None
            }
        },
        (Some(TokenTree::Ident(ident)), Some(TokenTree::Group(group)), None)
            if ident == "all" && group.delimiter() == Delimiter::Parenthesis =>
        {
            let inner = |input: ParseStream<'_>| -> syn::Result<(u32, Span)> {
                let key: Ident = input.parse()?;
                if key != "max" {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("unknown key `{key}` in `all(...)`\nhelp: write `all(max: 10)`"),
                    ));
                }
                input.parse::<Token![:]>()?;
                let int: syn::LitInt = input.parse()?;
                let max = int.base10_parse::<u32>().map_err(|_| {
                    syn::Error::new(
                        int.span(),
                        "`max` expects a whole number, e.g. `all(max: 10)`",
                    )
                })?;
                let _ = input.parse::<Option<Token![,]>>()?;
                Ok((max, int.span()))
            };
            match inner.parse2(group.stream()) {
                Ok((max, span)) => Some((Catchup::All { max }, span)),
                Err(error) => {
                    let message = error.to_string();
                    let message = if message.contains("help:") {
                        message
                    } else {
                        format!("{message}\nhelp: write `all(max: 10)`")
                    };
                    cx.error(error.span(), message);
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

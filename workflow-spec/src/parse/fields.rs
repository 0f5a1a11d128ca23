//! One `key: value` field of a step: which keys each kind of item takes, and the parser
//! of each key's value.

use proc_macro2::TokenStream;
use syn::{Expr, Ident, LitStr};

use super::ast::{Fields, StepKw, EVENT_KEYS, HUMAN_KEYS};
use super::calls::{parse_call, parse_child, parse_concurrency, parse_for_each, parse_ident_list};
use super::ctxt::{did_you_mean, Ctxt};
use super::human::{parse_approvals, parse_self_approval, parse_show, parse_title};
use super::values::{
    first_span, list, parse_choice, parse_duration, parse_event_timeout, parse_on_timeout,
    parse_retry,
};
use crate::model::{Effect, OnFailure, OnItemFailure};

/// Parses the value of `key` into `fields`, or records why it cannot: a key the item does
/// not take (with the nearest one, or what it takes), a duplicate key, a bad value.
pub(super) fn parse_field(
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
        let what = kw.what();
        let message = match (kw, name.as_str()) {
            (StepKw::Human, "retry") => format!(
                "human step `{id}` cannot be retried: a person decides once\nhelp: use `timeout` and `on_timeout: escalate(\"group\")` to chase a late decision"
            ),
            (StepKw::Human, "action" | "compensate" | "reconcile" | "effect" | "idempotent" | "spawn") => format!(
                "a human step has no `{name}`: it waits for a decision\nhelp: make it a `step` if it runs code; a human step takes {}",
                list(HUMAN_KEYS)
            ),
            (StepKw::Step, "assignee" | "on_timeout" | "prompt" | "approvals" | "self_approval" | "title" | "show") => format!(
                "`{name}` belongs to human checkpoints, not to `step {id}`\nhelp: write `human {id} -> Approval {{ ... }}` for a checkpoint"
            ),
            (StepKw::Event, "action" | "workflow" | "compensate" | "reconcile" | "effect" | "idempotent" | "for_each" | "spawn") => format!(
                "an event has no `{name}`: it waits for a payload sent into the run\nhelp: make it a `step` if it runs code; an event takes {}",
                list(EVENT_KEYS)
            ),
            (StepKw::Event, "retry") => format!(
                "event `{id}` cannot be retried: it waits once, until its `timeout`\nhelp: give the sender's side its retries; here choose `on_timeout: abort` or `continue`"
            ),
            (StepKw::Event, "on_failure") => format!(
                "event `{id}` fails only when its deadline passes, so it takes `on_timeout`, not `on_failure`\nhelp: write `on_timeout: continue` to go on without the payload (downstream sees `None`)"
            ),
            (StepKw::Event, "assignee" | "prompt" | "approvals" | "self_approval" | "title" | "show") => format!(
                "`{name}` belongs to human checkpoints, not to `event {id}`\nhelp: write `human {id} -> Approval {{ ... }}` for a checkpoint"
            ),
            (StepKw::Human | StepKw::Event, "concurrency" | "rate")
                if name == "rate" || value_is_block(&value) => format!(
                "{} `{id}` takes no `{name}`: it runs no code, so it has no attempts to limit\nhelp: put `{name}` on the `step` whose action calls the limited service",
                if kw == StepKw::Human { "human step" } else { "event" }
            ),
            (_, "priority" | "debounce" | "search" | "retention" | "schedule") => format!(
                "`{name}` is a workflow-level key, not a key of {what} `{id}`\nhelp: move `{name}: ...` to the top of the workflow's body, before the first step"
            ),
            (StepKw::Human, "workflow" | "for_each" | "concurrency" | "on_item_failure") => format!(
                "a human step has no `{name}`: only a `step` runs a child workflow or maps over items\nhelp: a human step takes {}",
                list(HUMAN_KEYS)
            ),
            (StepKw::Event, "concurrency" | "on_item_failure") => format!(
                "an event has no `{name}`: only a `step` with `for_each` maps over items\nhelp: an event takes {}",
                list(EVENT_KEYS)
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
                        kw.what()
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
        "spawn" => set!(
            spawn,
            match syn::parse2::<syn::LitBool>(value.clone()) {
                Ok(lit) => Some((key.clone(), lit.value)),
                Err(_) => {
                    cx.error(
                        first_span(&value),
                        "expected `true` or `false` for `spawn`\nhelp: `spawn: true` runs the action as a tokio task of its own, for CPU-heavy or blocking work",
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
        "on_timeout" if kw == StepKw::Event => set!(
            on_timeout,
            parse_event_timeout(cx, key, value).map(|v| (key.clone(), v))
        ),
        "on_timeout" => set!(
            on_timeout,
            parse_on_timeout(cx, value).map(|v| (key.clone(), v))
        ),
        "for_each" => set!(
            for_each,
            parse_for_each(cx, key, value).map(|v| (key.clone(), v))
        ),
        "concurrency" if value_is_block(&value) => set!(
            limit,
            super::flow::parse_limit(cx, key, value, false).map(|v| (key.clone(), v))
        ),
        "concurrency" => set!(
            concurrency,
            parse_concurrency(cx, key, value).map(|v| (key.clone(), v))
        ),
        "rate" => set!(
            rate,
            super::flow::parse_limit(cx, key, value, false).map(|v| (key.clone(), v))
        ),
        "on_item_failure" => set!(
            on_item_failure,
            parse_choice(
                cx,
                key,
                value,
                &[
                    ("abort", OnItemFailure::Abort),
                    ("skip", OnItemFailure::Skip)
                ]
            )
            .map(|v| (key.clone(), v))
        ),
        "workflow" => set!(workflow, parse_child(cx, key, value)),
        "approvals" => set!(
            approvals,
            parse_approvals(cx, key, value).map(|v| (key.clone(), v))
        ),
        "self_approval" => set!(
            self_approval,
            parse_self_approval(cx, key, value).map(|v| (key.clone(), v))
        ),
        "title" => set!(title, parse_title(cx, key, value).map(|v| (key.clone(), v))),
        "show" => set!(show, parse_show(cx, key, value).map(|v| (key.clone(), v))),
        _ => cx.error(key.span(), format!("unknown key `{name}`")),
    }
}

/// Whether a value is one `{ ... }` block: `concurrency: { key, limit }` limits attempts
/// across runs, `concurrency: 8` the items of a map in flight.
fn value_is_block(value: &TokenStream) -> bool {
    let mut tokens = value.clone().into_iter();
    matches!(
        (tokens.next(), tokens.next()),
        (Some(proc_macro2::TokenTree::Group(group)), None)
            if group.delimiter() == proc_macro2::Delimiter::Brace
    )
}

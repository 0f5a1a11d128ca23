//! The validator's policy checks without rustc: durations, retry policies, human
//! checkpoints, external effects and conditions, then every mistake of a spec reported
//! together and no panic on any input. (`validate.rs` has the lowered model, names and
//! keys.)

mod support;

use proptest::prelude::*;
use support::{assert_says, messages, one_error, spec, ONBOARDING};
use workflow_spec::parse::{check::condition_reads, parse_str};

// ------------------------------------------------------------------------------ helpers

/// A workflow with one input and one step `charge` with `fields` after its action.
fn one_step(fields: &str) -> String {
    format!("workflow W(order: Order) {{ step charge -> u64 {{ action: pay(order), {fields} }} }}")
}

/// A workflow of one human step with `fields`.
fn one_human(fields: &str) -> String {
    format!("workflow W() {{ human review -> Approval {{ {fields} }} }}")
}

const HUMAN_OK: &str = r#"assignee: "team", timeout: 48h, on_timeout: escalate("leads"),"#;

fn retry_error(retry: &str) -> String {
    one_error(&one_step(&format!("retry: {{ {retry} }},")))
}

// --------------------------------------------------------------------------- durations

#[test]
fn durations_need_a_known_unit() {
    let message = one_error(&one_step("timeout: 30,"));
    assert_says(&message, &["the duration `30` has no unit", "`30s`"]);
    let message = one_error(&one_step("timeout: 30sec,"));
    assert_says(&message, &["unknown duration unit `sec`", "write `30s`"]);
    let message = one_error(&one_step("timeout: 2mins,"));
    assert_says(&message, &["write `2m`"]);
    let message = one_error(&one_step("timeout: 5x,"));
    assert_says(&message, &["unknown duration unit `x`", "the units are"]);
    let message = one_error(&one_step("timeout: 0s,"));
    assert_says(&message, &["must be longer than zero"]);
    let message = one_error(&one_step(r#"timeout: "30s","#));
    assert_says(&message, &["not a string", "without quotes: `30s`"]);
    let message = one_error(&one_step("timeout: 3651d,"));
    assert_says(&message, &["too long"]);
    let message = one_error(&one_step("timeout: soon,"));
    assert_says(&message, &["`timeout` expects a duration"]);
}

// ------------------------------------------------------------------------------- retry

#[test]
fn retry_policies_are_sane() {
    assert_says(
        &retry_error("max_attempts: 0"),
        &["`max_attempts` must be at least 1"],
    );
    assert_says(&retry_error("max_attempts: 1000"), &["the limit is 100"]);
    assert_says(
        &retry_error("initial: 2m, max: 30s"),
        &["`initial: 2m` is longer than `max: 30s`"],
    );
    assert_says(
        &retry_error("max: 500ms"),
        &["`initial: 1s` is longer than `max: 500ms`"],
    );
    assert_says(&retry_error("multiplier: 0.5"), &["it must be at least 1"]);
    assert_says(
        &retry_error("initial: 10s, deadline: 5s"),
        &["`deadline: 5s` is not longer than the first delay (10s)"],
    );
    assert_says(
        &retry_error("max_attempts: 10, initial: 1s, max: 60s, deadline: 20s"),
        &[
            "10 attempts cannot fit in `deadline: 20s`",
            "lower `max_attempts` to 5",
        ],
    );
    assert_says(
        &retry_error("retry_on: [unavailable, unsafe]"),
        &["`unsafe` errors are permanent and are never retried"],
    );
    assert_says(
        &retry_error("max_attempt: 3"),
        &[
            "unknown retry key `max_attempt`",
            "did you mean `max_attempts`?",
        ],
    );
    assert_says(
        &retry_error("max_attempts: 2, max_attempts: 3"),
        &["duplicate retry key `max_attempts`"],
    );
    assert_says(
        &retry_error("retry_on: [rate_limit]"),
        &[
            "unknown error kind `rate_limit`",
            "did you mean `rate_limited`?",
        ],
    );
    assert_says(
        &retry_error("retry_on: timeout"),
        &[
            "`retry_on` expects a list of error kinds",
            "`retry_on: [timeout]`",
        ],
    );
    assert_says(
        &retry_error("jitter: 150%"),
        &["`jitter: 150%` would take off more than the whole delay"],
    );
    assert_says(
        &retry_error("jitter: half"),
        &["`jitter` expects `none`, `full`, `equal` or a percentage"],
    );
    assert_says(
        &retry_error("backoff: exponentail"),
        &["did you mean `exponential`?"],
    );
    let message = one_error(&one_human(&format!(
        "{HUMAN_OK} retry: {{ max_attempts: 3 }},"
    )));
    assert_says(&message, &["human step `review` cannot be retried"]);
}

#[test]
fn a_deadline_counts_the_attempt_timeouts() {
    // Delays 1s + 2s = 3s fit in 10s, but three 5s attempts do not.
    let fits = one_step("retry: { max_attempts: 3, jitter: none, deadline: 10s },");
    assert!(parse_str(&fits).errors.is_empty());
    let message = one_error(&one_step(
        "timeout: 5s, retry: { max_attempts: 3, jitter: none, deadline: 10s },",
    ));
    assert_says(&message, &["delays and timeouts add up to 18s"]);
}

// ------------------------------------------------------------------------------- human

#[test]
fn human_checkpoints_need_a_timeout_and_an_escalation_path() {
    let message = one_error(&one_human(r#"assignee: "team", on_timeout: abort,"#));
    assert_says(&message, &["human step `review` has no `timeout`"]);
    let message = one_error(&one_human(r#"assignee: "team", timeout: 1h,"#));
    assert_says(&message, &["human step `review` has no `on_timeout`"]);
    let message = one_error(&one_human("timeout: 1h, on_timeout: abort,"));
    assert_says(&message, &["human step `review` has no `assignee`"]);
    let message = one_error(&one_human(
        r#"assignee: "team", timeout: 1h, on_timeout: escalate(leads),"#,
    ));
    assert_says(
        &message,
        &[
            "the escalation group must be a string literal",
            r#"escalate("leads")"#,
        ],
    );
    let message = one_error(&one_human(
        r#"assignee: "team", timeout: 1h, on_timeout: escalate,"#,
    ));
    assert_says(&message, &["`escalate` needs the group to escalate to"]);
    let message = one_error(&one_human(
        r#"assignee: "team", timeout: 1h, on_timeout: escalate(),"#,
    ));
    assert_says(&message, &["`escalate` takes exactly one group"]);
    let message = one_error(&one_human(
        r#"assignee: "team", timeout: 1h, on_timeout: escalate(""),"#,
    ));
    assert_says(&message, &["the escalation group must not be empty"]);
    let message = one_error(&one_human(
        r#"assignee: "team", timeout: 1h, on_timeout: escalate("team"),"#,
    ));
    assert_says(&message, &["`review` escalates to its own assignee `team`"]);
    let message = one_error(&one_human(
        r#"assignee: "team", timeout: 1h, on_timeout: aprove,"#,
    ));
    assert_says(
        &message,
        &[
            "unknown `on_timeout` value `aprove`",
            "did you mean `approve`?",
        ],
    );
    let message = one_error(&one_human(
        r#"assignee: "", timeout: 1h, on_timeout: abort,"#,
    ));
    assert_says(&message, &["`assignee` must not be empty"]);
}

// ----------------------------------------------------------------------------- effects

#[test]
fn retried_external_effects_must_be_idempotent_or_reconciled() {
    let message = one_error(&one_step("effect: external, retry: { max_attempts: 3 },"));
    assert_says(
        &message,
        &["retries an external effect that is neither idempotent nor reconciled"],
    );
    // The default policy retries too.
    let message = one_error(&one_step("effect: external, retry: { initial: 1s },"));
    assert_says(&message, &["neither idempotent nor reconciled"]);
    for fine in [
        "effect: external,",
        "effect: external, retry: { max_attempts: 1 },",
        "effect: external, idempotent: true, retry: { max_attempts: 3 },",
        "effect: external, reconcile: find(ctx), retry: { max_attempts: 3 },",
        "effect: internal, retry: { max_attempts: 3 },",
    ] {
        spec(&one_step(fine));
    }
}

#[test]
fn compensations_and_reconciles_read_only_what_they_may() {
    let message = one_error(&one_step("compensate: undo(chargee),"));
    assert_says(
        &message,
        &[
            "unknown step or input `chargee` in argument of `compensate`",
            "did you mean `charge`?",
        ],
    );
    let message = one_error(
        "workflow W() {
            step seat -> u64 { action: f(), }
            step charge -> u64 { action: f(), compensate: refund(charge, seat), }
        }",
    );
    assert_says(
        &message,
        &["`compensate` of step `charge` reads `seat`, which is not upstream of `charge`"],
    );
    let message = one_error(&one_step(
        "effect: external, retry: { max_attempts: 3 }, reconcile: find(charge),",
    ));
    assert_says(
        &message,
        &["`reconcile` runs before `charge` has an output"],
    );
    // Its own output, upstream steps, inputs, env and ctx are all fine.
    spec(
        "workflow W(order: Order) env E {
            step seat -> u64 { action: f(), }
            step charge -> u64 { action: f(seat), compensate: refund(env, ctx, order, charge, seat), }
        }",
    );
}

// -------------------------------------------------------------------------- conditions

#[test]
fn conditions_read_only_upstream_names() {
    let message = one_error(
        "workflow W(order: Order) { step ship -> () { action: f(), condition: ordr.total > 0, } }",
    );
    assert_says(
        &message,
        &[
            "unknown step or input `ordr` in the condition of `ship`",
            "did you mean `order`?",
        ],
    );
    let message = one_error(
        "workflow W() {
            step score -> u32 { action: f(), }
            step ship -> () { action: f(), condition: *score < 50, }
        }",
    );
    assert_says(
        &message,
        &[
            "the condition of `ship` reads `score`, which is not upstream of it",
            "depends_on: [score]",
        ],
    );
    let message = one_error(
        "workflow W() env E { step ship -> () { action: f(env), condition: env.enabled, } }",
    );
    assert_says(&message, &["the condition of `ship` cannot read `env`"]);
    let message =
        one_error("workflow W() { step ship -> u32 { action: f(), condition: *ship > 1, } }");
    assert_says(
        &message,
        &["the condition of `ship` cannot read its own output"],
    );
}

#[test]
fn conditions_may_bind_and_call() {
    // Names bound inside the condition and called functions are not reads of steps.
    spec(
        "workflow W(order: Order) {
            step score -> u32 { action: f(), on_failure: continue, }
            step ship -> () {
                action: f(),
                depends_on: [score],
                condition: is_big(order)
                    && score.is_some_and(|s| *s < 50)
                    && matches!(score, Some(s) if *s > 1)
                    && match score { Some(n) => { let m = *n; m > 2 } None => true }
                    && if let Some(k) = score { *k > 3 } else { true }
                    && { let total = order.total; total > 0 }
                    && { let mut sum = 0; for item in order.items.iter() { sum += item; } sum > 0 },
            }
        }",
    );
}

#[test]
fn condition_reads_lists_free_names_in_order() {
    let expr: syn::Expr = syn::parse_str(
        "a.x && helper(b) && c.iter().any(|item| *item == d) \
         && matches!(e, Some(bound) if bound > f) \
         && match g { Some(v) => v > 1, None => false } \
         && Status::Ok == h && true",
    )
    .expect("an expression");
    let names: Vec<String> = condition_reads(&expr)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(names, ["a", "b", "c", "d", "e", "g", "h"]);
}

// ---------------------------------------------------------------------- many mistakes

#[test]
fn every_mistake_is_reported_once() {
    let parsed = parse_str(
        r#"workflow W() {
            step a -> u32 { acton: f(), }
            step b -> u32 { action: f(a), timeout: 2min, }
            human c -> Approval { assignee: "t", depends_on: [b], timeout: 48h, }
        }"#,
    );
    let errors = messages(&parsed);
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert_says(&errors[0], &["unknown key `acton`"]);
    assert_says(&errors[1], &["unknown duration unit `min`", "write `2m`"]);
    assert_says(&errors[2], &["human step `c` has no `on_timeout`"]);
    assert!(parsed.spec.is_none());
    let names = parsed.names.expect("names are resolved despite errors");
    assert_eq!(names.steps, ["a", "b", "c"]);
}

#[test]
fn every_error_says_what_is_wrong_and_most_say_how_to_fix_it() {
    let sources = [
        one_step("timeout: 30,"),
        one_step("acton: g(),"),
        one_step("on_failure: ignore,"),
        one_human(r#"assignee: "team", timeout: 1h,"#),
        "workflow W() { step a -> () { action: g(), depends_on: [b], } }".to_owned(),
    ];
    for source in sources {
        let message = one_error(&source);
        let (what, help) = message.split_once("\nhelp: ").expect("a help line");
        assert!(
            !what.trim().is_empty() && !help.trim().is_empty(),
            "{message}"
        );
        assert!(!what.contains('\n'), "one sentence: {message}");
    }
}

// ------------------------------------------------------------------------ robustness

#[test]
fn broken_headers_and_bodies_give_errors_not_panics() {
    for source in [
        "",
        "workflow",
        "workflow W",
        "workflow W(",
        "workflow W() {",
        "workflow W(a) { }",
        "workflow W(a: ) { }",
        "workflow W() env { }",
        "workflow W() envy S { }",
        "flow W() { }",
        "workflow W() { step }",
        "workflow W() { step a }",
        "workflow W() { step a -> }",
        "workflow W() { step a -> u32 }",
        "workflow W() { step a -> u32 { action } }",
        "workflow W() { step a -> u32 { action: } }",
        "workflow W() { step a -> u32 { : f() } }",
        "workflow W() { step a -> u32 { action: f(), retry: 3 } }",
        "workflow W() { step a -> u32 { action: f(), retry: { max_attempts } } }",
        "workflow W() { step a -> u32 { action: f(), retry: { : 3 } } }",
        "workflow W() { step a -> u32 { action: f(), retry: { max_attempts: 99999999999 } } }",
        "workflow W() { step a -> u32 { action: f(), retry: { multiplier: 1e400 } } }",
        "workflow W() { step a -> u32 { action: f(), timeout: 1e400s } }",
        "workflow W() { step a -> u32 { action: (f)(), } }",
        "workflow W() { step a -> u32 { action: f(), condition: , } }",
        "workflow W() { step a -> u32 { action: f(), depends_on: [1, 2], } }",
        "workflow W() { human h -> Approval { on_timeout: escalate(1, 2), } }",
        "workflow W() { #[attr] step a -> u32 { action: f(), } }",
        "workflow W() { step a -> u32 { action: f(), } } trailing",
        "workflow W() { step a -> u32 { action: f(), } step }",
    ] {
        let parsed = parse_str(source);
        assert!(!parsed.errors.is_empty(), "no error for {source:?}");
        assert!(parsed.spec.is_none());
        assert_eq!(parsed.ast.is_some(), parsed.names.is_some());
    }
    // Unbalanced delimiters fail in the lexer, before the parser.
    assert!(!parse_str("workflow W() { step a -> u32 { ")
        .errors
        .is_empty());
}

proptest! {
    /// Dropping any run of words from a valid spec (and maybe gluing the ends together)
    /// never panics, and a spec is lowered exactly when there is no error.
    #[test]
    fn mangled_specs_never_panic(start in 0usize..400, len in 1usize..6, glue in any::<bool>()) {
        // Words with their trailing whitespace, so lines (and `///` docs) survive.
        let words: Vec<&str> = ONBOARDING.split_inclusive(char::is_whitespace).collect();
        let start = start % words.len();
        let end = (start + len).min(words.len());
        let mut source = words[..start].concat();
        if glue {
            source.truncate(source.trim_end().len());
        }
        source.push_str(&words[end..].concat());
        let parsed = parse_str(&source);
        prop_assert_eq!(parsed.spec.is_some(), parsed.errors.is_empty());
        prop_assert_eq!(parsed.ast.is_some(), parsed.names.is_some());
        if let Some(spec) = parsed.spec {
            let deps: Vec<Vec<usize>> = spec.steps.iter().map(|s| s.deps.clone()).collect();
            prop_assert!(workflow_spec::graph::topological_order(&deps).is_ok());
        }
    }
}

//! Flow control keys: a workflow's `concurrency`, `priority` and `debounce`, a step's
//! `concurrency: { .. }` and `rate`: lowered into the model, checked at their tokens,
//! outside the behavioural fingerprint, the same in a spec file, and exported.

use std::time::Duration;

use workflow_spec::parse::parse_str;
use workflow_spec::yaml::{check, export, Options};
use workflow_spec::{Debounce, LimitKey, OnLimit, Rate, RunConcurrency, Spec, StepConcurrency};

const CHARGE: &str = r#"
    pub workflow Charge(order: Order) env Shop {
        concurrency: { key: order.customer_id, limit: 1, on_limit: cancel_previous },
        priority: order.tier,
        debounce: { key: order.cart_id, window: 5s, max_wait: 1m },
        step quote -> Quote { action: psp::quote(env, order) }
        step charge -> Receipt {
            action: psp::charge(env, order, quote),
            concurrency: { key: "psp", limit: 5 },
            rate: { key: quote.merchant_id, limit: 100, per: 1m, burst: 20 },
        }
    }
"#;

fn spec(source: &str) -> Spec {
    let parsed = parse_str(source);
    let errors: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "expected no errors, got {errors:#?}");
    parsed.spec.expect("a spec without errors is lowered")
}

fn errors(source: &str) -> Vec<String> {
    parse_str(source)
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn the_keys_are_lowered_with_their_defaults() {
    let charge = spec(CHARGE);
    assert_eq!(
        charge.concurrency,
        Some(RunConcurrency {
            key: LimitKey::Path("order.customer_id".into()),
            limit: 1,
            on_limit: OnLimit::CancelPrevious,
        })
    );
    assert_eq!(charge.priority.as_deref(), Some("order.tier"));
    assert_eq!(
        charge.debounce,
        Some(Debounce {
            key: LimitKey::Path("order.cart_id".into()),
            window: Duration::from_secs(5),
            max_wait: Some(Duration::from_secs(60)),
        })
    );
    assert_eq!(
        charge.steps[1].concurrency,
        Some(StepConcurrency {
            key: LimitKey::Static("psp".into()),
            limit: 5,
        })
    );
    assert_eq!(
        charge.steps[1].rate,
        Some(Rate {
            key: LimitKey::Path("quote.merchant_id".into()),
            limit: 100,
            per: Duration::from_secs(60),
            burst: 20,
        })
    );
    let plain = spec_with("concurrency: { key: \"all\", limit: 2 }, priority: -3,");
    assert_eq!(
        plain.concurrency.map(|c| (c.key, c.on_limit)),
        Some((LimitKey::Static("all".into()), OnLimit::Queue))
    );
    assert_eq!(plain.priority.as_deref(), Some("-3"));
    let rate = spec(
        "workflow W(order: Order) { step charge -> () { action: f(order), rate: { key: \"x\", limit: 3, per: 1s } } }",
    );
    assert_eq!(rate.steps[0].rate.as_ref().map(|r| r.burst), Some(1));
}

fn spec_with(keys: &str) -> Spec {
    spec(&format!(
        "workflow W(order: Order) {{ {keys} step charge -> () {{ action: f(order) }} }}"
    ))
}

#[test]
fn the_keys_are_outside_the_fingerprint() {
    let base = spec(CHARGE);
    let plain = spec(
        r#"
    pub workflow Charge(order: Order) env Shop {
        step quote -> Quote { action: psp::quote(env, order) }
        step charge -> Receipt { action: psp::charge(env, order, quote) }
    }
"#,
    );
    assert_eq!(base.fingerprint(), plain.fingerprint());
    let other = spec(
        &CHARGE
            .replace("limit: 1,", "limit: 7,")
            .replace("limit: 5 }", "limit: 50 }")
            .replace("burst: 20", "burst: 2"),
    );
    assert_ne!(other.concurrency, base.concurrency);
    assert_eq!(base.fingerprint(), other.fingerprint());
}

#[test]
fn the_keys_survive_the_json_the_macro_embeds() {
    let spec = spec(CHARGE);
    let json = serde_json::to_string(&spec).expect("serialises");
    let back: Spec = serde_json::from_str(&json).expect("deserialises");
    assert_eq!(back, spec);
}

#[test]
fn each_mistake_is_reported_with_help() {
    let cases = [
        (
            "concurrency: { key: order.id, limt: 1 },",
            "help: did you mean `limit`",
        ),
        (
            "concurrency: { key: order.id },",
            "`concurrency` needs `limit`",
        ),
        ("concurrency: { limit: 1 },", "`concurrency` needs `key`"),
        ("concurrency: { key: order.id, limit: 0 },", "`limit: 0`"),
        (
            "concurrency: { key: order.id, limit: 2000000 },",
            "at most 1000000",
        ),
        (
            "concurrency: { key: order.id, limit: 1, on_limit: cancel },",
            "`cancel_previous`",
        ),
        (
            "debounce: { key: order.id, window: 0s },",
            "`window` in `debounce` must be more than zero",
        ),
        (
            "debounce: { key: order.id, window: 1m, max_wait: 10s },",
            "shorter than `window`",
        ),
        (
            "debounce: { key: ordr.id, window: 1s },",
            "unknown input `ordr`",
        ),
        (
            "priority: order.tier * 2,",
            "not an input's field or a whole number",
        ),
        ("priority: env.tier,", "reserved"),
        (
            "rate: { key: order.id, limit: 1, per: 1s },",
            "`rate` limits how often one step's attempts start",
        ),
        (
            "concurrency: { key: order.id, limit: 1 }, concurrency: { key: order.id, limit: 2 },",
            "duplicate workflow key `concurrency`",
        ),
        (
            "concurrency: { key: 42, limit: 1 },",
            "not a string or a path",
        ),
        (
            "concurrency: { key: charge.id, limit: 1 },",
            "`charge` is a step",
        ),
    ];
    for (keys, expected) in cases {
        let found = errors(&format!(
            "workflow W(order: Order) {{ {keys} step charge -> () {{ action: f(order) }} }}"
        ));
        assert!(
            found.iter().any(|error| error.contains(expected)),
            "`{keys}`: expected an error containing {expected:?}, got {found:#?}"
        );
    }
    let step_cases = [
        (
            "rate: { key: order.id, limit: 1, per: 0s },",
            "`per` in `rate` must be more than zero",
        ),
        (
            "rate: { key: order.id, limit: 1, per: 1s, burst: 0 },",
            "`burst: 0`",
        ),
        (
            "rate: { key: later.id, limit: 1, per: 1s },",
            "not upstream of `charge`",
        ),
        (
            "concurrency: { key: charge.id, limit: 1 },",
            "its own output",
        ),
        (
            "concurrency: { key: oder.id, limit: 1 },",
            "did you mean `order`",
        ),
        (
            "debounce: { key: order.id, window: 1s },",
            "workflow-level key",
        ),
        ("priority: 3,", "workflow-level key"),
    ];
    for (keys, expected) in step_cases {
        let found = errors(&format!(
            "workflow W(order: Order) {{ step charge -> () {{ action: f(order), {keys} }} step later -> () {{ action: f(order) }} }}"
        ));
        assert!(
            found.iter().any(|error| error.contains(expected)),
            "`{keys}`: expected an error containing {expected:?}, got {found:#?}"
        );
    }
    let human = errors(
        "workflow W(order: Order) { human review -> Approval { assignee: \"ops\", timeout: 1h, on_timeout: reject, rate: { key: \"r\", limit: 1, per: 1s } } }",
    );
    assert!(
        human.iter().any(|e| e.contains("takes no `rate`")),
        "{human:#?}"
    );
    let child = errors(
        "workflow W(order: Order) { step ship -> ShipOut { workflow: Ship(order), concurrency: { key: \"c\", limit: 1 } } }",
    );
    assert!(
        child.iter().any(|e| e.contains("runs a child workflow")),
        "{child:#?}"
    );
}

fn options() -> Options {
    Options {
        actions: Some("crate::acts".into()),
        env: Some("Shop".into()),
        env_fallback: None,
    }
}

const YAML: &str = r#"name: charge
inputs:
  order: Order
concurrency:
  key: order.customer_id
  limit: 1
  on_limit: skip
priority: order.tier
debounce:
  key: order.cart_id
  window: 5s
steps:
  - id: charge
    action: charge
    inputs: [order]
    output: u32
    concurrency:
      key: "psp"
      limit: 5
    rate:
      key: order.merchant_id
      limit: 100
      per: 1m
"#;

#[test]
fn a_spec_file_takes_the_same_keys_with_the_same_checks() {
    let checked = check(YAML, &options());
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let spec = checked.spec.expect("checked");
    assert_eq!(
        spec.concurrency.as_ref().map(|c| (&c.key, c.on_limit)),
        Some((&LimitKey::Path("order.customer_id".into()), OnLimit::Skip))
    );
    assert_eq!(spec.priority.as_deref(), Some("order.tier"));
    assert_eq!(
        spec.steps[0].concurrency.as_ref().map(|c| &c.key),
        Some(&LimitKey::Static("psp".into()))
    );
    assert_eq!(spec.steps[0].rate.as_ref().map(|r| r.burst), Some(1));

    let checked = check(&YAML.replace("  limit: 1\n", "  limit: 0\n"), &options());
    assert_eq!(checked.errors.len(), 1, "{:?}", checked.errors);
    assert_eq!(
        (checked.errors[0].pos.line, checked.errors[0].pos.col),
        (6, 10),
        "{:?}",
        checked.errors
    );
    let checked = check(
        &YAML.replace("window: 5s", "window: 5s\n  max_wait: 1s"),
        &options(),
    );
    assert_eq!(checked.errors.len(), 1, "{:?}", checked.errors);
    assert_eq!(checked.errors[0].pos.line, 12, "{:?}", checked.errors);
    assert!(checked.errors[0].message.contains("shorter than `window`"));
}

#[test]
fn export_writes_the_keys_and_they_check_back_to_the_same_spec() {
    let inline = spec(CHARGE);
    let yaml = export(&inline).expect("exports");
    for expected in [
        "concurrency:",
        "priority: order.tier",
        "debounce:",
        "key: \"psp\"",
        "rate:",
        "burst: 20",
        "max_wait: 1m",
    ] {
        assert!(
            yaml.contains(expected),
            "{expected:?} missing from:\n{yaml}"
        );
    }
    let options = Options {
        actions: None,
        env: None,
        env_fallback: None,
    };
    let checked = check(&yaml, &options);
    assert!(checked.errors.is_empty(), "{:?}\n{yaml}", checked.errors);
    let back = checked.spec.expect("checked");
    assert_eq!(back.concurrency, inline.concurrency);
    assert_eq!(back.priority, inline.priority);
    assert_eq!(back.debounce, inline.debounce);
    assert_eq!(back.steps[1].concurrency, inline.steps[1].concurrency);
    assert_eq!(back.steps[1].rate, inline.steps[1].rate);
    assert_eq!(back.fingerprint(), inline.fingerprint());
}

#[test]
fn export_writes_search_and_retention() {
    let inline = spec(
        "workflow W(order: Order) { search: [order.customer_id], retention: 30d, priority: -2, step charge -> () { action: f(order) } }",
    );
    let yaml = export(&inline).expect("exports");
    let checked = check(&yaml, &Options::default());
    assert!(checked.errors.is_empty(), "{:?}\n{yaml}", checked.errors);
    let back = checked.spec.expect("checked");
    assert_eq!(back.search, inline.search);
    assert_eq!(back.retention, inline.retention);
    assert_eq!(back.priority.as_deref(), Some("-2"));
}

#[test]
fn a_map_step_with_both_concurrencies_cannot_be_exported() {
    let inline = spec(
        "workflow W(lines: Vec<String>) { step ship -> () { for_each: line in lines, concurrency: 4, concurrency: { key: \"carrier\", limit: 2 }, action: f(line) } }",
    );
    assert_eq!(inline.steps[0].for_each().map(|f| f.concurrency), Some(4));
    assert!(inline.steps[0].concurrency.is_some());
    assert!(export(&inline).is_err());
}

#[test]
fn the_schema_lists_the_keys() {
    let schema = workflow_spec::yaml::schema();
    let properties = &schema["properties"];
    for key in ["concurrency", "priority", "debounce"] {
        assert!(properties[key].is_object(), "{key}");
    }
    assert_eq!(
        properties["concurrency"]["properties"]["on_limit"]["enum"],
        serde_json::json!(["queue", "skip", "cancel_previous"])
    );
    let step = &properties["steps"]["items"]["properties"];
    assert!(step["rate"]["properties"]["burst"].is_object());
    assert!(step["concurrency"]["oneOf"].is_array());
}

//! `search: [..]` and `retention: 30d`: lowered into the model, checked at their tokens,
//! outside the behavioural fingerprint, and the same in a spec file.

use std::time::Duration;

use workflow_spec::parse::parse_str;
use workflow_spec::yaml::{check, Options};
use workflow_spec::{SearchKey, Spec};

const CHARGE: &str = r#"
    pub workflow Charge(order: Order, region: String) env Shop {
        search: [order.customer_id, order.id, region],
        retention: 30d,
        step charge -> Receipt { action: psp::charge(env, order) }
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

fn with_keys(keys: &str) -> String {
    format!("workflow W(order: Order) {{ {keys} step charge -> () {{ action: f(order) }} }}")
}

fn key(name: &str, path: &str) -> SearchKey {
    SearchKey {
        name: name.into(),
        path: path.into(),
    }
}

#[test]
fn entries_are_named_by_their_last_field() {
    let spec = spec(CHARGE);
    assert_eq!(
        spec.search,
        vec![
            key("customer_id", "order.customer_id"),
            key("id", "order.id"),
            key("region", "region"),
        ]
    );
    assert_eq!(spec.retention, Some(Duration::from_secs(30 * 86_400)));
}

#[test]
fn a_workflow_without_the_keys_has_none() {
    let spec = spec(&with_keys(""));
    assert!(spec.search.is_empty());
    assert_eq!(spec.retention, None);
}

#[test]
fn each_mistake_is_one_error_that_says_what_to_do() {
    for (keys, expected) in [
        ("search: [ordr.id],", "did you mean `order`?"),
        ("search: [charge],", "`charge` is a step"),
        ("search: [env],", "reserved"),
        ("search: [order.id, order.id],", "listed twice"),
        (
            "search: [order.id, order.customer.id],",
            "would both be searched as `id`",
        ),
        ("search: [],", "lists no entries"),
        ("search: [order.id()],", "not an input or a path"),
        ("search: order.id,", "expects a list"),
        (
            "search: [order.id], search: [order.x],",
            "duplicate workflow key `search`",
        ),
        ("retention: 30s,", "at least `1m`"),
        ("retention: 30,", "has no unit"),
        (
            "retention: 1d, retention: 2d,",
            "duplicate workflow key `retention`",
        ),
    ] {
        let found = errors(&with_keys(keys));
        assert_eq!(found.len(), 1, "{keys}: {found:#?}");
        assert!(found[0].contains(expected), "{keys}: {found:#?}");
    }
}

#[test]
fn the_keys_are_outside_the_fingerprint() {
    let base = spec(CHARGE);
    let start = CHARGE.find("search:").expect("search");
    let end = CHARGE.find("step charge").expect("step");
    let plain = spec(&format!("{}{}", &CHARGE[..start], &CHARGE[end..]));
    assert!(plain.search.is_empty() && plain.retention.is_none());
    assert_eq!(base.fingerprint(), plain.fingerprint());
    let other = spec(
        &CHARGE
            .replace("order.customer_id, order.id, region", "order.id")
            .replace("30d", "7d"),
    );
    assert_ne!(other.search, base.search);
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
fn a_spec_file_takes_the_same_keys_with_the_same_checks() {
    let yaml = "name: charge
inputs:
  order: Order
search: [order.customer_id, order.id]
retention: 30d
steps:
  - id: charge
    action: charge
    inputs: [order]
    output: u32
";
    let options = Options {
        actions: Some("crate::acts".into()),
        env: Some("Shop".into()),
        env_fallback: None,
    };
    let checked = check(yaml, &options);
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let spec = checked.spec.expect("checked");
    assert_eq!(
        spec.search,
        vec![
            key("customer_id", "order.customer_id"),
            key("id", "order.id")
        ]
    );
    assert_eq!(spec.retention, Some(Duration::from_secs(30 * 86_400)));

    let checked = check(&yaml.replace("order.id]", "ordr.id]"), &options);
    assert_eq!(checked.errors.len(), 1, "{:?}", checked.errors);
    assert_eq!(checked.errors[0].pos.line, 4, "{:?}", checked.errors);
    assert!(checked.errors[0].message.contains("unknown input `ordr`"));

    let checked = check(&yaml.replace("30d", "10s"), &options);
    assert_eq!(checked.errors.len(), 1, "{:?}", checked.errors);
    assert_eq!(checked.errors[0].pos.line, 5, "{:?}", checked.errors);
}

#[test]
fn the_schema_lists_both_keys() {
    let schema = workflow_spec::yaml::schema();
    let properties = &schema["properties"];
    assert_eq!(properties["search"]["type"], "array");
    assert!(properties["retention"]["pattern"].is_string());
}

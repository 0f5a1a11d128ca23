//! Helpers shared by the test files of this crate: specs from source, their errors,
//! snapshots and a well-formedness check of SVG output.
// Each test file uses some of these helpers, not all.
#![allow(dead_code)]

use std::path::PathBuf;

#[cfg(feature = "parse")]
use workflow_spec::parse::{parse_str, Parsed};
#[cfg(feature = "parse")]
use workflow_spec::Spec;

/// The `Fulfil` spec of DESIGN.md, with a compensation, a skipping map over a map's
/// output, and a step reading the event.
pub const FULFIL: &str = r#"
    pub workflow Fulfil(order: Order, express: bool) env Shop {
        step reserve_lines -> Hold {
            for_each: line in order.lines,
            action: stock::reserve(env, ctx, line),
            compensate: stock::release(env, reserve_lines, line),
            concurrency: 8,
            retry: { max_attempts: 3 },
            on_item_failure: abort,
        }
        step price -> u64 {
            for_each: hold in reserve_lines.into_iter().filter(|h| h.quantity != 0),
            action: pricing::price(hold, 2),
            on_item_failure: skip,
        }
        step ship -> ShippingOutputs {
            workflow: Shipping(order: order, holds: reserve_lines, express),
        }
        event payment -> PaymentConfirmed {
            depends_on: [reserve_lines],
            timeout: 1h,
            on_timeout: continue,
        }
        step confirm -> () {
            action: mail::confirm(ship, payment),
        }
    }
"#;

#[cfg(feature = "parse")]
/// The onboarding spec of DESIGN.md (the body of its `workflow!`).
pub const ONBOARDING: &str = r#"
    /// Onboard a new user from signup to first value.
    pub workflow UserOnboarding(signup: Signup) env Services {
        step create_account -> User {
            action: accounts::create_user_record(env, signup),
            on_failure: abort,
        }
        step send_welcome_email -> Receipt {
            action: mail::send_welcome(env, ctx, create_account),
            effect: external,
            on_failure: continue,
        }
        step provision_workspace -> Workspace {
            action: workspaces::create(env, ctx, create_account),
            retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 60s, jitter: full },
            timeout: 2m,
        }
        human human_review -> Approval {
            assignee: "trust_and_safety_team",
            depends_on: [provision_workspace],
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_leads"),
        }
        step activate_account -> () {
            action: accounts::set_active(env, create_account),
            depends_on: [human_review],
            condition: human_review.approved,
        }
    }
"#;

/// Every error message of a parse.
pub fn messages(parsed: &Parsed) -> Vec<String> {
    parsed.errors.iter().map(ToString::to_string).collect()
}

#[cfg(feature = "parse")]
/// The spec of a source that must pass every check.
pub fn spec(source: &str) -> Spec {
    let parsed = parse_str(source);
    assert!(
        parsed.errors.is_empty(),
        "expected no errors, got {:#?}",
        messages(&parsed)
    );
    parsed.spec.expect("a spec without errors is lowered")
}

#[cfg(feature = "parse")]
/// The one error of a source with one mistake.
pub fn one_error(source: &str) -> String {
    let parsed = parse_str(source);
    let mut errors = messages(&parsed);
    assert_eq!(
        errors.len(),
        1,
        "expected exactly one error in {source}\ngot {errors:#?}"
    );
    assert!(parsed.spec.is_none(), "a spec with errors is not lowered");
    assert!(parsed.ast.is_some(), "the header was readable");
    errors.remove(0)
}

/// Asserts that `message` contains every one of `parts`.
pub fn assert_says(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "expected {part:?} in the message:\n{message}"
        );
    }
}

/// Compares `actual` with `tests/snapshots/<name>`, or writes it there when
/// `UPDATE_SNAPSHOTS=1`.
pub fn assert_snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("snapshots")
        .join(name);
    if std::env::var("UPDATE_SNAPSHOTS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().expect("snapshot dir")).expect("create snapshots/");
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| {
            panic!(
                "cannot read snapshot {}: {error}\nhint: run with UPDATE_SNAPSHOTS=1 to create it",
                path.display()
            )
        })
        .replace("\r\n", "\n");
    if expected == actual {
        return;
    }
    let expected_lines: Vec<&str> = expected.lines().collect();
    let actual_lines: Vec<&str> = actual.lines().collect();
    let line = expected_lines
        .iter()
        .zip(&actual_lines)
        .position(|(e, a)| e != a)
        .unwrap_or(expected_lines.len().min(actual_lines.len()));
    panic!(
        "snapshot {} differs, first at line {}:\n  expected: {}\n  actual:   {}\n\
         ({} lines expected, {} actual)\n\
         hint: if the change is intended, rerun with UPDATE_SNAPSHOTS=1 and review the diff\n\
         --- actual output ---\n{actual}",
        path.display(),
        line + 1,
        expected_lines.get(line).unwrap_or(&"<end of file>"),
        actual_lines.get(line).unwrap_or(&"<end of file>"),
        expected_lines.len(),
        actual_lines.len(),
    );
}

/// A small check that the SVG is well-formed XML as far as the renderer's output goes:
/// tags balance, attribute quotes balance, and no raw `<` or `&` sneaks into text.
pub fn assert_well_formed(svg: &str) {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(open) = rest.find('<') {
        let text = &rest[..open];
        assert!(!text.contains('>'), "raw `>` in text `{text}`");
        for (at, _) in text.match_indices('&') {
            let entity = &text[at..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|known| entity.starts_with(known)),
                "raw `&` in text `{text}`"
            );
        }
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = &rest[open + 1..close];
        assert_eq!(
            tag.matches('"').count() % 2,
            0,
            "unbalanced quotes in <{tag}>"
        );
        assert!(!tag[1..].contains('<'), "raw `<` in <{tag}>");
        let name = tag
            .trim_start_matches('/')
            .split([' ', '/'])
            .next()
            .unwrap_or_default();
        if let Some(closing) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(closing), "mismatched </{closing}>");
        } else if !tag.ends_with('/') {
            stack.push(name);
        }
        rest = &rest[close + 1..];
    }
    assert!(stack.is_empty(), "unclosed tags {stack:?}");
    assert_eq!(rest, "\n");
}

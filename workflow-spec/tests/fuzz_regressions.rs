//! Regression tests for inputs found by fuzzing `workflow_spec::parse` (see `fuzz/README.md`).
//!
//! The parser must never panic, hang or crash: every input gives a spec or spanned errors.
//! Each input is parsed on a thread of its own with an explicit stack, so the outcome does
//! not depend on the test harness's default thread stack (2 MiB, or `RUST_MIN_STACK`).
//!
//! The deep-nesting inputs used to overflow the stack inside syn's recursive type and
//! expression parsers (syn bounds no depth), aborting the whole process. `parse` now
//! rejects nesting deeper than 128 levels before syn sees the tokens, and runs syn on a
//! stack of its own.

use std::thread;

use workflow_spec::parse::parse_str;

/// The stack of rustc's main thread (where the macro runs) and of a CLI's main thread.
const STACK: usize = 8 << 20;

/// What a parse gave: whether there is a spec, and the error messages.
#[derive(Debug)]
struct Outcome {
    spec: bool,
    has_ast: bool,
    errors: Vec<String>,
}

fn parse_on_stack(source: String, stack: usize) -> Outcome {
    thread::Builder::new()
        .name("parse".into())
        .stack_size(stack)
        .spawn(move || {
            let parsed = parse_str(&source);
            Outcome {
                spec: parsed.spec.is_some(),
                has_ast: parsed.ast.is_some(),
                errors: parsed.errors.iter().map(ToString::to_string).collect(),
            }
        })
        .expect("spawn the parsing thread")
        .join()
        .expect("parse_str must not panic")
}

/// A sensible rejection: no spec, a few errors (not one per nesting level), each saying
/// something.
fn assert_rejected(name: &str, outcome: &Outcome) {
    assert!(!outcome.spec, "{name}: accepted an over-deep spec");
    assert!(!outcome.errors.is_empty(), "{name}: no spec and no error");
    assert!(
        outcome.errors.len() <= 3,
        "{name}: {} errors for one problem: {:?}",
        outcome.errors.len(),
        outcome.errors
    );
    assert!(
        outcome.errors.iter().all(|e| !e.trim().is_empty()),
        "{name}: an empty error message"
    );
}

/// Found by fuzzing, minimised with `cargo fuzz tmin`: a step output type of 1077 nested
/// references. syn's `TypeReference` parser recurses once per `&`
/// (`syn::ty::parsing::ambig_ty` -> `TypeReference::parse` -> `Type::without_plus` -> ...),
/// called from `parse_step` (`input.parse::<Type>()` after `->`), until the stack overflows.
/// About 90 `&` are enough in a debug build on a 2 MiB thread, about 350 in the macro.
#[test]
fn deep_reference_output_type_is_an_error_not_a_stack_overflow() {
    let source = format!("workflow F() {{ step a -> {}u8 {{ }} }}", "&".repeat(1077));
    let outcome = parse_on_stack(source, STACK);
    assert_rejected("deep reference output type", &outcome);
}

/// The same fault through every place the parser hands tokens to syn: types (inputs, `env`,
/// step outputs), field values (conditions, calls), attributes, and bare nested groups
/// (syn's `TokenBuffer` recurses per group). Each input fits in the fuzzer's 4096 bytes.
#[test]
fn deep_nesting_anywhere_is_an_error_not_a_stack_overflow() {
    let n = 1000;
    let step = |fields: &str| format!("workflow F(x: bool) {{ step a -> () {{ {fields} }} }}");
    let cases = [
        (
            "reference output type",
            format!("workflow F() {{ step a -> {}u8 {{ action: f(), }} }}", "&".repeat(3 * n)),
        ),
        (
            "generic output type",
            format!(
                "workflow F() {{ step a -> {}u8{} {{ action: f(), }} }}",
                "Vec<".repeat(n / 2),
                ">".repeat(n / 2)
            ),
        ),
        (
            "slice output type",
            format!(
                "workflow F() {{ step a -> {}u8{} {{ action: f(), }} }}",
                "[".repeat(n),
                "]".repeat(n)
            ),
        ),
        (
            "function-pointer output type",
            format!("workflow F() {{ step a -> {}u8 {{ action: f(), }} }}", "fn() -> ".repeat(n / 2)),
        ),
        (
            "input type",
            format!(
                "workflow F(x: {}u8) {{ step a -> () {{ action: f(x), }} }}",
                "&".repeat(3 * n)
            ),
        ),
        (
            "env type",
            format!(
                "workflow F() env {}u8 {{ step a -> () {{ action: f(env), }} }}",
                "&".repeat(3 * n)
            ),
        ),
        (
            "human output type",
            format!(
                "workflow F() {{ human a -> {}u8 {{ assignee: \"ops\", timeout: 1h, on_timeout: abort, }} }}",
                "&".repeat(3 * n)
            ),
        ),
        (
            "parenthesised condition",
            step(&format!("action: f(), condition: {}x{},", "(".repeat(n), ")".repeat(n))),
        ),
        (
            "block condition",
            step(&format!("action: f(), condition: {}x{},", "{".repeat(n), "}".repeat(n))),
        ),
        (
            "closure condition",
            step(&format!("action: f(), condition: {}x,", "|v| ".repeat(n))),
        ),
        (
            "unary condition",
            step(&format!("action: f(), condition: {}x,", "!".repeat(3 * n))),
        ),
        (
            "cast in a condition",
            step(&format!("action: f(), condition: x as {}u8,", "&".repeat(3 * n))),
        ),
        (
            "nested array argument",
            step(&format!("action: f({}1{}),", "[".repeat(n), "]".repeat(n))),
        ),
        (
            "attribute",
            format!(
                "#[doc = x as {}u8] workflow F() {{ step a -> () {{ action: f(), }} }}",
                "&".repeat(3 * n)
            ),
        ),
        (
            "bare groups",
            format!("{}{}", "{".repeat(2 * n), "}".repeat(2 * n)),
        ),
    ];
    for (name, source) in cases {
        assert!(source.len() <= 4096, "{name}: {} bytes", source.len());
        let outcome = parse_on_stack(source, STACK);
        assert_rejected(name, &outcome);
    }
}

/// A guard against bounds set too tight: the nesting and type lengths real specs use still
/// parse, on the 2 MiB stack a test thread has by default.
#[test]
fn realistic_nesting_still_parses() {
    let source = r#"
        /// Ship an order.
        pub workflow Shipping(order: shop::Order, limits: std::collections::HashMap<String, Vec<(u32, Option<String>)>>) env Services {
            step score -> Result<Vec<std::collections::BTreeMap<String, Option<(u32, String)>>>, shop::ScoreError> {
                action: fraud::score(env, order, limits, "default", -1, 2.5),
                timeout: 30s,
                retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 10s, jitter: 10% },
            }
            step ship -> () {
                action: shop::ship(ctx, order, score),
                condition: order.total_cents > 0
                    && score.as_ref().map_or(false, |scores| scores.iter().any(|s| s.values().all(|v| match v {
                        Some((n, _)) => { let limit = if order.express { 90 } else { 80 }; *n < limit }
                        None => true,
                    }))),
            }
        }
    "#;
    let outcome = parse_on_stack(source.to_owned(), 2 << 20);
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert!(outcome.spec && outcome.has_ast);
}

/// Inputs that do not lex, or lex to nothing a workflow could be, are errors.
#[test]
fn junk_is_an_error() {
    for source in [
        "",
        "(",
        "\u{feff}",
        "workflow",
        "workflow F",
        "workflow F()",
        "workflow F() {",
        "}{",
    ] {
        let outcome = parse_on_stack(source.to_owned(), STACK);
        assert!(!outcome.spec, "{source:?} gave a spec");
        assert!(
            !outcome.errors.is_empty(),
            "{source:?}: no spec and no error"
        );
    }
}

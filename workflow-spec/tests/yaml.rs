//! The YAML front end: a file lowers onto the inline spec's model and checks, and its
//! errors land on the file's line and column.

use proptest::prelude::*;
use workflow_spec::parse::parse_str;
use workflow_spec::yaml::{check, export, Checked, FileError, Options, Pos};
use workflow_spec::{Arg, Spec};

fn file(name: &str) -> String {
    let path = format!("{}/../examples/specs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("the example spec file")
}

fn options() -> Options {
    Options {
        actions: Some("crate::acts".into()),
        env: Some("Services".into()),
        env_fallback: None,
    }
}

fn at(errors: &[FileError]) -> Vec<(usize, usize, &str)> {
    errors
        .iter()
        .map(|e| (e.pos.line, e.pos.col, e.message.as_str()))
        .collect()
}

fn inline(source: &str) -> Spec {
    let parsed = parse_str(source);
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    parsed.spec.expect("spec")
}

fn errors_of(yaml: &str) -> Vec<FileError> {
    let checked = check(yaml, &Options::default());
    assert!(checked.spec.is_none());
    checked.errors
}

#[test]
fn the_seed_file_verbatim_gets_exactly_the_errors_for_what_it_lacks() {
    let checked = check(&file("user-onboarding.yaml"), &options());
    assert!(checked.spec.is_none());
    assert_eq!(
        at(&checked.errors),
        [
            (6, 9, "step `create_account` has no `output:` type"),
            (
                8,
                14,
                "unknown step or input `email` in argument of `action`"
            ),
            (
                8,
                21,
                "unknown step or input `name` in argument of `action`"
            ),
            (
                8,
                27,
                "unknown step or input `plan` in argument of `action`"
            ),
            (11, 9, "step `send_welcome_email` has no `output:` type"),
            (13, 5, "unknown key `template` in step `send_welcome_email`"),
            (17, 9, "step `provision_workspace` has no `output:` type"),
            (
                30,
                17,
                "`on_timeout: escalate` in step `human_review` names no group to escalate to"
            ),
            (32, 9, "step `activate_account` has no `output:` type"),
        ]
    );
    // The seed's inputs are untyped: the help says how to declare them.
    assert_eq!(
        checked.errors[1].help.as_deref(),
        Some("`email` is read but not declared: declare it under `inputs:` at the top of the file with its Rust type, e.g.\n    inputs:\n      email: String")
    );
    // The text is still lowered, so the macro can emit the workflow's types.
    assert!(checked.text.is_some());
}

#[test]
fn the_completed_file_is_its_inline_twin() {
    let checked = check(&file("user-onboarding.completed.yaml"), &options());
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let spec = checked.spec.expect("spec");
    let twin = inline(
        r#"
        /// Onboard a new user from signup to first value
        pub workflow UserOnboarding(email: String, name: String, plan: String) env Services {
            step create_account -> User {
                action: crate::acts::create_user_record(env, email, name, plan),
                on_failure: abort,
            }
            step send_welcome_email -> Receipt {
                action: crate::acts::send_email(env, ctx, create_account, "welcome"),
                effect: external,
                depends_on: [create_account],
                on_failure: continue,
            }
            step provision_workspace -> Workspace {
                action: crate::acts::create_workspace(env, ctx, create_account),
                depends_on: [create_account],
                on_failure: abort,
                retry: { max_attempts: 3, backoff: exponential },
                timeout: 2m,
            }
            human human_review {
                assignee: "trust_and_safety_team",
                depends_on: [provision_workspace],
                timeout: 48h,
                on_timeout: escalate("trust_and_safety_leads"),
            }
            step activate_account -> () {
                action: crate::acts::set_account_active(env, create_account),
                depends_on: [human_review],
                condition: human_review.approved == true,
            }
        }
        "#,
    );
    assert_eq!(spec, twin);
    assert_eq!(spec.fingerprint(), twin.fingerprint());
}

#[test]
fn with_values_take_their_place_among_the_inputs_or_follow_them() {
    let yaml = "name: mail\ninputs:\n  user: String\nsteps:\n  - id: send\n    action: send\n    inputs: [env, template, user]\n    with:\n      template: welcome\n      retries: 3\n      code: \"3\"\n      flag: true\n    output: ()\n";
    let checked = check(yaml, &Options::default().with_env());
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let spec = checked.spec.expect("spec");
    assert_eq!(
        spec.steps[0].action().expect("action").args,
        [
            Arg::Env,
            Arg::Literal("\"welcome\"".into()),
            Arg::Input(0),
            Arg::Literal("3".into()),
            Arg::Literal("\"3\"".into()),
            Arg::Literal("true".into()),
        ]
    );
}

trait WithEnv {
    fn with_env(self) -> Self;
}

impl WithEnv for Options {
    fn with_env(mut self) -> Self {
        self.env = Some("Env".into());
        self
    }
}

#[test]
fn an_error_inside_a_value_lands_on_its_own_column() {
    let yaml = "name: x\nsteps:\n  - id: a\n    action: a\n    output: bool\n  - id: b\n    action: b\n    output: ()\n    depends_on: [a]\n    condition: \"a && reveiw.approved\"\n";
    assert_eq!(
        at(&errors_of(yaml)),
        [(
            10,
            22,
            "unknown step or input `reveiw` in the condition of `b`"
        )]
    );
    let plain = "name: x\nsteps:\n  - id: a\n    action: a\n    output: u32\n    retry: { max_attempts: 3, initial: 1s, max: 2x }\n";
    assert_eq!(
        at(&errors_of(plain)),
        [(6, 49, "unknown duration unit `x`")]
    );
}

#[test]
fn a_value_cannot_end_its_field_or_its_step() {
    let cases = [
        (
            "    timeout: \"1s, action: evil()\"\n",
            "is not a value a spec takes here",
        ),
        (
            "    condition: \"true } step evil -> () { action: evil()\"\n",
            "is not a value a spec takes here",
        ),
        (
            "    on_failure: \"abort; evil\"\n",
            "is not a value a spec takes here",
        ),
    ];
    for (line, message) in cases {
        let yaml = format!("name: x\nsteps:\n  - id: a\n    action: a\n    output: ()\n{line}");
        let errors = errors_of(&yaml);
        assert_eq!(errors.len(), 1, "{line}: {errors:?}");
        assert_eq!(
            errors[0].pos,
            Pos {
                line: 6,
                col: errors[0].pos.col
            }
        );
        assert!(errors[0].message.contains(message), "{line}: {errors:?}");
    }
    let output = "name: x\nsteps:\n  - id: a\n    action: a\n    output: \"() { } step b -> ()\"\n";
    assert!(errors_of(output)[0].message.contains("is not a Rust type"));
    let action = "name: x\nsteps:\n  - id: a\n    action: \"a(); evil\"\n    output: ()\n";
    assert_eq!(
        at(&errors_of(action)),
        [(4, 13, "`a(); evil` does not name a function")]
    );
}

#[test]
fn deeply_nested_values_are_errors_not_stack_overflows() {
    let deep = format!("{}(){}", "(".repeat(20_000), ")".repeat(20_000));
    for (key, value) in [
        ("output", deep.clone()),
        ("condition", deep.clone()),
        ("action", format!("a::<{}>", "Vec<".repeat(20_000))),
    ] {
        let yaml = format!(
            "name: x\nsteps:\n  - id: a\n    action: a\n    output: ()\n    {key}: \"{value}\"\n"
        );
        let yaml = if key == "output" || key == "action" {
            yaml.replacen(
                &format!("    {key}: {}\n", if key == "output" { "()" } else { "a" }),
                "",
                1,
            )
        } else {
            yaml
        };
        let errors = errors_of(&yaml);
        assert!(!errors.is_empty(), "{key}");
        assert!(errors.iter().all(|e| e.pos.line >= 3), "{key}: {errors:?}");
    }
}

#[test]
fn the_yaml_itself_is_checked_and_located() {
    let cases: [(&str, (usize, usize), &str); 7] = [
        (
            "name: x\nname: y\nsteps: []\n",
            (2, 1),
            "duplicate key `name` (first at line 1)",
        ),
        (
            "name: x\nsteps:\n  - id: &a a\n",
            (3, 9),
            "anchors (`&name`) are not allowed in a spec",
        ),
        (
            "name: !t x\nsteps: []\n",
            (1, 7),
            "tags (`!name`) are not allowed in a spec",
        ),
        (
            "name: x\n---\nname: y\n",
            (2, 1),
            "a spec file holds one YAML document, this is a second one",
        ),
        ("", (1, 1), "the spec file is empty"),
        (
            "- a\n- b\n",
            (1, 1),
            "a spec file is a mapping, found a list",
        ),
        ("name: x\nsteps: [a\n", (3, 1), "invalid YAML: "),
    ];
    for (yaml, (line, col), message) in cases {
        let errors = errors_of(yaml);
        assert_eq!(
            (errors[0].pos.line, errors[0].pos.col),
            (line, col),
            "{yaml:?}: {errors:?}"
        );
        assert!(
            errors[0].message.starts_with(message),
            "{yaml:?}: {errors:?}"
        );
    }
}

#[test]
fn a_tab_is_reported_at_its_own_line_and_column() {
    // The parser stops at the scalar before the tab (`fetch` on line 3); the error names
    // the tab.
    let cases = [
        ("name: x\nsteps:\n  - id: fetch\n\taction: fetch\n", (4, 1)),
        (
            "name: x\nsteps:\n  - id: fetch\n    action: fetch\n  \toutput: u32\n",
            (5, 3),
        ),
        ("name: x\nsteps:\n\t- id: fetch\n", (3, 1)),
    ];
    for (yaml, (line, col)) in cases {
        let errors = errors_of(yaml);
        assert_eq!(
            at(&errors),
            [(line, col, "invalid YAML: a tab where YAML expects spaces")],
            "{yaml:?}"
        );
        assert_eq!(
            errors[0].help.as_deref(),
            Some("indent with spaces: YAML does not allow tabs in indentation")
        );
    }
}

#[test]
fn a_quoted_number_is_refused_where_a_number_belongs() {
    let yaml = "name: x\nconcurrency: { key: \"k\", limit: \"4\" }\npriority: \"2\"\nsteps:\n  - id: a\n    action: a\n    output: ()\n    retry:\n      max_attempts: \"3\"\n      multiplier: '2.5'\n    rate: { key: \"psp\", limit: 10, per: 1s, burst: \"5\" }\n  - id: b\n    kind: human\n    assignee: ops\n    timeout: 1h\n    on_timeout: abort\n    approvals: \"2\"\n";
    let errors = errors_of(yaml);
    assert_eq!(
        at(&errors),
        [
            (2, 33, "`limit` takes a number, found the text \"4\""),
            (3, 11, "`priority` takes a number, found the text \"2\""),
            (9, 21, "`max_attempts` takes a number, found the text \"3\""),
            (
                10,
                19,
                "`multiplier` takes a number, found the text \"2.5\""
            ),
            (11, 52, "`burst` takes a number, found the text \"5\""),
            (17, 16, "`approvals` takes a number, found the text \"2\""),
        ]
    );
    assert_eq!(
        errors[2].help.as_deref(),
        Some("remove the quotes: `max_attempts: 3`")
    );
    // Unquoted, the same file checks; a quoted number stays text where text is meant.
    let fixed = yaml
        .replace(['"', '\''], "")
        .replace("key: k", "key: \"k\"")
        .replace("key: psp", "key: \"psp\"");
    let checked = check(&fixed, &Options::default());
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let with =
        "name: x\nsteps:\n  - id: a\n    action: a\n    output: ()\n    with: { limit: \"3\" }\n";
    assert!(check(with, &Options::default()).errors.is_empty());
}

#[test]
fn an_undeclared_input_is_to_be_declared_with_its_type() {
    let yaml = "name: x\ninputs:\n  order: Order\nsteps:\n  - id: a\n    action: a\n    inputs: [order, email]\n    output: ()\n  - id: b\n    action: b\n    inputs: [ordr]\n    output: ()\n";
    let errors = errors_of(yaml);
    assert_eq!(
        at(&errors),
        [
            (
                7,
                21,
                "unknown step or input `email` in argument of `action`"
            ),
            (
                11,
                14,
                "unknown step or input `ordr` in argument of `action`"
            ),
        ]
    );
    assert_eq!(
        errors[0].help.as_deref(),
        Some("`email` is read but not declared: declare it under `inputs:` at the top of the file with its Rust type, e.g.\n    inputs:\n      order: Order\n      email: String")
    );
    // A near name is a typo, not a missing declaration.
    assert_eq!(errors[1].help.as_deref(), Some("did you mean `order`?"));
}

#[test]
fn a_mapping_value_is_copied_as_a_block_and_checked_by_the_language() {
    let yaml = "name: x\nsteps:\n  - id: a\n    action: a\n    output: ()\n    for_each: \"x in xs\"\n    concurrency: { limit: 2 }\n";
    let checked = check(yaml, &Options::default());
    let text = checked.text.expect("lowered");
    assert!(text.contains("concurrency: { limit: 2\n,\n}"), "{text}");
    // The inline language's own check reports it, at the file's mapping.
    assert!(
        checked
            .errors
            .iter()
            .any(|e| e.pos.line == 7 && e.message.contains("concurrency")),
        "{:?}",
        checked.errors
    );
}

#[test]
fn unknown_keys_get_the_nearest_key() {
    let yaml = "name: x\nsteps:\n  - id: a\n    action: a\n    output: ()\n    dependson: [b]\n    on_failur: continue\n";
    let errors = errors_of(yaml);
    let helps: Vec<(usize, Option<&str>)> = errors
        .iter()
        .map(|e| (e.pos.line, e.help.as_deref()))
        .collect();
    assert_eq!(
        helps,
        [
            (6, Some("did you mean `depends_on`?")),
            (7, Some("did you mean `on_failure`?")),
        ]
    );
}

const EVERY_FEATURE: &str = r#"
    /// Every part of the language.
    #[workflow(name = "Everything")]
    pub workflow EverythingV2(order: Order, n: u32) env Shop {
        step reserve -> Hold {
            for_each: line in order.lines,
            action: stock::reserve(env, ctx, line, "fast", -3, 2.5, true),
            concurrency: 4,
            on_item_failure: skip,
            retry: { max_attempts: 3, backoff: linear, initial: 100ms, max: 2s, jitter: 10%, deadline: 10m, retry_on: [timeout, unavailable] },
            timeout: 30s,
        }
        step charge -> Receipt {
            action: psp::charge(env, ctx, order, reserve),
            effect: external,
            idempotent: true,
            compensate: psp::refund(env, charge, "reason"),
        }
        step notify -> () {
            action: mail::notify(env, ctx, charge),
            effect: external,
            reconcile: mail::sent(env, ctx),
            retry: { max_attempts: 2, backoff: fixed, initial: 1s, max: 1s },
            on_failure: continue,
        }
        human approve -> Decision {
            assignee: "finance",
            prompt: "Ship \"it\"?",
            approvals: 2,
            self_approval: false,
            title: "Ship {order.id} for {charge.amount} {{now}}",
            show: [order.id, charge.amount, reserve],
            depends_on: [charge],
            timeout: 2h,
            on_timeout: reject,
        }
        event paid -> Payment {
            depends_on: [approve],
            timeout: 1h,
            on_timeout: continue,
        }
        step ship -> ShippingOutputs {
            workflow: shipping::Shipping(order: order, holds: reserve, speed: 2),
            depends_on: [paid],
            condition: approve.approved && paid.is_some_and(|p| p.amount > n),
        }
    }
"#;

#[test]
fn export_then_check_gives_back_the_same_spec_for_every_feature() {
    let spec = inline(EVERY_FEATURE);
    let text = export(&spec).expect("exports");
    let checked = check(&text, &Options::default());
    assert!(checked.errors.is_empty(), "{text}\n{:?}", checked.errors);
    let back = checked.spec.expect("spec");
    assert_eq!(back.fingerprint(), spec.fingerprint(), "{text}");
    assert_eq!(back, spec, "{text}");
}

#[test]
fn export_refuses_a_literal_a_file_cannot_write() {
    let spec = inline("workflow W() { step a -> () { action: f('c') } }");
    let error = export(&spec).expect_err("a char literal");
    assert!(error.to_string().contains("passes the literal `'c'`"));
}

fn lowered(yaml: &str) -> Checked {
    check(yaml, &Options::default().with_env())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Random edits of a valid file (characters inserted, removed or replaced, with the
    /// characters YAML and Rust care about most) never panic the front end, and every
    /// error it reports lies inside the file.
    #[test]
    fn random_edits_never_panic_and_errors_stay_in_the_file(
        edits in proptest::collection::vec(
            (any::<prop::sample::Index>(), 0u8..3, prop::sample::select(vec![
                ":", "-", " ", "\n", "[", "]", "{", "}", "\"", "'", "#", "&", "*", "!", "|",
                ">", ",", "(", ")", "<", "\t", "a", "0", "_", "%", "\\", "é", ";", "/", "?",
            ])),
            1..6,
        )
    ) {
        let mut text: Vec<char> = file("user-onboarding.completed.yaml").chars().collect();
        for (index, op, piece) in edits {
            let at = index.index(text.len() + 1);
            match op {
                0 => text.splice(at..at, piece.chars()).for_each(drop),
                1 if at < text.len() => { text.remove(at); }
                _ if at < text.len() => text.splice(at..=at, piece.chars()).for_each(drop),
                _ => {}
            }
        }
        let text: String = text.into_iter().collect();
        let lines = text.lines().count().max(1);
        let checked = lowered(&text);
        prop_assert_eq!(checked.spec.is_some(), checked.errors.is_empty());
        for error in &checked.errors {
            prop_assert!(error.pos.line >= 1 && error.pos.line <= lines + 1, "{:?} in\n{}", error, text);
            prop_assert!(error.pos.col >= 1);
            let _ = error.render("x.yaml", &text);
        }
    }
}

#[test]
fn a_schedule_in_a_file_is_the_inline_schedule_and_is_checked_at_its_line() {
    let yaml = "name: daily-report
inputs:
  tick: workflow_core::Tick
schedule:
  cron: \"0 9 * * MON-FRI\"
  tz: Europe/Berlin
  overlap: skip
  catchup: \"all(max: 10)\"
  window: 6h
steps:
  - id: fetch
    action: fetch
    inputs: [tick]
    output: u32
";
    let checked = check(yaml, &options());
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let spec = checked.spec.expect("checked");
    let twin = inline(
        r#"pub workflow DailyReport(tick: workflow_core::Tick) env Services {
            schedule: {
                cron: "0 9 * * MON-FRI",
                tz: "Europe/Berlin",
                overlap: skip,
                catchup: all(max: 10),
                window: 6h,
            },
            step fetch -> u32 { action: actions::fetch(tick) }
        }"#,
    );
    assert_eq!(spec.schedule, twin.schedule);
    assert!(spec.schedule.is_some());

    let errors = errors_of(&yaml.replace("MON-FRI", "MON-FRY"));
    let located = at(&errors);
    assert_eq!(located.len(), 1, "{errors:?}");
    assert_eq!(located[0].0, 5, "the cron's line: {errors:?}");
    assert!(located[0].2.contains("MON-FRY"), "{errors:?}");
}

#[test]
fn quorum_and_presentation_keys_in_a_file_are_the_inline_keys_and_checked_at_their_line() {
    let yaml = "name: refunds
inputs:
  refund: Refund
steps:
  - id: assess
    action: assess
    inputs: [refund]
    output: Assessment
  - id: approve
    kind: human
    assignee: finance
    depends_on: [assess]
    approvals: 2
    self_approval: false
    title: \"Refund {refund.amount_cents} for {refund.customer}\"
    show: [refund.amount_cents, assess.note]
    timeout: 24h
    on_timeout: reject
";
    let checked = check(yaml, &options());
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    let spec = checked.spec.expect("checked");
    let twin = inline(
        r#"pub workflow Refunds(refund: Refund) env Services {
            step assess -> Assessment { action: crate::acts::assess(refund) }
            human approve -> Approval {
                assignee: "finance",
                depends_on: [assess],
                approvals: 2,
                self_approval: false,
                title: "Refund {refund.amount_cents} for {refund.customer}",
                show: [refund.amount_cents, assess.note],
                timeout: 24h,
                on_timeout: reject,
            }
        }"#,
    );
    assert_eq!(spec, twin);
    assert_eq!(spec.fingerprint(), twin.fingerprint());

    let errors_of = |yaml: &str| {
        let checked = check(yaml, &options());
        assert!(checked.spec.is_none());
        checked.errors
    };
    let errors = errors_of(&yaml.replace("assess.note]", "asess.note]"));
    let located = at(&errors);
    assert_eq!(located.len(), 1, "{errors:?}");
    assert_eq!(located[0].0, 16, "the show's line: {errors:?}");
    assert!(located[0].2.contains("asess"), "{errors:?}");
    assert_eq!(errors[0].help.as_deref(), Some("did you mean `assess`?"));

    let errors = errors_of(&yaml.replace("{refund.customer}", "{customer}"));
    let located = at(&errors);
    assert_eq!(located.len(), 1, "{errors:?}");
    assert_eq!(located[0].0, 15, "the title's line: {errors:?}");
    assert!(located[0].2.contains("`customer`"), "{errors:?}");

    let errors = errors_of(&yaml.replace("approvals: 2", "approvals: 0"));
    assert_eq!(at(&errors).first().map(|e| e.0), Some(13), "{errors:?}");
}

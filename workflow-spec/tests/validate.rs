//! The validator without rustc: spec texts go through `parse_str`, and the tests assert on
//! the lowered model of good specs and on the messages of bad ones (one error per mistake,
//! every mistake reported, no panic on any input). The trybuild cases in `tests/ui` check
//! the spans; these check the logic, fast.

use std::time::Duration;

use proptest::prelude::*;
use workflow_spec::parse::{check::condition_reads, parse_str, Parsed};
use workflow_spec::{
    Arg, Backoff, Effect, ErrorKind, Jitter, OnFailure, OnTimeout, RetryPolicy, Spec, StepKind,
};

/// The onboarding spec of DESIGN.md (the body of its `workflow!`).
const ONBOARDING: &str = r#"
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

// ------------------------------------------------------------------------------ helpers

fn messages(parsed: &Parsed) -> Vec<String> {
    parsed.errors.iter().map(ToString::to_string).collect()
}

/// The spec of a source that must pass every check.
fn spec(source: &str) -> Spec {
    let parsed = parse_str(source);
    assert!(
        parsed.errors.is_empty(),
        "expected no errors, got {:#?}",
        messages(&parsed)
    );
    parsed.spec.expect("a spec without errors is lowered")
}

/// The one error of a source with one mistake.
fn one_error(source: &str) -> String {
    let parsed = parse_str(source);
    let mut errors = messages(&parsed);
    assert_eq!(
        errors.len(),
        1,
        "expected exactly one error, got {errors:#?}"
    );
    assert!(parsed.spec.is_none(), "a spec with errors is not lowered");
    assert!(parsed.ast.is_some(), "the header was readable");
    errors.remove(0)
}

/// Asserts that `message` contains every one of `parts`.
fn assert_says(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(
            message.contains(part),
            "expected {part:?} in the message:\n{message}"
        );
    }
}

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

// --------------------------------------------------------------------- the lowered model

#[test]
fn the_design_spec_lowers_to_its_model() {
    let spec = spec(ONBOARDING);
    assert_eq!(spec.name, "UserOnboarding");
    assert_eq!(spec.doc, "Onboard a new user from signup to first value.");
    assert_eq!(spec.env.as_deref(), Some("Services"));
    assert_eq!(spec.inputs.len(), 1);
    assert_eq!(
        (spec.inputs[0].name.as_str(), spec.inputs[0].ty.as_str()),
        ("signup", "Signup")
    );

    let ids: Vec<&str> = spec.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "create_account",
            "send_welcome_email",
            "provision_workspace",
            "human_review",
            "activate_account"
        ]
    );
    let outputs: Vec<&str> = spec.steps.iter().map(|s| s.output.as_str()).collect();
    assert_eq!(outputs, ["User", "Receipt", "Workspace", "Approval", "()"]);
    let deps: Vec<Vec<usize>> = spec.steps.iter().map(|s| s.deps.clone()).collect();
    assert_eq!(deps, [vec![], vec![0], vec![0], vec![2], vec![0, 3]]);
    let optional: Vec<bool> = spec.steps.iter().map(|s| s.optional).collect();
    assert_eq!(optional, [false, true, false, false, true]);

    let create = spec.steps[0].action().expect("an action step");
    assert_eq!(create.path, "accounts::create_user_record");
    assert_eq!(create.args, [Arg::Env, Arg::Input(0)]);
    let welcome = &spec.steps[1];
    assert_eq!(
        welcome.action().map(|c| c.args.clone()),
        Some(vec![Arg::Env, Arg::Ctx, Arg::Step(0)])
    );
    assert_eq!(welcome.on_failure, OnFailure::Continue);
    match &welcome.kind {
        StepKind::Action(action) => {
            assert_eq!(action.effect, Effect::External);
            assert!(!action.idempotent);
            assert!(action.compensate.is_none() && action.reconcile.is_none());
        }
        _ => panic!("send_welcome_email is an action"),
    }

    let provision = &spec.steps[2];
    assert_eq!(provision.timeout, Some(Duration::from_secs(120)));
    assert_eq!(
        provision.retry,
        Some(RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Exponential,
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            jitter: Jitter::Full,
            ..RetryPolicy::default()
        })
    );
    assert_eq!(provision.max_attempts(), 3);

    let review = &spec.steps[3];
    assert!(review.is_human());
    assert_eq!(review.timeout, Some(Duration::from_secs(48 * 3600)));
    match &review.kind {
        StepKind::Human(human) => {
            assert_eq!(human.assignee, "trust_and_safety_team");
            assert_eq!(
                human.on_timeout,
                OnTimeout::Escalate("trust_and_safety_leads".into())
            );
            assert_eq!(human.prompt, None);
        }
        _ => panic!("human_review is a checkpoint"),
    }
    assert_eq!(
        spec.steps[4].condition.as_deref(),
        Some("human_review.approved")
    );
    assert_eq!(
        spec.steps[0].max_attempts(),
        1,
        "no retry block: one attempt"
    );
}

#[test]
fn lowering_is_deterministic() {
    assert_eq!(spec(ONBOARDING), spec(ONBOARDING));
    assert_eq!(
        spec(ONBOARDING).fingerprint(),
        spec(ONBOARDING).fingerprint()
    );
}

#[test]
fn maybe_absent_outputs_propagate_downstream_only() {
    let spec = spec(
        "workflow W() {
            step a -> u32 { action: f(), on_failure: continue, }
            step b -> u32 { action: g(a), }
            step c -> u32 { action: h(), depends_on: [b], }
            step d -> u32 { action: f(), }
            step e -> u32 { action: f(), condition: *d > 1, depends_on: [d], }
            step g -> u32 { action: f(), depends_on: [d], }
        }",
    );
    let optional: Vec<bool> = spec.steps.iter().map(|s| s.optional).collect();
    assert_eq!(optional, [true, true, true, false, true, false]);
}

#[test]
fn arguments_lower_to_names_and_literals() {
    let spec = spec(
        r#"workflow W(order: Order) env Services {
            step a -> () { action: m::f(env, ctx, order, "text", -1, 2.5, true, 'c'), }
        }"#,
    );
    let mut args = spec.steps[0]
        .action()
        .map(|c| c.args.clone())
        .unwrap_or_default();
    // `tokens_to_string` prints a negated literal as `- 1`; compare without spaces.
    if let Some(Arg::Literal(negative)) = args.get_mut(4) {
        negative.retain(|c| c != ' ');
    }
    assert_eq!(
        args,
        [
            Arg::Env,
            Arg::Ctx,
            Arg::Input(0),
            Arg::Literal("\"text\"".into()),
            Arg::Literal("-1".into()),
            Arg::Literal("2.5".into()),
            Arg::Literal("true".into()),
            Arg::Literal("'c'".into()),
        ]
    );
    assert_eq!(
        spec.steps[0].action().map(|c| c.path.as_str()),
        Some("m::f")
    );
}

#[test]
fn every_key_lowers() {
    let spec = spec(
        r#"workflow W(order: Order) {
            step charge -> Charge {
                action: pay(ctx, order),
                effect: external,
                idempotent: true,
                reconcile: find(ctx, order),
                compensate: refund(charge, order),
                timeout: 1.5s,
                retry: {
                    max_attempts: 4, backoff: linear, initial: 500ms, max: 10s,
                    multiplier: 1.5, jitter: 10%, deadline: 5m,
                    retry_on: [timeout, not_found],
                },
            }
            human review -> Approval {
                assignee: "fraud", prompt: "Fraud?", depends_on: [charge],
                timeout: 1d, on_timeout: approve, on_failure: continue,
                condition: order.total > 100,
            }
            human reject_it { assignee: "a", timeout: 1h, on_timeout: reject, depends_on: [review], }
            human abort_it { assignee: "a", timeout: 1h, on_timeout: abort, depends_on: [review], }
        }"#,
    );
    let charge = &spec.steps[0];
    assert_eq!(charge.timeout, Some(Duration::from_millis(1500)));
    assert_eq!(
        charge.retry,
        Some(RetryPolicy {
            max_attempts: 4,
            backoff: Backoff::Linear,
            initial: Duration::from_millis(500),
            max: Duration::from_secs(10),
            multiplier: 1.5,
            jitter: Jitter::Percent(10),
            deadline: Some(Duration::from_secs(300)),
            retry_on: vec![ErrorKind::Timeout, ErrorKind::NotFound],
        })
    );
    let StepKind::Action(action) = &charge.kind else {
        panic!("charge is an action")
    };
    assert!(action.idempotent);
    assert_eq!(action.effect, Effect::External);
    assert_eq!(
        action.reconcile.as_ref().map(|c| c.path.as_str()),
        Some("find")
    );
    assert_eq!(
        action.compensate.as_ref().map(|c| c.args.clone()),
        Some(vec![Arg::Step(0), Arg::Input(0)])
    );
    assert_eq!(
        charge.deps,
        Vec::<usize>::new(),
        "compensate adds no dependency"
    );

    let on_timeouts: Vec<OnTimeout> = spec.steps[1..]
        .iter()
        .map(|s| match &s.kind {
            StepKind::Human(h) => h.on_timeout.clone(),
            _ => panic!("a checkpoint"),
        })
        .collect();
    assert_eq!(
        on_timeouts,
        [OnTimeout::Approve, OnTimeout::Reject, OnTimeout::Abort]
    );
    assert_eq!(
        spec.steps[2].output, "Approval",
        "a human step defaults to Approval"
    );
    let StepKind::Human(review) = &spec.steps[1].kind else {
        panic!("review is a checkpoint")
    };
    assert_eq!(review.prompt.as_deref(), Some("Fraud?"));
    assert!(spec.steps[1].optional && spec.steps[2].optional);
}

#[test]
fn durations_take_every_unit() {
    for (text, expected) in [
        ("500ms", Duration::from_millis(500)),
        ("30s", Duration::from_secs(30)),
        ("1.5s", Duration::from_millis(1500)),
        ("2m", Duration::from_secs(120)),
        ("48h", Duration::from_secs(48 * 3600)),
        ("1d", Duration::from_secs(86_400)),
        ("3650d", Duration::from_secs(3650 * 86_400)),
    ] {
        let spec = spec(&one_step(&format!("timeout: {text},")));
        assert_eq!(spec.steps[0].timeout, Some(expected), "{text}");
    }
}

// ---------------------------------------------------------------------- dependencies

#[test]
fn unknown_names_are_reported_with_a_suggestion() {
    let message = one_error(
        "workflow W() {
            step create_account -> u32 { action: f(), }
            step b -> () { action: g(), depends_on: [creat_account], }
        }",
    );
    assert_says(
        &message,
        &[
            "unknown step `creat_account` in `depends_on`",
            "did you mean `create_account`?",
        ],
    );
    let message = one_error("workflow W(signup: Signup) { step a -> () { action: g(signupp), } }");
    assert_says(
        &message,
        &[
            "unknown step or input `signupp` in argument of `action`",
            "did you mean `signup`?",
        ],
    );
    let message = one_error("workflow W(signup: Signup) { step a -> () { action: g(zzz), } }");
    assert_says(
        &message,
        &["`zzz`", "the names in scope are `signup`, `ctx`"],
    );
    let message = one_error("workflow W() { step a -> () { action: g(), depends_on: [zzz], } }");
    assert_says(&message, &["unknown step `zzz`", "the steps are `a`"]);
}

#[test]
fn self_dependencies_are_reported_once() {
    let message = one_error("workflow W() { step a -> () { action: g(), depends_on: [a], } }");
    assert_says(
        &message,
        &["step `a` cannot depend on itself", "remove `a`"],
    );
    let message = one_error("workflow W() { step a -> u32 { action: g(a), } }");
    assert_says(
        &message,
        &["step `a` cannot take its own output as an argument"],
    );
}

#[test]
fn cycles_are_spelled_out_in_execution_order() {
    let message = one_error(
        "workflow W() {
            step a -> () { action: g(), depends_on: [c], }
            step b -> () { action: g(), depends_on: [a], }
            step c -> () { action: g(), depends_on: [b], }
        }",
    );
    assert_says(&message, &["dependency cycle: a -> b -> c -> a", "help:"]);
    let message = one_error(
        "workflow W() {
            step ping -> u32 { action: g(pong), }
            step pong -> u32 { action: g(ping), }
        }",
    );
    assert_says(&message, &["dependency cycle: ping -> pong -> ping"]);
}

#[test]
fn depends_on_lists_steps_once() {
    let message = one_error(
        "workflow W() {
            step a -> () { action: g(), }
            step b -> () { action: g(), depends_on: [a, a], }
        }",
    );
    assert_says(&message, &["`a` is listed twice in `depends_on`"]);
    let message =
        one_error("workflow W(signup: S) { step a -> () { action: g(), depends_on: [signup], } }");
    assert_says(
        &message,
        &[
            "`signup` is a workflow input, not a step",
            "pass `signup` as an argument",
        ],
    );
    let message = one_error("workflow W() { step a -> () { action: g(), depends_on: b, } }");
    assert_says(
        &message,
        &[
            "`depends_on` expects a list of step ids",
            "`depends_on: [b]`",
        ],
    );
}

#[test]
fn names_are_unique_and_not_reserved() {
    let message =
        one_error("workflow W() { step a -> () { action: g(), } step a -> () { action: g(), } }");
    assert_says(&message, &["duplicate step id `a`"]);
    let message = one_error("workflow W() { step ctx -> () { action: g(), } }");
    assert_says(&message, &["`ctx` is reserved and cannot be a step id"]);
    let message = one_error("workflow W(env: u32) { step a -> () { action: g(), } }");
    assert_says(&message, &["`env` is reserved and cannot be an input"]);
    let message = one_error("workflow W(a: u32) { step a -> () { action: g(), } }");
    assert_says(
        &message,
        &["step `a` has the same name as a workflow input"],
    );
    let message = one_error("workflow W() { step r#type -> () { action: g(), } }");
    assert_says(&message, &["`r#type` is a raw identifier", "`type_step`"]);
    let message = one_error("workflow W(a: u32, a: u32) { step b -> () { action: g(), } }");
    assert_says(&message, &["duplicate input `a`"]);
}

// -------------------------------------------------------------------------------- keys

#[test]
fn keys_are_checked_with_suggestions() {
    let message = one_error("workflow W() { step a -> () { acton: g(), } }");
    assert_says(
        &message,
        &["unknown key `acton` in step `a`", "did you mean `action`?"],
    );
    let message = one_error(&one_step("timeout: 1s, timeout: 2s,"));
    assert_says(&message, &["duplicate key `timeout`"]);
    let message = one_error("workflow W() { step a -> () { timeout: 1s, } }");
    assert_says(&message, &["step `a` has no `action`"]);
    let message = one_error(&one_step(r#"assignee: "team","#));
    assert_says(&message, &["`assignee` belongs to human checkpoints"]);
    let message = one_error(&one_human(&format!("action: g(), {HUMAN_OK}")));
    assert_says(&message, &["a human step has no `action`"]);
    let message = one_error(&one_step("on_failure: ignore,"));
    assert_says(
        &message,
        &["unknown `on_failure` value `ignore`; expected `abort` or `continue`"],
    );
    let message = one_error(&one_step("effect: extrenal,"));
    assert_says(&message, &["did you mean `external`?"]);
    let message = one_error(&one_step("idempotent: yes,"));
    assert_says(&message, &["expected `true` or `false` for `idempotent`"]);
    let message = one_error("workflow W() { stepp a -> () { action: g(), } }");
    assert_says(
        &message,
        &[
            "expected `step`, `human` or `event`, found `stepp`",
            "did you mean `step`?",
        ],
    );
    let message = one_error(
        "workflow W() { step a -> () { action: g(), } step b -> () { action: g(a + 1), } }",
    );
    assert_says(
        &message,
        &["an argument must name a step, a workflow input, `env` or `ctx`, or be a literal"],
    );
    let message = one_error("workflow W() { step a -> () { action: g(env), } }");
    assert_says(
        &message,
        &["`env` is passed to `a` but workflow `W` declares no environment"],
    );
    let message = one_error("workflow W() {}");
    assert_says(&message, &["workflow `W` has no steps"]);
    let message = one_error(&one_step("compensate: undo,"));
    assert_says(
        &message,
        &[
            "`compensate` expects a function call",
            "`compensate: undo(...)`",
        ],
    );
}

#[test]
fn a_missing_output_type_does_not_hide_the_step() {
    // The step is still known, so `b` reading it is not a second error.
    let message =
        one_error("workflow W() { step a { action: f(), } step b -> () { action: g(a), } }");
    assert_says(&message, &["step `a` needs an output type after `->`"]);
}

#[test]
fn a_misspelt_required_key_is_one_error() {
    let message = one_error(&one_human(
        r#"asignee: "team", timeout: 48h, on_timeout: escalate("leads"),"#,
    ));
    assert_says(
        &message,
        &["unknown key `asignee`", "did you mean `assignee`?"],
    );
    let message = one_error(&one_human(
        r#"assignee: "team", timout: 48h, on_timeout: escalate("leads"),"#,
    ));
    assert_says(&message, &["did you mean `timeout`?"]);
    let message = one_error(&one_human(
        r#"assignee: "team", timeout: 48h, on_timout: escalate("leads"),"#,
    ));
    assert_says(&message, &["did you mean `on_timeout`?"]);
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

//! The validator without rustc: spec texts go through `parse_str`, and the tests assert on
//! the lowered model of good specs and on the messages of bad ones (one error per mistake,
//! every mistake reported, no panic on any input). The trybuild cases in `compile-tests/ui` check
//! the spans; these check the logic, fast.

mod support;

use std::time::Duration;

use support::{assert_says, one_error, spec, ONBOARDING};
use workflow_spec::{
    Arg, Backoff, Effect, ErrorKind, Jitter, OnFailure, OnTimeout, RetryPolicy, StepKind,
};

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

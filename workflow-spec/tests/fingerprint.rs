//! The behavioural fingerprint: what changes it and what does not, and the journaled name
//! set with `#[workflow(name = "...")]`.

use workflow_spec::parse::parse_str;
use workflow_spec::Spec;

/// The onboarding spec of DESIGN.md, with a few more keys so every kind of fact is there.
const BASE: &str = r#"
    /// Onboard a new user from signup to first value.
    pub workflow UserOnboarding(signup: Signup, plan: Option<Plan>) env Services {
        /// Creates the account.
        step create_account -> User {
            action: accounts::create_user_record(env, signup, "standard"),
            compensate: accounts::delete(env, create_account),
            on_failure: abort,
        }
        step send_welcome_email -> Receipt {
            action: mail::send_welcome(env, ctx, create_account),
            effect: external,
            idempotent: true,
            on_failure: continue,
        }
        step provision_workspace -> Vec<Workspace> {
            action: workspaces::create(env, ctx, create_account),
            retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 60s, jitter: full, retry_on: [timeout, unavailable] },
            timeout: 2m,
        }
        human human_review -> Approval {
            assignee: "trust_and_safety_team",
            prompt: "Is this account genuine?",
            depends_on: [provision_workspace, send_welcome_email],
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_leads"),
        }
        step activate_account -> () {
            action: accounts::set_active(env, create_account),
            depends_on: [human_review],
            condition: human_review.approved && plan.as_ref().is_some_and(|p| p.paid),
        }
    }
"#;

fn spec(source: &str) -> Spec {
    let parsed = parse_str(source);
    let errors: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "expected no errors, got {errors:#?}");
    parsed.spec.expect("a spec without errors is lowered")
}

/// `BASE` with `from` replaced by `to` (which must occur).
fn edited(from: &str, to: &str) -> Spec {
    assert!(BASE.contains(from), "{from:?} is not in the base spec");
    spec(&BASE.replacen(from, to, 1))
}

fn assert_same(from: &str, to: &str) {
    let (base, other) = (spec(BASE), edited(from, to));
    assert_eq!(
        base.fingerprint(),
        other.fingerprint(),
        "replacing {from:?} by {to:?} changed the fingerprint:\n{}\n---\n{}",
        base.behaviour(),
        other.behaviour()
    );
}

fn assert_changes(from: &str, to: &str) {
    let (base, other) = (spec(BASE), edited(from, to));
    assert_ne!(
        base.fingerprint(),
        other.fingerprint(),
        "replacing {from:?} by {to:?} left the fingerprint as it was"
    );
    assert_ne!(base.behaviour(), other.behaviour());
}

// ------------------------------------------------------------------ what does not change it

#[test]
fn doc_comments_do_not_change_it() {
    assert_same(
        "/// Onboard a new user from signup to first value.",
        "/// Onboard a user.\n/// A second line.",
    );
    assert_same("/// Creates the account.\n", "");
    assert_same(
        "step send_welcome_email",
        "/// Sends the welcome mail.\n step send_welcome_email",
    );
}

#[test]
fn prompts_do_not_change_it() {
    assert_same(
        r#"prompt: "Is this account genuine?","#,
        r#"prompt: "Does the account look genuine to you?","#,
    );
    assert_same(r#"prompt: "Is this account genuine?","#, "");
}

#[test]
fn formatting_does_not_change_it() {
    // Whitespace and line breaks inside types, calls, retry blocks and conditions.
    assert_same("-> Vec<Workspace>", "-> Vec < Workspace >");
    assert_same("plan: Option<Plan>", "plan :\n  Option<\n Plan >");
    assert_same(
        "action: accounts::set_active(env, create_account),",
        "action: accounts :: set_active( env,\n create_account ),",
    );
    assert_same(
        "human_review.approved && plan.as_ref().is_some_and(|p| p.paid)",
        "human_review . approved\n && plan.as_ref().is_some_and( | p | p.paid )",
    );
    assert_same(
        "retry: { max_attempts: 3, backoff: exponential, initial: 1s, max: 60s, jitter: full, retry_on: [timeout, unavailable] },",
        "retry: {\n max_attempts: 3,\n backoff: exponential,\n initial: 1000ms,\n max: 1m,\n jitter: full,\n retry_on: [unavailable, timeout],\n },",
    );
    // The same durations written in other units, and keys in another order.
    assert_same("timeout: 48h,", "timeout: 2d,");
    assert_same("timeout: 2m,\n", "timeout: 120s,\n");
    assert_same(
        "effect: external,\n            idempotent: true,",
        "idempotent: true,\n            effect: external,",
    );
    // The order of `depends_on` means nothing.
    assert_same(
        "depends_on: [provision_workspace, send_welcome_email],",
        "depends_on: [send_welcome_email, provision_workspace],",
    );
    // Writing a default out changes nothing either.
    assert_same("effect: external,", "effect: external,");
    assert_same(
        "action: accounts::set_active(env, create_account),",
        "action: accounts::set_active(env, create_account),\n            on_failure: abort,\n            effect: internal,",
    );
}

#[test]
fn the_type_name_and_the_journaled_name_do_not_change_it() {
    // Renaming the old version and pinning its journaled name keeps its runs.
    assert_same(
        "pub workflow UserOnboarding(",
        "#[workflow(name = \"UserOnboarding\")]\n pub workflow UserOnboardingV1(",
    );
}

// ---------------------------------------------------------------------- what changes it

#[test]
fn running_a_step_on_a_task_of_its_own_does_not_change_it() {
    // `spawn: true` is how the engine runs an attempt, not what the run does.
    assert_same("timeout: 2m,", "timeout: 2m,\n            spawn: true,");
}

#[test]
fn dependencies_change_it() {
    assert_changes(
        "depends_on: [provision_workspace, send_welcome_email],",
        "depends_on: [provision_workspace],",
    );
    assert_changes(
        "depends_on: [human_review],",
        "depends_on: [human_review, send_welcome_email],",
    );
}

#[test]
fn arguments_change_it() {
    assert_changes(
        "mail::send_welcome(env, ctx, create_account)",
        "mail::send_welcome(env, create_account, ctx)",
    );
    assert_changes(r#"signup, "standard")"#, r#"signup, "premium")"#);
    // Inside a string literal, spaces are the value.
    assert_changes(r#"signup, "standard")"#, r#"signup, "standard ")"#);
    assert_changes(
        "action: workspaces::create(env, ctx, create_account)",
        "action: workspaces::create_v2(env, ctx, create_account)",
    );
    assert_changes(
        "compensate: accounts::delete(env, create_account),",
        "compensate: accounts::archive(env, create_account),",
    );
}

#[test]
fn types_change_it() {
    assert_changes("-> Vec<Workspace>", "-> Vec<Workspace2>");
    assert_changes("-> Receipt", "-> Option<Receipt>");
    assert_changes("plan: Option<Plan>", "plan: Plan");
    assert_changes("env Services", "env Clients");
    assert_changes(
        "human human_review -> Approval",
        "human human_review -> Review",
    );
}

#[test]
fn retry_policies_change_it() {
    assert_changes("max_attempts: 3", "max_attempts: 4");
    assert_changes("backoff: exponential", "backoff: linear");
    assert_changes("max: 60s", "max: 30s");
    assert_changes("jitter: full", "jitter: equal");
    assert_changes("retry_on: [timeout, unavailable]", "retry_on: [timeout]");
}

#[test]
fn conditions_change_it() {
    assert_changes(
        "human_review.approved && plan",
        "!human_review.approved && plan",
    );
    assert_changes("|p| p.paid", "|p| p.trial");
    assert_changes(
        "condition: human_review.approved && plan.as_ref().is_some_and(|p| p.paid),",
        "",
    );
}

#[test]
fn on_failure_timeouts_and_effects_change_it() {
    assert_changes("on_failure: continue,", "on_failure: abort,");
    assert_changes("timeout: 2m,\n", "timeout: 3m,\n");
    assert_changes("timeout: 48h,", "timeout: 24h,");
    assert_changes("effect: external,", "effect: internal,");
    assert_changes("idempotent: true,", "idempotent: false,");
}

#[test]
fn human_policies_change_it() {
    assert_changes(
        r#"assignee: "trust_and_safety_team","#,
        r#"assignee: "support_team","#,
    );
    assert_changes(
        r#"escalate("trust_and_safety_leads")"#,
        r#"escalate("support_leads")"#,
    );
    assert_changes(
        r#"on_timeout: escalate("trust_and_safety_leads"),"#,
        "on_timeout: reject,",
    );
}

#[test]
fn step_ids_inputs_and_order_change_it() {
    let base = spec(BASE);
    let input = spec(&BASE.replace("signup", "new_signup"));
    assert_ne!(base.fingerprint(), input.fingerprint());
    let renamed = spec(&BASE.replace("activate_account", "enable_account"));
    assert_ne!(base.fingerprint(), renamed.fingerprint());
}

// ------------------------------------------------------------------------------- stability

/// The fingerprint of a spec must not move from one release to the next: runs recorded
/// with it would be parked. This pins the projection of the onboarding spec; a model field
/// added later and left unused must leave it as it is. If this fails, the change re-pins
/// every run in flight: bump the projection's version on purpose, or project the new field
/// only when a spec uses it.
#[test]
fn the_fingerprint_of_a_spec_is_stable_across_releases() {
    let base = spec(BASE);
    let expected = r#"workflow-behaviour 1
input signup: Signup
input plan: Option<Plan>
env Services
step 0 create_account action
  output User
  deps []
  on_failure Abort
  timeout -
  retry -
  condition -
  action accounts::create_user_record(env, input#0, literal "standard")
  compensate accounts::delete(env, step#0)
  reconcile -
  effect Internal
  idempotent false
step 1 send_welcome_email action
  output Receipt
  deps [0]
  on_failure Continue
  timeout -
  retry -
  condition -
  action mail::send_welcome(env, ctx, step#0)
  compensate -
  reconcile -
  effect External
  idempotent true
step 2 provision_workspace action
  output Vec<Workspace>
  deps [0]
  on_failure Abort
  timeout 120000000us
  retry max_attempts=3 backoff=exponential initial=1000000us max=60000000us multiplier=2 jitter=full deadline=- retry_on=[timeout,unavailable]
  condition -
  action workspaces::create(env, ctx, step#0)
  compensate -
  reconcile -
  effect Internal
  idempotent false
step 3 human_review human
  output Approval
  deps [1,2]
  on_failure Abort
  timeout 172800000000us
  retry -
  condition -
  assignee "trust_and_safety_team"
  on_timeout escalate "trust_and_safety_leads"
step 4 activate_account action
  output ()
  deps [0,3]
  on_failure Abort
  timeout -
  retry -
  condition human_review.approved&&plan.as_ref().is_some_and(|p|p.paid)
  action accounts::set_active(env, step#0)
  compensate -
  reconcile -
  effect Internal
  idempotent false
"#;
    assert_eq!(base.behaviour(), expected);
    assert_eq!(base.fingerprint(), "4245207fc1e9d532");
}

#[test]
fn the_fingerprint_is_sixteen_hex_digits_and_deterministic() {
    let fingerprint = spec(BASE).fingerprint();
    assert_eq!(fingerprint.len(), 16);
    assert!(fingerprint.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(fingerprint, spec(BASE).fingerprint());
}

// ---------------------------------------------------------------------- the journaled name

#[test]
fn the_journaled_name_defaults_to_the_type_name() {
    let base = spec(BASE);
    assert_eq!(base.name, "UserOnboarding");
    assert_eq!(base.journal_name, None);
    assert_eq!(base.journaled_name(), "UserOnboarding");
}

#[test]
fn the_workflow_attribute_sets_the_journaled_name_and_keeps_the_type_name() {
    let versioned = edited(
        "pub workflow UserOnboarding(",
        "#[workflow(name = \"UserOnboarding\")]\n #[allow(dead_code)]\n pub workflow UserOnboardingV1(",
    );
    assert_eq!(versioned.name, "UserOnboardingV1");
    assert_eq!(versioned.journal_name.as_deref(), Some("UserOnboarding"));
    assert_eq!(versioned.journaled_name(), "UserOnboarding");
    // The model records it; a spec without it serializes as before.
    let json = serde_json::to_string(&versioned).expect("serializes");
    assert!(json.contains("\"journal_name\":\"UserOnboarding\""));
    assert!(!serde_json::to_string(&spec(BASE))
        .expect("serializes")
        .contains("journal_name"));
    let back: Spec = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, versioned);
}

fn attribute_errors(attribute: &str) -> Vec<String> {
    let source = BASE.replacen(
        "pub workflow UserOnboarding(",
        &format!("{attribute}\n pub workflow UserOnboarding("),
        1,
    );
    let parsed = parse_str(&source);
    assert!(parsed.spec.is_none(), "{attribute} was accepted");
    parsed.errors.iter().map(ToString::to_string).collect()
}

fn assert_one_error(attribute: &str, parts: &[&str]) {
    let errors = attribute_errors(attribute);
    assert_eq!(errors.len(), 1, "{attribute}: {errors:#?}");
    for part in parts {
        assert!(
            errors[0].contains(part),
            "{attribute}: expected {part:?} in {:?}",
            errors[0]
        );
    }
}

#[test]
fn malformed_workflow_attributes_are_errors() {
    assert_one_error(
        "#[workflow(nme = \"X\")]",
        &[
            "unknown key `nme` in `#[workflow(...)]`",
            "did you mean `name`?",
        ],
    );
    assert_one_error(
        "#[workflow(version = 2)]",
        &["unknown key `version`", "takes only `name"],
    );
    assert_one_error(
        "#[workflow(name = UserOnboarding)]",
        &["must be a string literal", "name = \"UserOnboarding\""],
    );
    assert_one_error("#[workflow(name = \"\")]", &["must not be empty"]);
    assert_one_error("#[workflow(name = \"  \")]", &["must not be empty"]);
    assert_one_error(
        "#[workflow(name = \"user/onboarding\")]",
        &["contains `/`", "idempotency key"],
    );
    assert_one_error("#[workflow(name = \"A\", name = \"B\")]", &["set twice"]);
    assert_one_error(
        "#[workflow(name = \"A\")]\n#[workflow(name = \"B\")]",
        &["set twice"],
    );
    assert_one_error("#[workflow]", &["expected `#[workflow(name = \"...\")]`"]);
    assert_one_error(
        "#[workflow = \"A\"]",
        &["expected `#[workflow(name = \"...\")]`"],
    );
    assert_one_error("#[workflow(name)]", &["expected `=`"]);
}

#[test]
fn an_attribute_mistake_does_not_hide_the_spec_mistakes() {
    let source = BASE
        .replacen(
            "pub workflow UserOnboarding(",
            "#[workflow(nam = \"X\")]\n pub workflow UserOnboarding(",
            1,
        )
        .replacen("timeout: 2m,", "timeout: 2mins,", 1);
    let errors: Vec<String> = parse_str(&source)
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 2, "{errors:#?}");

    assert!(errors[0].contains("unknown key `nam`"));
    assert!(errors[1].contains("unknown duration unit `mins`"));
}

// ------------------------------------------------------------- quorum and presentation keys

const REVIEW: &str = r#"            on_timeout: escalate("trust_and_safety_leads"),
        }"#;

#[test]
fn a_title_and_shown_values_do_not_change_it() {
    assert_same(
        REVIEW,
        r#"            on_timeout: escalate("trust_and_safety_leads"),
            title: "Review {signup.email} ({create_account.id})",
            show: [signup.email, create_account, provision_workspace],
        }"#,
    );
}

#[test]
fn approvals_and_self_approval_change_it_and_their_defaults_do_not() {
    assert_same(
        REVIEW,
        r#"            on_timeout: escalate("trust_and_safety_leads"),
            approvals: 1,
            self_approval: true,
        }"#,
    );
    assert_changes(
        REVIEW,
        r#"            on_timeout: escalate("trust_and_safety_leads"),
            approvals: 2,
        }"#,
    );
    assert_changes(
        REVIEW,
        r#"            on_timeout: escalate("trust_and_safety_leads"),
            self_approval: false,
        }"#,
    );
    let two = edited(
        REVIEW,
        r#"            on_timeout: escalate("trust_and_safety_leads"),
            approvals: 2,
        }"#,
    );
    let three = edited(
        REVIEW,
        r#"            on_timeout: escalate("trust_and_safety_leads"),
            approvals: 3,
        }"#,
    );
    assert_ne!(two.fingerprint(), three.fingerprint());
}

#[test]
fn the_decision_type_changes_it() {
    assert_changes(
        "human human_review -> Approval {",
        "human human_review -> ReviewForm {",
    );
}

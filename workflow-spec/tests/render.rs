//! The diagram renderers: snapshots of the onboarding workflow of DESIGN.md in every
//! format, plus assertions on what each diagram must show and on malformed models.
//!
//! Regenerate the snapshots with `UPDATE_SNAPSHOTS=1 cargo test -p workflow-spec --test render`
//! and read the diff.

use std::time::Duration;

mod support;

use support::{assert_snapshot, assert_well_formed};
use workflow_spec::render::{dot, mermaid, svg};
use workflow_spec::{
    format_duration, ActionStep, Arg, Backoff, Call, Effect, ErrorKind, HumanStep, Input, Jitter,
    OnFailure, OnTimeout, RetryPolicy, Spec, Step, StepKind,
};

// ---------------------------------------------------------------- specs built by hand

/// How the renderers print a duration; the assertions below use it rather than spelling
/// `48h` or `2d`, so they follow `format_duration`.
fn fmt_secs(secs: u64) -> String {
    format_duration(Duration::from_secs(secs))
}

fn call(path: &str, args: Vec<Arg>) -> Call {
    Call {
        path: path.to_owned(),
        args,
    }
}

fn action(id: &str, output: &str, call: Call, deps: Vec<usize>) -> Step {
    Step {
        id: id.to_owned(),
        doc: String::new(),
        output: output.to_owned(),
        kind: StepKind::Action(ActionStep {
            call,
            compensate: None,
            reconcile: None,
            effect: Effect::Internal,
            idempotent: false,
            spawn: false,
            for_each: None,
        }),
        deps,
        on_failure: OnFailure::Abort,
        timeout: None,
        retry: None,
        condition: None,
        optional: false,
        concurrency: None,
        rate: None,
    }
}

fn human(id: &str, assignee: &str, on_timeout: OnTimeout, deps: Vec<usize>) -> Step {
    Step {
        id: id.to_owned(),
        doc: String::new(),
        output: "Approval".to_owned(),
        kind: StepKind::Human(HumanStep::new(assignee, on_timeout)),
        deps,
        on_failure: OnFailure::Abort,
        timeout: Some(Duration::from_secs(48 * 3600)),
        retry: None,
        condition: None,
        optional: false,
        concurrency: None,
        rate: None,
    }
}

fn action_parts(step: &mut Step) -> &mut ActionStep {
    match &mut step.kind {
        StepKind::Action(action) => action,
        _ => panic!("{} is not an action step", step.id),
    }
}

fn spec(name: &str, steps: Vec<Step>) -> Spec {
    Spec {
        name: name.to_owned(),
        journal_name: None,
        doc: String::new(),
        inputs: Vec::new(),
        env: None,
        steps,
        schedule: None,
        search: Vec::new(),
        retention: None,
        concurrency: None,
        priority: None,
        debounce: None,
    }
}

/// The `UserOnboarding` workflow of DESIGN.md, as the parser would lower it.
fn onboarding() -> Spec {
    let create_account = action(
        "create_account",
        "User",
        call(
            "accounts::create_user_record",
            vec![Arg::Env, Arg::Input(0)],
        ),
        vec![],
    );

    let mut send_welcome_email = action(
        "send_welcome_email",
        "Receipt",
        call("mail::send_welcome", vec![Arg::Env, Arg::Ctx, Arg::Step(0)]),
        vec![0],
    );
    action_parts(&mut send_welcome_email).effect = Effect::External;
    send_welcome_email.on_failure = OnFailure::Continue;
    send_welcome_email.optional = true;

    let mut provision_workspace = action(
        "provision_workspace",
        "Workspace",
        call("workspaces::create", vec![Arg::Env, Arg::Ctx, Arg::Step(0)]),
        vec![0],
    );
    provision_workspace.retry = Some(RetryPolicy {
        max_attempts: 3,
        backoff: Backoff::Exponential,
        initial: Duration::from_secs(1),
        max: Duration::from_secs(60),
        multiplier: 2.0,
        jitter: Jitter::Full,
        deadline: None,
        retry_on: ErrorKind::TRANSIENT.to_vec(),
    });
    provision_workspace.timeout = Some(Duration::from_secs(120));

    let human_review = human(
        "human_review",
        "trust_and_safety_team",
        OnTimeout::Escalate("trust_and_safety_leads".to_owned()),
        vec![2],
    );

    let mut activate_account = action(
        "activate_account",
        "()",
        call("accounts::set_active", vec![Arg::Env, Arg::Step(0)]),
        vec![0, 3],
    );
    activate_account.condition = Some("human_review.approved".to_owned());
    activate_account.optional = true;

    Spec {
        name: "UserOnboarding".to_owned(),
        journal_name: None,
        doc: "Onboard a new user from signup to first value.".to_owned(),
        inputs: vec![Input {
            name: "signup".to_owned(),
            ty: "Signup".to_owned(),
        }],
        env: Some("Services".to_owned()),
        steps: vec![
            create_account,
            send_welcome_email,
            provision_workspace,
            human_review,
            activate_account,
        ],
        schedule: None,
        search: Vec::new(),
        retention: None,
        concurrency: None,
        priority: None,
        debounce: None,
    }
}

/// A saga with a compensation, a reconciled external effect, and human checkpoints that
/// abort, approve and reject on timeout.
fn payments() -> Spec {
    let mut charge = action(
        "charge_card",
        "Charge",
        call("billing::charge", vec![Arg::Env, Arg::Ctx]),
        vec![],
    );
    {
        let parts = action_parts(&mut charge);
        parts.effect = Effect::External;
        parts.idempotent = true;
        parts.compensate = Some(call("billing::refund", vec![Arg::Env, Arg::Step(0)]));
        parts.reconcile = Some(call("billing::find_charge", vec![Arg::Env, Arg::Ctx]));
    }
    charge.retry = Some(RetryPolicy {
        max_attempts: 5,
        backoff: Backoff::Fixed,
        initial: Duration::from_millis(500),
        jitter: Jitter::None,
        deadline: Some(Duration::from_secs(30)),
        retry_on: vec![ErrorKind::Timeout, ErrorKind::NotFound],
        ..RetryPolicy::default()
    });
    let mut sign_off = human("finance_sign_off", "finance", OnTimeout::Abort, vec![0]);
    sign_off.timeout = Some(Duration::from_secs(86_400));
    let auto_approve = human("auto_approve", "ops", OnTimeout::Approve, vec![0]);
    let auto_reject = human("auto_reject", "risk", OnTimeout::Reject, vec![1, 2]);
    spec(
        "Payments",
        vec![charge, sign_off, auto_approve, auto_reject],
    )
}

// ---------------------------------------------------------------- snapshots

#[test]
fn onboarding_mermaid_snapshot() {
    assert_snapshot("onboarding.mmd", &mermaid(&onboarding()));
}

#[test]
fn onboarding_dot_snapshot() {
    assert_snapshot("onboarding.dot", &dot(&onboarding()));
}

#[test]
fn onboarding_svg_snapshot() {
    assert_snapshot("onboarding.svg", &svg(&onboarding()));
}

#[test]
fn payments_snapshots() {
    let spec = payments();
    assert_snapshot("payments.mmd", &mermaid(&spec));
    assert_snapshot("payments.dot", &dot(&spec));
    assert_snapshot("payments.svg", &svg(&spec));
}

// ---------------------------------------------------------------- what the diagrams show

#[test]
fn mermaid_shows_every_part_of_the_onboarding_spec() {
    let out = mermaid(&onboarding());
    assert!(out.starts_with("flowchart TD\n"), "{out}");
    // Nodes: id and output type, in declaration order.
    let order: Vec<usize> = [
        "create_account[\"create_account: User",
        "send_welcome_email[\"send_welcome_email: Receipt",
        "provision_workspace[\"provision_workspace: Workspace",
        "human_review{{\"human_review: Approval",
        "activate_account[\"activate_account: ()",
    ]
    .iter()
    .map(|node| {
        out.find(node)
            .unwrap_or_else(|| panic!("no `{node}` in\n{out}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{out}");
    // The human checkpoint: hexagon, assignee, timeout, escalation.
    let (h48, m2, s1, s60) = (
        fmt_secs(48 * 3600),
        fmt_secs(120),
        fmt_secs(1),
        fmt_secs(60),
    );
    assert!(out.contains(&format!(
        "human_review{{{{\"human_review: Approval<br/>assignee: trust_and_safety_team\
         <br/>timeout {h48}<br/>on timeout: escalate -#gt; trust_and_safety_leads\"}}}}"
    )));
    // Retry and the per-attempt timeout on the node.
    assert!(out.contains(&format!(
        "retry 3x exponential {s1}..{s60}, jitter full<br/>timeout {m2} per attempt"
    )));
    // External effect and `continue`.
    assert!(
        out.contains("send_welcome_email: Receipt<br/>effect: external<br/>on failure: continue")
    );
    assert!(out.contains("class send_welcome_email external"));
    assert!(out.contains("class send_welcome_email continueOnFailure"));
    assert!(out.contains("class human_review human"));
    // Edges from dependency to dependent, the condition on the edges into the conditional step.
    assert!(out.contains("    create_account --> send_welcome_email\n"));
    assert!(out.contains("    provision_workspace --> human_review\n"));
    assert!(out.contains("    create_account -->|\"if human_review.approved\"| activate_account\n"));
    assert!(out.contains("    human_review -->|\"if human_review.approved\"| activate_account\n"));
}

#[test]
fn dot_shows_every_part_of_the_onboarding_spec() {
    let out = dot(&onboarding());
    assert!(out.starts_with("digraph \"UserOnboarding\" {\n"), "{out}");
    assert!(out.ends_with("}\n"));
    let (h48, m2, s1, s60) = (
        fmt_secs(48 * 3600),
        fmt_secs(120),
        fmt_secs(1),
        fmt_secs(60),
    );
    assert!(out.contains(&format!(
        "\"human_review\" [label=\"human_review: Approval\\nassignee: trust_and_safety_team\
         \\ntimeout {h48}\\non timeout: escalate -> trust_and_safety_leads\", shape=hexagon"
    )));
    assert!(out.contains(&format!(
        "retry 3x exponential {s1}..{s60}, jitter full\\ntimeout {m2} per attempt"
    )));
    assert!(out.contains(
        "\"send_welcome_email\" [label=\"send_welcome_email: Receipt\\neffect: external\
         \\non failure: continue\", style=\"rounded,dashed\", peripheries=2];"
    ));
    assert!(out.contains("    \"create_account\" -> \"provision_workspace\";\n"));
    assert!(out.contains(
        "    \"human_review\" -> \"activate_account\" [label=\"if human_review.approved\"];\n"
    ));
}

#[test]
fn svg_shows_every_part_of_the_onboarding_spec() {
    let out = svg(&onboarding());
    assert!(out.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\""));
    assert!(out.contains(" viewBox=\"0 0 "));
    assert!(out.contains("<marker id=\"wf-arrow\""));
    assert!(out.contains("marker-end=\"url(#wf-arrow)\""));
    assert!(out.contains("font-family=\"Helvetica, Arial, sans-serif\""));
    // One hexagon, for the human checkpoint, with its own fill.
    assert_eq!(out.matches("<polygon ").count(), 1);
    assert!(out.contains("fill=\"#fff4d6\""));
    let (h48, m2, s1, s60) = (
        fmt_secs(48 * 3600),
        fmt_secs(120),
        fmt_secs(1),
        fmt_secs(60),
    );
    for text in [
        ">create_account: User<".to_owned(),
        ">human_review: Approval<".to_owned(),
        ">assignee: trust_and_safety_team<".to_owned(),
        format!(">timeout {h48}<"),
        ">on timeout: escalate -&gt; trust_and_safety_leads<".to_owned(),
        format!(">retry 3x exponential {s1}..{s60}, jitter full<"),
        format!(">timeout {m2} per attempt<"),
        ">effect: external<".to_owned(),
        ">on failure: continue<".to_owned(),
        ">if human_review.approved<".to_owned(),
    ] {
        assert!(out.contains(&text), "no `{text}` in\n{out}");
    }
    // The condition is drawn once, where the edges meet, not on the node.
    assert_eq!(out.matches("if human_review.approved").count(), 1);
    // Five edges, each with an arrowhead: create -> welcome, create -> provision,
    // provision -> review, and two into activate_account.
    assert_eq!(out.matches("marker-end=\"url(#wf-arrow)\"").count(), 5);
    assert_well_formed(&out);
}

#[test]
fn compensation_and_every_on_timeout_render() {
    let spec = payments();
    let (mermaid, dot, svg) = (mermaid(&spec), dot(&spec), svg(&spec));
    for out in [&mermaid, &dot, &svg] {
        for text in [
            "undo: billing::refund".to_owned(),
            "reconcile: billing::find_charge".to_owned(),
            "effect: external, idempotent".to_owned(),
            format!(
                "retry 5x fixed {}, deadline {}",
                format_duration(Duration::from_millis(500)),
                fmt_secs(30)
            ),
            "retry on: timeout, not_found".to_owned(),
            "on timeout: abort".to_owned(),
            "on timeout: approve".to_owned(),
            "on timeout: reject".to_owned(),
            format!("timeout {}", fmt_secs(86_400)),
        ] {
            assert!(out.contains(&text), "no `{text}` in\n{out}");
        }
    }
    assert_eq!(mermaid.matches("{{\"").count(), 3);
    assert_eq!(dot.matches("shape=hexagon").count(), 3);
    assert_eq!(svg.matches("<polygon ").count(), 3);
    assert_well_formed(&svg);
}

#[test]
fn continue_steps_have_dashed_edges_out() {
    let mut first = action("fetch", "Data", call("io::fetch", vec![]), vec![]);
    first.on_failure = OnFailure::Continue;
    let second = action(
        "store",
        "()",
        call("io::store", vec![Arg::Step(0)]),
        vec![0],
    );
    let spec = spec("Dashed", vec![first, second]);
    assert!(mermaid(&spec).contains("    fetch -.-> store\n"));
    assert!(dot(&spec).contains("    \"fetch\" -> \"store\" [style=dashed];\n"));
    let svg = svg(&spec);
    assert!(svg.contains("stroke-dasharray=\"6 4\" marker-end=\"url(#wf-arrow)\""));
    assert_eq!(
        svg.matches("stroke-dasharray").count(),
        2,
        "outline and edge"
    );
}

#[test]
fn a_condition_without_edges_in_is_shown_on_the_node() {
    let mut only = action("maybe", "()", call("do_it", vec![]), vec![]);
    only.condition = Some("signup.beta".to_owned());
    let spec = spec("Lonely", vec![only]);
    assert!(mermaid(&spec).contains("maybe[\"maybe: ()<br/>if signup.beta\"]"));
    assert!(dot(&spec).contains("label=\"maybe: ()\\nif signup.beta\""));
    assert!(svg(&spec).contains(">if signup.beta</text>"));
}

// ---------------------------------------------------------------- robustness

#[test]
fn an_empty_spec_renders() {
    let empty = spec("Empty", vec![]);
    assert_eq!(mermaid(&empty), "flowchart TD\n");
    assert_eq!(
        dot(&empty),
        "digraph \"Empty\" {\n    rankdir=TB;\n    node [shape=box, style=rounded, \
         fontname=\"Helvetica,Arial,sans-serif\", fontsize=12];\n    edge \
         [fontname=\"Helvetica,Arial,sans-serif\", fontsize=10];\n}\n"
    );
    let svg = svg(&empty);
    assert!(svg.contains("width=\"40\" height=\"40\" viewBox=\"0 0 40 40\""));
    assert_well_formed(&svg);
}

#[test]
fn bad_indices_cycles_and_repeats_do_not_panic() {
    let steps = vec![
        action("a", "A", call("f", vec![]), vec![2, 99, usize::MAX]),
        action("b", "B", call("f", vec![]), vec![0, 0, 1]),
        human("c", "g", OnTimeout::Abort, vec![1, 7]),
    ];
    let spec = spec("Broken", steps);
    let mermaid = mermaid(&spec);
    assert!(!mermaid.contains("99"));
    assert_eq!(
        mermaid.matches("a --> b").count(),
        1,
        "repeated deps drawn once"
    );
    assert!(mermaid.contains("c --> a"), "the cycle is drawn");
    assert!(mermaid.contains("b --> b"), "the self-loop is drawn");
    let dot = dot(&spec);
    assert_eq!(dot.matches(" -> ").count(), 4);
    let svg = svg(&spec);
    assert_eq!(
        svg.matches("marker-end=").count(),
        3,
        "no self-loop in the SVG"
    );
    assert_well_formed(&svg);
}

#[test]
fn every_format_escapes_its_special_characters() {
    let mut odd = human(
        "end",
        "R&D \"ops\" | <core> [team] #1 %%{init}%%",
        OnTimeout::Escalate("leads\\\"x\"\n</text>".to_owned()),
        vec![],
    );
    odd.output = "Vec<Option<&'static str>>".to_owned();
    let mut next = action("end", "()", call("f", vec![]), vec![0]);
    next.condition = Some("end.approved && x > \"y\" | z".to_owned());
    let spec = spec("Odd \"name\"", vec![odd, next]);

    let mermaid = mermaid(&spec);
    // Reserved and repeated ids get safe, unique node names.
    assert!(mermaid.contains("    step0{{\"end: Vec#lt;Option#lt;#amp;'static str#gt;#gt;"));
    assert!(mermaid.contains("    step1[\"end: ()"));
    assert!(mermaid.contains(
        "assignee: R#amp;D #quot;ops#quot; #124; #lt;core#gt; [team] #35;1 #37;#37;{init}#37;#37;"
    ));
    assert!(mermaid
        .contains("step0 -->|\"if end.approved #amp;#amp; x #gt; #quot;y#quot; #124; z\"| step1"));
    for line in mermaid.lines().skip(1) {
        let quotes = line.matches('"').count();
        assert!(quotes == 0 || quotes == 2, "unbalanced quotes in `{line}`");
    }

    let dot = dot(&spec);
    assert!(dot.starts_with("digraph \"Odd \\\"name\\\"\" {"));
    assert!(dot.contains("assignee: R&D \\\"ops\\\" | <core> [team] #1 %%{init}%%"));
    assert!(dot.contains("escalate -> leads\\\\\\\"x\\\" </text>"));
    assert!(dot.contains("label=\"if end.approved && x > \\\"y\\\" | z\""));

    let svg = svg(&spec);
    assert!(svg.contains("<title>Odd &quot;name&quot;</title>"));
    assert!(svg.contains(">end: Vec&lt;Option&lt;&amp;&apos;static str&gt;&gt;</text>"));
    assert!(svg.contains(">on timeout: escalate -&gt; leads\\&quot;x&quot; &lt;/text&gt;</text>"));
    assert!(svg.contains(">if end.approved &amp;&amp; x &gt; &quot;y&quot; | z</text>"));
    assert_well_formed(&svg);
}

#[test]
fn output_is_stable() {
    let spec = onboarding();
    assert_eq!(mermaid(&spec), mermaid(&spec.clone()));
    assert_eq!(dot(&spec), dot(&spec.clone()));
    assert_eq!(svg(&spec), svg(&spec.clone()));
}

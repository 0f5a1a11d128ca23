//! The checks of map steps, child workflows and events, without rustc: the message of
//! every mistake (one error per mistake, with a `help:`). The trybuild cases in
//! `compile-tests/ui/{map,child,event}` check the spans.

mod support;

use std::time::Duration;

use support::{assert_says, messages, one_error, spec, FULFIL};
use workflow_spec::parse::parse_str;
use workflow_spec::Arg;

/// A workflow with an input `order` and a map step `reserve` with `fields`.
fn map_step(fields: &str) -> String {
    format!(
        "workflow W(order: Order) {{ step first -> u32 {{ action: f(), }} step reserve -> Hold {{ {fields} }} }}"
    )
}

/// A workflow with an input `order`, a step `first` and a step `ship` with `fields`.
fn child_step(fields: &str) -> String {
    format!(
        "workflow W(order: Order) env Shop {{ step first -> u32 {{ action: f(), }} step ship -> ShippingOutputs {{ {fields} }} }}"
    )
}

/// A workflow with one event `payment` with `fields`.
fn event(fields: &str) -> String {
    format!("workflow W() {{ event payment -> Paid {{ {fields} }} }}")
}

// ------------------------------------------------------------------------------ map steps

#[test]
fn concurrency_is_at_least_one() {
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(line), concurrency: 0,",
    ));
    assert_says(
        &error,
        &[
            "`concurrency: 0` would never start an item of `reserve`",
            "help: allow at least one item in flight",
        ],
    );
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(line), concurrency: eight,",
    ));
    assert_says(
        &error,
        &["`concurrency` expects a whole number", "`concurrency: 8`"],
    );
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(line), concurrency: 99999999999,",
    ));
    assert_says(&error, &["must be a whole number of items"]);
}

#[test]
fn the_item_binding_shadows_nothing() {
    let error = one_error(&map_step(
        "for_each: first in order.lines, action: g(first),",
    ));
    assert_says(
        &error,
        &[
            "the item `first` of `reserve` has the name of a step",
            "help: rename the item",
        ],
    );
    let error = one_error(&map_step(
        "for_each: order in order.lines, action: g(order),",
    ));
    assert_says(
        &error,
        &["the item `order` of `reserve` has the name of a workflow input"],
    );
    let error = one_error(&map_step("for_each: ctx in order.lines, action: g(ctx),"));
    assert_says(
        &error,
        &["`ctx` is reserved and cannot name the items of `reserve`"],
    );
}

#[test]
fn the_action_takes_the_item() {
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(first),",
    ));
    assert_says(
        &error,
        &[
            "map step `reserve` never passes its item `line` to its action",
            "help: pass it: `action: g(..., line)`",
        ],
    );
    // A misspelt item is one error, with the item as the suggestion.
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(lin), compensate: h(line),",
    ));
    assert!(error.contains("unknown step or input `lin`"), "{error}");
    assert!(!error.contains("never passes"), "{error}");
}

#[test]
fn map_keys_need_a_map() {
    let error = one_error(&map_step("action: g(order), concurrency: 4,"));
    assert_says(
        &error,
        &[
            "`concurrency` applies to the items of a map, but `reserve` has no `for_each`",
            "help: add `for_each: item in source,`",
        ],
    );
    let error = one_error(&map_step("action: g(order), on_item_failure: skip,"));
    assert_says(&error, &["`on_item_failure` applies to the items of a map"]);
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(line), on_item_failure: skipp,",
    ));
    assert_says(
        &error,
        &[
            "unknown `on_item_failure` value `skipp`; expected `abort` or `skip`",
            "did you mean `skip`?",
        ],
    );
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(line), on_item_failure: ignore,",
    ));
    assert_says(
        &error,
        &["help: `abort` fails the step when an item fails; `skip` leaves"],
    );
    let error = one_error(&map_step(
        "for_each: line in order.lines, for_each: x in order.lines, action: g(line),",
    ));
    assert_says(&error, &["duplicate key `for_each` in step `reserve`"]);
}

#[test]
fn for_each_reads_item_in_source() {
    let error = one_error(&map_step("for_each: line order.lines, action: g(line),"));
    assert_says(
        &error,
        &[
            "expected `in` after `line`",
            "help: write `for_each: line in order.lines`",
        ],
    );
    let error = one_error(&map_step("for_each: line in, action: g(line),"));
    assert_says(&error, &["`for_each` needs the items after `in`"]);
    let error = one_error(&map_step("for_each: (a, b) in order.pairs, action: g(a),"));
    assert_says(
        &error,
        &["a map binds each item to one name, not a pattern"],
    );
    let error = one_error(&map_step("for_each: 3 in order.lines, action: g(order),"));
    assert_says(&error, &["`for_each` expects `item in source`"]);
}

#[test]
fn a_source_reads_inputs_and_upstream_outputs_only() {
    let error = one_error(&map_step("for_each: line in ordr.lines, action: g(line),"));
    assert_says(
        &error,
        &[
            "unknown step or input `ordr` in the items of `reserve` (`for_each`)",
            "did you mean `order`?",
        ],
    );
    let error = one_error(
        "workflow W(order: Order) env Shop { step reserve -> Hold { for_each: line in env.lines, action: g(line), } }",
    );
    assert_says(
        &error,
        &[
            "the items of `reserve` cannot be read from `env`",
            "help: compute the items in a step",
        ],
    );
    let error = one_error(&map_step("for_each: line in reserve, action: g(line),"));
    assert_says(
        &error,
        &["the items of `reserve` cannot come from its own output"],
    );
    let error = one_error(&map_step("for_each: line in line.parts, action: g(line),"));
    assert_says(&error, &["cannot be read from its own item `line`"]);
    // Reading an upstream step makes it a dependency, so it is upstream by construction.
    let spec = spec(&map_step("for_each: n in 0..first, action: g(n),"));
    assert_eq!(spec.steps[1].deps, [0]);
}

#[test]
fn the_item_is_local_to_its_step_calls() {
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(line), condition: line.quantity > 0,",
    ));
    assert_says(
        &error,
        &[
            "the condition of `reserve` cannot read its item `line`",
            "filter the items in the `for_each` source",
        ],
    );
    let error = one_error(&map_step(
        "for_each: line in order.lines, action: g(line), depends_on: [line],",
    ));
    assert_says(
        &error,
        &["`line` is the item of map step `reserve`, not a step"],
    );
    let error = one_error(
        "workflow W(order: Order) { step reserve -> Hold { for_each: line in order.lines, action: g(line), } step other -> () { action: h(line), } }",
    );
    assert_says(
        &error,
        &["unknown step or input `line` in argument of `action`"],
    );
}

#[test]
fn a_map_runs_an_action_not_a_child_workflow() {
    let error = one_error(&child_step(
        "for_each: line in order.lines, workflow: Shipping(order),",
    ));
    assert_says(
        &error,
        &["step `ship` maps over items and runs child workflow `Shipping`"],
    );
}

// ---------------------------------------------------------------------- child workflows

#[test]
fn a_step_runs_an_action_or_a_child_workflow() {
    let error = one_error(&child_step("action: f(), workflow: Shipping(order),"));
    assert_says(
        &error,
        &["step `ship` has both an `action` and a `workflow`: a step runs one or the other"],
    );
    let error = one_error(&child_step("depends_on: [first],"));
    assert_says(
        &error,
        &[
            "step `ship` has no `action`",
            "or `workflow: Child(field: value),` to run a child workflow",
        ],
    );
    // A misspelt `workflow` is one error.
    let error = one_error(&child_step("workflw: Shipping(order),"));
    assert_says(
        &error,
        &["unknown key `workflw`", "did you mean `workflow`?"],
    );
}

#[test]
fn a_workflow_never_runs_itself() {
    for path in ["W", "Self", "self::W"] {
        let error = one_error(&child_step(&format!("workflow: {path}(order),")));
        assert_says(
            &error,
            &[
                "workflow `W` cannot run itself as a child",
                "never itself, directly or through a child",
            ],
        );
    }
    // Another module's type of the same name is not this workflow: rustc decides.
    let spec = spec(&child_step("workflow: other::W(order),"));
    assert_eq!(
        spec.steps[1].child().map(|c| c.workflow.as_str()),
        Some("other::W")
    );
}

#[test]
fn child_inputs_are_journaled_names_or_literals() {
    let error = one_error(&child_step("workflow: Shipping(order, order: first),"));
    assert_says(
        &error,
        &["the input `order` of the child workflow is given twice"],
    );
    let error = one_error(&child_step("workflow: Shipping(order, clients: env),"));
    assert_says(
        &error,
        &[
            "`env` cannot be passed to a child workflow: the child's input is journaled",
            "its own `env` at its registration",
        ],
    );
    let error = one_error(&child_step("workflow: Shipping(order, context: ctx),"));
    assert_says(&error, &["`ctx` cannot be passed to a child workflow"]);
    let error = one_error(&child_step("workflow: Shipping(order: ordr),"));
    assert_says(
        &error,
        &[
            "unknown step or input `ordr` in the inputs of the child workflow of `ship`",
            "did you mean `order`?",
        ],
    );
    let error = one_error(&child_step("workflow: Shipping(order, previous: ship),"));
    assert_says(
        &error,
        &["step `ship` cannot pass its own output to its child workflow"],
    );
    let error = one_error(&child_step("workflow: Shipping(order: order.id),"));
    assert_says(&error, &["an argument must name a step, a workflow input"]);
    let spec = spec(&child_step(
        "workflow: Shipping(order, priority: 3, note: \"fragile\"),",
    ));
    let args: Vec<Arg> = spec.steps[1]
        .child()
        .expect("a child")
        .args
        .iter()
        .map(|arg| arg.arg.clone())
        .collect();
    assert_eq!(
        args,
        [
            Arg::Input(0),
            Arg::Literal("3".into()),
            Arg::Literal("\"fragile\"".into())
        ]
    );
}

#[test]
fn the_workflow_key_takes_a_type_and_its_inputs() {
    let error = one_error(&child_step("workflow: Shipping,"));
    assert_says(
        &error,
        &[
            "`workflow` expects a workflow type and its inputs",
            "help: pass the child's inputs: `workflow: Shipping(...)`",
        ],
    );
    let error = one_error(&child_step("workflow: \"Shipping\"(order),"));
    assert_says(&error, &["`workflow` expects the path of a workflow type"]);
    let error = one_error(&child_step("workflow: Shipping(order = order),"));
    assert_says(
        &error,
        &["the inputs of a child workflow are `field: value` pairs"],
    );
    // No inputs at all is a child whose workflow takes none.
    let spec = spec(&child_step("workflow: Cleanup(),"));
    assert!(spec.steps[1].child().is_some_and(|c| c.args.is_empty()));
}

#[test]
fn a_child_step_takes_only_the_keys_that_apply() {
    for (key, why) in [
        (
            "retry: { max_attempts: 2 },",
            "a child run is not retried as a whole",
        ),
        (
            "compensate: undo(first),",
            "a child compensates its own completed steps",
        ),
        (
            "effect: external,",
            "the child's own steps declare their effects",
        ),
        (
            "idempotent: true,",
            "the child's own steps declare their effects",
        ),
        (
            "reconcile: look(ctx),",
            "the child's own steps declare their effects",
        ),
    ] {
        let error = one_error(&child_step(&format!("workflow: Shipping(order), {key}")));
        assert_says(
            &error,
            &["does not apply to child workflow step `ship`", why],
        );
    }
    // The keys that apply.
    let spec = spec(&child_step(
        "workflow: Shipping(order), depends_on: [first], condition: order.express, on_failure: continue, timeout: 2d,",
    ));
    let ship = &spec.steps[1];
    assert_eq!(ship.deps, [0]);
    assert_eq!(ship.timeout, Some(Duration::from_secs(2 * 86_400)));
    assert!(ship.optional);
}

// ------------------------------------------------------------------------------- events

#[test]
fn an_event_waits_at_most_its_timeout() {
    let error = one_error(&event("on_timeout: abort,"));
    assert_says(
        &error,
        &[
            "event `payment` has no `timeout`: a wait must not wait forever",
            "help: add `timeout: 1h,`",
        ],
    );
    let error = one_error(&event("timeout: 0s,"));
    assert_says(
        &error,
        &["the timeout of `payment` must be longer than zero"],
    );
    let spec = spec(&event("timeout: 30m,"));
    assert_eq!(spec.steps[0].timeout, Some(Duration::from_secs(1800)));
}

#[test]
fn an_event_times_out_with_abort_or_continue() {
    for value in ["escalate(\"leads\")", "approve", "reject"] {
        let error = one_error(&event(&format!("timeout: 1h, on_timeout: {value},")));
        assert_says(
            &error,
            &[
                "an event's `on_timeout` is `abort` or `continue`",
                "is for human checkpoints",
            ],
        );
    }
    let error = one_error(&event("timeout: 1h, on_timeout: contine,"));
    assert_says(
        &error,
        &[
            "unknown `on_timeout` value `contine`; expected `abort` or `continue`",
            "did you mean `continue`?",
        ],
    );
}

#[test]
fn an_event_has_a_payload_type_and_the_keys_of_a_wait() {
    let error = one_error("workflow W() { event payment { timeout: 1h, } }");
    assert_says(
        &error,
        &[
            "event `payment` needs the type of its payload after `->`",
            "event payment -> PaymentConfirmed",
        ],
    );
    for (key, says) in [
        (
            "action: f(),",
            "an event has no `action`: it waits for a payload sent into the run",
        ),
        ("workflow: Shipping(),", "an event has no `workflow`"),
        ("for_each: x in y,", "an event has no `for_each`"),
        ("concurrency: 2,", "an event has no `concurrency`"),
        (
            "retry: { max_attempts: 2 },",
            "event `payment` cannot be retried",
        ),
        (
            "on_failure: continue,",
            "event `payment` fails only when its deadline passes",
        ),
        (
            "assignee: \"team\",",
            "`assignee` belongs to human checkpoints, not to `event payment`",
        ),
        ("timout: 1h,", "did you mean `timeout`?"),
    ] {
        let error = one_error(&event(&format!("timeout: 1h, {key}")));
        assert_says(&error, &[says]);
    }
}

#[test]
fn an_event_is_reached_through_the_run_handle() {
    let error = one_error("workflow W() { event outputs -> Paid { timeout: 1h, } }");
    assert_says(
        &error,
        &["an event cannot be named `outputs`: `run.outputs()` is already a method of the run handle", "`outputs_received`"],
    );
}

#[test]
fn the_item_keyword_list_names_event() {
    let error = one_error("workflow W() { evnt payment -> Paid { timeout: 1h, } }");
    assert_says(
        &error,
        &[
            "expected `step`, `human` or `event`, found `evnt`",
            "did you mean `event`?",
        ],
    );
}

#[test]
fn the_new_keys_belong_to_steps() {
    let human = |key: &str| {
        format!(
            "workflow W(order: Order) {{ human review -> Approval {{ assignee: \"a\", timeout: 1h, on_timeout: abort, {key} }} }}"
        )
    };
    for key in [
        "for_each: x in order.lines,",
        "workflow: Child(),",
        "concurrency: 2,",
        "on_item_failure: skip,",
    ] {
        let error = one_error(&human(key));
        assert_says(
            &error,
            &[
                "a human step has no",
                "only a `step` runs a child workflow or maps over items",
            ],
        );
    }
}

#[test]
fn mistakes_in_all_three_are_reported_together() {
    let source = FULFIL
        .replacen("concurrency: 8,", "concurrency: 0,", 1)
        .replacen("holds: reserve_lines", "holds: env", 1)
        .replacen("timeout: 1h,", "", 1);
    let parsed = parse_str(&source);
    let errors = messages(&parsed);
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors.iter().all(|error| error.contains("\nhelp: ")));
}

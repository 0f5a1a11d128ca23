//! Map steps, child workflows and events as the parser lowers them: the model good specs
//! give, its JSON, and its fingerprint.

mod support;

use std::time::Duration;

use support::{spec, FULFIL};
use workflow_spec::{
    Arg, ChildArg, OnEventTimeout, OnFailure, OnItemFailure, Spec, StepKind, DEFAULT_CONCURRENCY,
};

// --------------------------------------------------------------------- the lowered model

#[test]
fn a_map_step_lowers_with_its_items() {
    let spec = spec(FULFIL);
    let reserve = &spec.steps[0];
    let map = reserve.for_each().expect("a map");
    assert_eq!(map.binding, "line");
    assert_eq!(map.source, "order.lines");
    assert_eq!(map.concurrency, 8);
    assert_eq!(map.on_item_failure, OnItemFailure::Abort);
    assert_eq!(reserve.output, "Hold");
    assert_eq!(reserve.output_type(), "Vec<Hold>");
    let StepKind::Action(action) = &reserve.kind else {
        panic!("a map is an action step");
    };
    assert_eq!(action.call.args, [Arg::Env, Arg::Ctx, Arg::Item]);
    assert_eq!(
        action.compensate.as_ref().map(|call| call.args.clone()),
        Some(vec![Arg::Env, Arg::Step(0), Arg::Item])
    );
    assert_eq!(
        reserve.max_attempts(),
        3,
        "the retry policy applies per item"
    );

    let price = &spec.steps[1];
    let map = price.for_each().expect("a map");
    assert_eq!(
        map.source,
        "reserve_lines.into_iter().filter(|h| h.quantity != 0)"
    );
    assert_eq!(map.concurrency, DEFAULT_CONCURRENCY);
    assert_eq!(map.on_item_failure, OnItemFailure::Skip);
    assert_eq!(price.output_type(), "Vec<Option<u64>>");
    assert_eq!(
        price.action().map(|call| call.args.clone()),
        Some(vec![Arg::Item, Arg::Literal("2".into())])
    );
    // The steps a source reads are dependencies; the closure's parameter is not a read.
    assert_eq!(price.deps, [0]);
    assert!(!price.optional, "skipped items are `None` inside the `Vec`");
}

#[test]
fn a_child_step_lowers_with_its_inputs_by_field() {
    let spec = spec(FULFIL);
    let ship = &spec.steps[2];
    let child = ship.child().expect("a child step");
    assert_eq!(child.workflow, "Shipping");
    assert_eq!(
        child.name, None,
        "the journaled name is the child type's to say"
    );
    assert_eq!(
        child.args,
        [
            ChildArg {
                field: "order".into(),
                arg: Arg::Input(0)
            },
            ChildArg {
                field: "holds".into(),
                arg: Arg::Step(0)
            },
            // `express` alone passes the input of that name.
            ChildArg {
                field: "express".into(),
                arg: Arg::Input(1)
            },
        ]
    );
    assert_eq!(ship.deps, [0], "a step named in the inputs is a dependency");
    assert_eq!(ship.output, "ShippingOutputs");
    assert!(ship.action().is_none() && ship.for_each().is_none());
}

#[test]
fn an_event_lowers_with_its_deadline_and_makes_downstream_optional() {
    let spec = spec(FULFIL);
    let payment = &spec.steps[3];
    assert!(payment.is_event() && !payment.is_human());
    let StepKind::Event(event) = &payment.kind else {
        panic!("an event step");
    };
    assert_eq!(event.on_timeout, OnEventTimeout::Continue);
    assert_eq!(payment.timeout, Some(Duration::from_secs(3600)));
    assert_eq!(payment.output, "PaymentConfirmed");
    assert_eq!(payment.deps, [0]);
    assert_eq!(payment.on_failure, OnFailure::Abort);
    // `continue` on timeout: the payload may be absent, and so may what reads it.
    assert!(payment.optional);
    assert!(spec.steps[4].optional);
    assert!(!spec.steps[2].optional);

    let aborting = self::spec(&FULFIL.replace("on_timeout: continue,", ""));
    let StepKind::Event(event) = &aborting.steps[3].kind else {
        panic!("an event step");
    };
    assert_eq!(event.on_timeout, OnEventTimeout::Abort, "the default");
    assert!(!aborting.steps[3].optional);
}

#[test]
fn the_child_name_filled_in_at_run_time_leaves_the_fingerprint_alone() {
    let compiled = spec(FULFIL);
    let mut at_run_time = compiled.clone();
    if let StepKind::Child(child) = &mut at_run_time.steps[2].kind {
        child.name = Some("Shipping".into());
    }
    assert_ne!(compiled, at_run_time);
    assert_eq!(compiled.fingerprint(), at_run_time.fingerprint());
}

#[test]
fn the_model_round_trips_through_json() {
    let spec = spec(FULFIL);
    let json = serde_json::to_string(&spec).expect("serializes");
    let back: Spec = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, spec);
}

#[test]
fn map_child_and_event_fields_change_the_fingerprint() {
    let base = spec(FULFIL).fingerprint();
    let changed = |from: &str, to: &str| {
        assert!(FULFIL.contains(from), "{from:?}");
        spec(&FULFIL.replacen(from, to, 1)).fingerprint()
    };
    assert_ne!(base, changed("concurrency: 8,", "concurrency: 4,"));
    assert_ne!(base, changed("on_item_failure: skip,", ""));
    assert_ne!(
        base,
        changed("line in order.lines", "line in order.extra_lines")
    );
    assert_ne!(base, changed("holds: reserve_lines", "holds: price"));
    assert_ne!(
        base,
        changed("workflow: Shipping(", "workflow: shipping::Shipping(")
    );
    assert_ne!(base, changed("on_timeout: continue,", "on_timeout: abort,"));
    assert_ne!(base, changed("timeout: 1h,", "timeout: 2h,"));
    // Not behaviour: the item's name, the order of a child's fields, formatting.
    let renamed = FULFIL
        .replace("for_each: line in", "for_each: item in")
        .replace("reserve(env, ctx, line)", "reserve(env, ctx, item)")
        .replace("reserve_lines, line)", "reserve_lines, item)");
    assert_eq!(base, spec(&renamed).fingerprint());
    assert_eq!(
        base,
        changed(
            "order: order, holds: reserve_lines, express",
            "express, holds : reserve_lines, order: order"
        )
    );
    assert_eq!(base, changed("concurrency: 8,", "concurrency:8,"));
}

//! The code `workflow!` generates for map steps, child workflows and events, called
//! directly through the `Workflow` trait: a map's items are evaluated once and in order,
//! its action, compensation and proposal get one item each, a child step builds its
//! child's typed input, an event checks its payload's type, and a finished child's outputs
//! turn into the JSON its parent journals. The expansion is lint-clean too: this file
//! denies rustc's warnings, missing docs and unused code, and clippy holds it to
//! `clippy::all`.
#![deny(warnings, missing_docs, unused, nonstandard_style, rust_2018_idioms)]
#![deny(unreachable_pub, unused_qualifications, unused_results)]
#![deny(clippy::all)]

use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::json;
use workflow_core::__private::Value;
use workflow_core::prelude::*;
use workflow_core::{CallError, Invocation, WithItem};

/// An order of a few lines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Order {
    id: u64,
    lines: Vec<Line>,
}

/// One line of an order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    sku: String,
    quantity: u32,
}

/// Stock held for one line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hold {
    sku: String,
    quantity: u32,
}

/// A packed parcel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parcel {
    order: u64,
    items: u32,
}

/// What the payment provider sends when an order is paid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PaymentConfirmed {
    amount_cents: u64,
}

/// The shop's clients; here a log of the calls they received.
#[derive(Debug, Default)]
pub struct Shop {
    calls: Mutex<Vec<String>>,
}

impl Shop {
    fn record(&self, call: String) {
        self.calls.lock().expect("not poisoned").push(call);
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("not poisoned").clone()
    }
}

mod stock {
    use super::*;

    pub(crate) async fn reserve(
        env: &Shop,
        ctx: &StepContext,
        line: Line,
    ) -> Result<Hold, StepError> {
        env.record(format!(
            "reserve {} x{} ({})",
            line.sku, line.quantity, ctx.step
        ));
        Ok(Hold {
            sku: line.sku,
            quantity: line.quantity,
        })
    }

    pub(crate) async fn release(env: &Shop, hold: Hold, line: Line) -> Result<(), StepError> {
        env.record(format!(
            "release {} x{} for {}",
            hold.sku, hold.quantity, line.sku
        ));
        Ok(())
    }

    pub(crate) async fn price(hold: Hold) -> Result<u64, StepError> {
        Ok(u64::from(hold.quantity) * 100)
    }
}

mod shipping {
    use super::*;

    pub(crate) async fn pack(order: Order, holds: Vec<Hold>) -> Result<Parcel, StepError> {
        Ok(Parcel {
            order: order.id,
            items: holds.iter().map(|hold| hold.quantity).sum(),
        })
    }

    pub(crate) async fn confirm(
        parcel: ShippingOutputs,
        payment: Option<PaymentConfirmed>,
        prices: Vec<Option<u64>>,
    ) -> Result<(), StepError> {
        let _ = (parcel.pack, payment, prices);
        Ok(())
    }
}

workflow! {
    /// Packs and ships an order whose lines are reserved.
    pub workflow Shipping(order: Order, holds: Vec<Hold>) env Shop {
        /// Packs the held stock.
        step pack -> Parcel {
            action: shipping::pack(order, holds),
        }
    }
}

mod notify {
    use super::*;

    pub(crate) async fn ping(env: &Shop) -> Result<(), StepError> {
        env.record("ping".into());
        Ok(())
    }
}

workflow! {
    /// A workflow whose one output is `()`, journaled as `null`.
    pub workflow Notify() env Shop {
        /// Pings.
        step ping -> () {
            action: notify::ping(env),
        }
    }
}

workflow! {
    /// Reserves each line, ships through a child workflow and waits for the payment.
    pub workflow Fulfil(order: Order) env Shop {
        /// Holds stock for each line.
        step reserve_lines -> Hold {
            for_each: line in order.lines,
            action: stock::reserve(env, ctx, line),
            compensate: stock::release(env, reserve_lines, line),
            concurrency: 8,
            retry: { max_attempts: 3 },
        }
        /// Prices each hold; a line that cannot be priced is left out.
        step price -> u64 {
            for_each: hold in reserve_lines,
            action: stock::price(hold),
            on_item_failure: skip,
        }
        /// Ships the order.
        step ship -> ShippingOutputs {
            workflow: Shipping(order, holds: reserve_lines),
        }
        /// The payment provider's confirmation.
        event payment -> PaymentConfirmed {
            depends_on: [reserve_lines],
            timeout: 1h,
            on_timeout: continue,
        }
        /// Confirms the order.
        step confirm -> () {
            action: shipping::confirm(ship, payment, price),
        }
    }
}

fn order() -> Order {
    Order {
        id: 42,
        lines: vec![
            Line {
                sku: "apple".into(),
                quantity: 3,
            },
            Line {
                sku: "pear".into(),
                quantity: 1,
            },
        ],
    }
}

fn input() -> FulfilInput {
    FulfilInput { order: order() }
}

fn context(step: &'static str) -> StepContext {
    StepContext {
        workflow: <Fulfil as Workflow>::NAME,
        run_id: RunId(1),
        step,
        attempt: 1,
        idempotency_key: StepContext::key_for(<Fulfil as Workflow>::NAME, RunId(1), step),
        deadline: None,
        dry_run: false,
        trace_id: "trace".into(),
        fence: 1,
        cancel: Default::default(),
        valid_until: Default::default(),
    }
}

/// No outputs yet: what the first step reads.
fn nothing() -> Vec<Option<Value>> {
    vec![None; 5]
}

fn holds() -> Value {
    json!([
        { "sku": "apple", "quantity": 3 },
        { "sku": "pear", "quantity": 1 },
    ])
}

#[test]
fn a_map_evaluates_its_source_once_in_order() {
    let items = Fulfil::items(0, &input(), &nothing()).expect("items");
    assert_eq!(
        items,
        [
            json!({ "sku": "apple", "quantity": 3 }),
            json!({ "sku": "pear", "quantity": 1 }),
        ]
    );
    // A source over an upstream map's output reads its journaled `Vec`.
    let mut outputs = nothing();
    outputs[0] = Some(holds());
    let priced = Fulfil::items(1, &input(), &outputs).expect("items");
    assert_eq!(priced, holds().as_array().cloned().expect("an array"));
    // Without that output, the source cannot be evaluated.
    assert_eq!(
        Fulfil::items(1, &input(), &nothing()),
        Err(CallError::Absent(0))
    );
    // Steps that are not maps have no items.
    assert_eq!(
        Fulfil::items(2, &input(), &nothing()),
        Err(CallError::NoSuchCall(2))
    );
}

#[tokio::test]
async fn a_map_action_is_called_with_one_item() {
    let shop = Shop::default();
    let ctx = context("reserve_lines");
    let input = input();
    let outputs = nothing();
    let items = Fulfil::items(0, &input, &outputs).expect("items");
    let mut results = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let with_item = WithItem::new(&outputs, index, item);
        let call = Invocation::<Fulfil> {
            env: &shop,
            ctx: &ctx,
            input: &input,
            outputs: &with_item,
        };
        let action = Fulfil::action(0, call).expect("an action");
        results.push(action.await.expect("reserved"));
    }
    assert_eq!(results, holds().as_array().cloned().expect("an array"));
    assert_eq!(
        shop.calls(),
        [
            "reserve apple x3 (reserve_lines)",
            "reserve pear x1 (reserve_lines)"
        ]
    );
}

#[test]
fn a_map_call_without_its_item_or_with_a_bad_one_is_refused() {
    let shop = Shop::default();
    let ctx = context("reserve_lines");
    let input = input();
    let outputs = nothing();
    let without = Invocation::<Fulfil> {
        env: &shop,
        ctx: &ctx,
        input: &input,
        outputs: &outputs,
    };
    assert_eq!(Fulfil::action(0, without).err(), Some(CallError::NoItem(0)));
    let bad = json!({ "sku": 7 });
    let with_bad = WithItem::new(&outputs, 1, &bad);
    let call = Invocation::<Fulfil> {
        env: &shop,
        ctx: &ctx,
        input: &input,
        outputs: &with_bad,
    };
    match Fulfil::action(0, call) {
        Err(CallError::Decode { step: 0, message }) => {
            assert!(message.starts_with("item #1: "), "{message}");
        }
        Err(other) => panic!("expected a decode error, got {other:?}"),
        Ok(_) => panic!("expected a decode error, got an action"),
    }
    assert!(shop.calls().is_empty(), "no action ran");
}

#[tokio::test]
async fn a_map_compensation_gets_its_item_and_the_item_output() {
    let shop = Shop::default();
    let ctx = context("reserve_lines");
    let input = input();
    // The runtime puts the item's output at the step's index.
    let mut outputs = nothing();
    outputs[0] = Some(json!({ "sku": "pear", "quantity": 1 }));
    let item = json!({ "sku": "pear", "quantity": 1 });
    let with_item = WithItem::new(&outputs, 1, &item);
    let call = Invocation::<Fulfil> {
        env: &shop,
        ctx: &ctx,
        input: &input,
        outputs: &with_item,
    };
    Fulfil::compensate(0, call)
        .expect("a compensation")
        .await
        .expect("released");
    assert_eq!(shop.calls(), ["release pear x1 for pear"]);
}

#[test]
fn a_dry_run_proposal_of_a_map_item_shows_the_item() {
    let outputs = nothing();
    let item = json!({ "sku": "apple", "quantity": 3 });
    let proposal = Fulfil::proposal(0, &input(), &WithItem::new(&outputs, 0, &item));
    assert_eq!(proposal, json!({ "line": item }));
}

#[test]
fn a_child_step_builds_the_child_input() {
    let mut outputs = nothing();
    outputs[0] = Some(holds());
    let start = Fulfil::child(2, &input(), &outputs).expect("a child start");
    assert_eq!(start.workflow, "Shipping");
    assert_eq!(start.fingerprint, Shipping::FINGERPRINT);
    let expected = ShippingInput {
        order: order(),
        holds: serde_json::from_value(holds()).expect("holds"),
    };
    assert_eq!(
        start.input,
        serde_json::to_value(&expected).expect("serializes")
    );
    // The child's input deserializes as the child's own `…Input`.
    let back: ShippingInput = serde_json::from_value(start.input).expect("deserializes");
    assert_eq!(back.order, order());
    // A required upstream output is needed to build it.
    assert_eq!(
        Fulfil::child(2, &input(), &nothing()),
        Err(CallError::Absent(0))
    );
    assert_eq!(
        Fulfil::child(0, &input(), &outputs),
        Err(CallError::NoSuchCall(0))
    );
}

#[test]
fn a_finished_child_outputs_are_its_parent_step_output() {
    let parcel = json!({ "order": 42, "items": 4 });
    let child_outputs = vec![Some(parcel.clone())];
    let value = Shipping::outputs_value(&child_outputs).expect("outputs");
    assert_eq!(value, json!({ "pack": parcel }));
    // The parent reads that value as the child's typed outputs.
    let mut outputs = nothing();
    outputs[0] = Some(holds());
    outputs[1] = Some(json!([300, null]));
    outputs[2] = Some(value);
    let typed = Fulfil::outputs(&outputs).expect("typed outputs");
    assert_eq!(
        typed.ship.pack,
        Parcel {
            order: 42,
            items: 4
        }
    );
    assert_eq!(typed.reserve_lines.len(), 2);
    assert_eq!(typed.price, [Some(300), None]);
    // `on_timeout: continue`: the event may be absent, and so may what reads it.
    assert_eq!(typed.payment, None);
    assert_eq!(typed.confirm, None);
    assert_eq!(
        Shipping::outputs_value(&nothing()[..0].to_vec()),
        Err(CallError::Absent(0))
    );
}

#[test]
fn outputs_round_trip_through_their_json() {
    let mut outputs = nothing();
    outputs[0] = Some(holds());
    outputs[1] = Some(json!([300, null]));
    outputs[2] = Some(json!({ "pack": { "order": 42, "items": 4 } }));
    outputs[3] = Some(json!({ "amount_cents": 1250 }));
    outputs[4] = Some(Value::Null);
    let json = Fulfil::outputs_value(&outputs).expect("outputs");
    assert_eq!(
        json,
        json!({
            "reserve_lines": holds(),
            "price": [300, null],
            "ship": { "pack": { "order": 42, "items": 4 } },
            "payment": { "amount_cents": 1250 },
            // `Option<()>`: present or not, `null` (as serde writes it).
            "confirm": null,
        })
    );
    let typed: FulfilOutputs = serde_json::from_value(json.clone()).expect("deserializes");
    assert_eq!(typed.payment, Some(PaymentConfirmed { amount_cents: 1250 }));
    assert_eq!(serde_json::to_value(&typed).expect("serializes"), json);
    // A required `()` is `null` and present; a missing required output is an error.
    let unit = Notify::outputs_value(&vec![Some(Value::Null)]).expect("outputs");
    assert_eq!(unit, json!({ "ping": null }));
    let _: NotifyOutputs = serde_json::from_value(unit).expect("deserializes");
    let missing = serde_json::from_value::<ShippingOutputs>(json!({}));
    assert!(missing.is_err_and(|error| error.to_string().contains("absent")));
}

#[tokio::test]
async fn the_unit_workflow_runs_its_action() {
    let shop = Shop::default();
    let ctx = context("ping");
    let outputs: Vec<Option<Value>> = vec![None];
    let input = NotifyInput {};
    let call = Invocation::<Notify> {
        env: &shop,
        ctx: &ctx,
        input: &input,
        outputs: &outputs,
    };
    let output = Notify::action(0, call).expect("an action").await;
    assert_eq!(output, Ok(Value::Null));
    assert_eq!(shop.calls(), ["ping"]);
}

#[test]
fn an_event_payload_is_checked_against_its_type() {
    let payload = json!({ "amount_cents": 1250 });
    assert_eq!(Fulfil::event(3, payload.clone()), Ok(payload));
    match Fulfil::event(3, json!({ "amount_cents": "a lot" })) {
        Err(CallError::Decode { step: 3, .. }) => {}
        other => panic!("expected a decode error, got {other:?}"),
    }
    assert_eq!(Fulfil::event(0, json!(null)), Err(CallError::NoSuchCall(0)));
}

#[test]
fn the_model_and_the_diagrams_show_the_three_constructs() {
    let spec = Fulfil::spec();
    assert_eq!(spec.steps[0].output_type(), "Vec<Hold>");
    assert_eq!(spec.steps[1].output_type(), "Vec<Option<u64>>");
    let child = spec.steps[2].child().expect("a child step");
    assert_eq!(
        (child.workflow.as_str(), child.name.as_deref()),
        ("Shipping", Some("Shipping"))
    );
    assert_eq!(spec.steps[2].deps, [0]);
    assert!(spec.steps[3].is_event());
    assert_eq!(<Fulfil as Workflow>::CHILD_DEPTH, 1);
    assert_eq!(<Shipping as Workflow>::CHILD_DEPTH, 0);
    assert!(Fulfil::MERMAID.contains("reserve_lines[/\"reserve_lines: Vec#lt;Hold#gt;"));
    assert!(Fulfil::MERMAID.contains("ship[[\"ship: ShippingOutputs<br/>workflow Shipping\"]]"));
    assert!(Fulfil::MERMAID.contains("payment>\"payment: PaymentConfirmed"));
    assert!(Fulfil::DOT.contains("shape=box3d"));
    assert!(Fulfil::DOT.contains("shape=component"));
    assert!(Fulfil::DOT.contains("shape=cds"));
}

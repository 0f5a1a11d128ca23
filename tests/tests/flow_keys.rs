//! The values of flow control keys as the generated code reads them:
//! `Workflow::admission` from a run's input, `Workflow::step_keys` from the input and
//! upstream outputs (absent when the upstream step has none), the keys in `spec()`, and
//! limits outside the fingerprint.

use serde::{Deserialize, Serialize};
use serde_json::json;
use workflow_core::flow::{Admission, StepKeys};
use workflow_core::prelude::*;
use workflow_core::spec::{LimitKey, OnLimit};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub customer_id: String,
    pub cart_id: Option<String>,
    pub merchant_id: u64,
    pub tier: Option<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Quote {
    pub region: String,
}

async fn quote(_order: Order) -> Result<Quote, StepError> {
    Ok(Quote {
        region: "eu".into(),
    })
}

async fn charge(_order: Order, _quote: Quote) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Charge(order: Order) {
        concurrency: { key: order.customer_id, limit: 1, on_limit: skip },
        priority: order.tier,
        debounce: { key: order.cart_id, window: 5s, max_wait: 1m },
        step quote -> Quote { action: quote(order) }
        step charge -> () {
            action: charge(order, quote),
            concurrency: { key: quote.region, limit: 5 },
            rate: { key: order.merchant_id, limit: 100, per: 1m, burst: 20 },
        }
    }
}

workflow! {
    pub workflow ChargeWider(order: Order) {
        concurrency: { key: order.customer_id, limit: 9, on_limit: queue },
        priority: 7,
        step quote -> Quote { action: quote(order) }
        step charge -> () {
            action: charge(order, quote),
            concurrency: { key: "psp", limit: 50 },
            rate: { key: "psp", limit: 1, per: 1s },
        }
    }
}

workflow! {
    pub workflow ChargePlain(order: Order) {
        step quote -> Quote { action: quote(order) }
        step charge -> () { action: charge(order, quote) }
    }
}

fn order(cart: Option<&str>, tier: Option<u8>) -> ChargeInput {
    ChargeInput {
        order: Order {
            customer_id: "c-42".into(),
            cart_id: cart.map(Into::into),
            merchant_id: 77,
            tier,
        },
    }
}

#[test]
fn admission_reads_the_input() {
    assert_eq!(
        <Charge as Workflow>::admission(&order(Some("cart-1"), Some(3))),
        Admission {
            concurrency: Some("c-42".into()),
            priority: 3,
            debounce: Some("cart-1".into()),
        }
    );
    // Absent values: no debounce key, priority 0.
    assert_eq!(
        <Charge as Workflow>::admission(&order(None, None)),
        Admission {
            concurrency: Some("c-42".into()),
            priority: 0,
            debounce: None,
        }
    );
    let wider = ChargeWiderInput {
        order: order(None, Some(1)).order,
    };
    assert_eq!(
        <ChargeWider as Workflow>::admission(&wider),
        Admission {
            concurrency: Some("c-42".into()),
            priority: 7,
            debounce: None,
        }
    );
    let plain = ChargePlainInput {
        order: order(None, Some(1)).order,
    };
    assert_eq!(
        <ChargePlain as Workflow>::admission(&plain),
        Admission::default()
    );
}

#[test]
fn step_keys_read_the_input_and_upstream_outputs() {
    let input = order(None, None);
    let quoted = vec![Some(json!({ "region": "eu" })), None];
    assert_eq!(
        <Charge as Workflow>::step_keys(1, &input, &quoted).expect("keys"),
        StepKeys {
            concurrency: Some("eu".into()),
            rate: Some("77".into()),
        }
    );
    // The upstream output is absent: its key is absent, the input's is read.
    let absent: Vec<Option<serde_json::Value>> = vec![None, None];
    assert_eq!(
        <Charge as Workflow>::step_keys(1, &input, &absent).expect("keys"),
        StepKeys {
            concurrency: None,
            rate: Some("77".into()),
        }
    );
    // A step without keys has none.
    assert_eq!(
        <Charge as Workflow>::step_keys(0, &input, &absent).expect("keys"),
        StepKeys::default()
    );
    // An upstream output of the wrong shape is a decode error, not a wrong key.
    let broken = vec![Some(json!({ "zone": 1 })), None];
    assert!(<Charge as Workflow>::step_keys(1, &input, &broken).is_err());
    let wider = ChargeWiderInput { order: input.order };
    assert_eq!(
        <ChargeWider as Workflow>::step_keys(1, &wider, &absent).expect("keys"),
        StepKeys {
            concurrency: Some("psp".into()),
            rate: Some("psp".into()),
        }
    );
}

#[test]
fn the_spec_carries_the_keys() {
    let spec = Charge::spec();
    let concurrency = spec.concurrency.as_ref().expect("concurrency");
    assert_eq!(concurrency.key, LimitKey::Path("order.customer_id".into()));
    assert_eq!(
        (concurrency.limit, concurrency.on_limit),
        (1, OnLimit::Skip)
    );
    assert_eq!(spec.priority.as_deref(), Some("order.tier"));
    assert_eq!(
        spec.debounce.as_ref().map(|d| d.key.clone()),
        Some(LimitKey::Path("order.cart_id".into()))
    );
    let rate = spec.steps[1].rate.as_ref().expect("rate");
    assert_eq!((rate.limit, rate.burst), (100, 20));
    assert!(spec.steps[0].rate.is_none() && spec.steps[0].concurrency.is_none());
}

#[test]
fn limits_are_outside_the_fingerprint() {
    assert_eq!(
        <Charge as Workflow>::FINGERPRINT,
        <ChargeWider as Workflow>::FINGERPRINT
    );
    assert_eq!(
        <Charge as Workflow>::FINGERPRINT,
        <ChargePlain as Workflow>::FINGERPRINT
    );
    assert_ne!(Charge::spec().concurrency, ChargeWider::spec().concurrency);
}

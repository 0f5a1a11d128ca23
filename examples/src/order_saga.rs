//! A saga: reserve inventory, charge the payment (an external, idempotent effect), ship.
//! Shipping fails permanently (the carrier rejects the address), so the run aborts and
//! the compensations of the completed steps run in reverse completion order: refund the
//! charge, then release the reservation. The failed run lands in the dead-letter list with
//! its step, attempts, error and trace id.

use std::error::Error;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use workflow::journal::Event;
use workflow::prelude::*;
use workflow::store::DeadLetter;

use crate::{journal, Log, Progress};

/// An order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// The order id.
    pub id: String,
    /// The SKU ordered.
    pub sku: String,
    /// The amount in cents.
    pub amount_cents: u64,
    /// Where it goes.
    pub address: String,
}

/// A stock reservation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reservation {
    /// The reservation id.
    pub id: String,
}

/// A payment charge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Charge {
    /// The charge id.
    pub id: String,
    /// The amount in cents.
    pub amount_cents: u64,
}

/// The environment: stand-ins for the inventory, payment and carrier services, with a
/// shared log of every call they received, in order.
#[derive(Debug, Default)]
pub struct Shop {
    calls: Arc<Mutex<Vec<String>>>,
    log: Option<Log>,
}

impl Shop {
    fn call(&self, call: String) {
        if let Some(log) = &self.log {
            log.line(format!("      {call}"));
        }
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(call);
    }
}

/// The steps and their compensations.
pub mod shop {
    use super::*;

    /// Reserves the stock.
    pub async fn reserve(env: &Shop, order: Order) -> Result<Reservation, StepError> {
        env.call(format!(
            "[inventory] reserve 1 x {} for {}",
            order.sku, order.id
        ));
        Ok(Reservation {
            id: format!("res-{}", order.id),
        })
    }

    /// Undoes [`reserve`].
    pub async fn release(env: &Shop, reservation: Reservation) -> Result<(), StepError> {
        env.call(format!("[inventory] release {}", reservation.id));
        Ok(())
    }

    /// Charges the payment under the step's idempotency key (a second charge with the
    /// same key returns the first, as payment APIs do).
    pub async fn charge(env: &Shop, ctx: &StepContext, order: Order) -> Result<Charge, StepError> {
        env.call(format!(
            "[payments] charge {} cents for {} (idempotency key {})",
            order.amount_cents, order.id, ctx.idempotency_key
        ));
        Ok(Charge {
            id: format!("ch-{}", order.id),
            amount_cents: order.amount_cents,
        })
    }

    /// Undoes [`charge`].
    pub async fn refund(env: &Shop, charge: Charge) -> Result<(), StepError> {
        env.call(format!(
            "[payments] refund {} ({} cents)",
            charge.id, charge.amount_cents
        ));
        Ok(())
    }

    /// Books the shipment. The carrier rejects the address: a validation error, which
    /// is permanent, so it is not retried despite the step's retry policy.
    pub async fn ship(
        env: &Shop,
        ctx: &StepContext,
        order: Order,
        _reservation: Reservation,
        _charge: Charge,
    ) -> Result<String, StepError> {
        env.call(format!(
            "[carrier] book shipment to {:?} (attempt {})",
            order.address, ctx.attempt
        ));
        Err(StepError::validation(format!(
            "carrier rejected the address {:?}",
            order.address
        )))
    }
}

workflow! {
    /// Take an order: reserve, charge, ship; undo on failure.
    pub workflow OrderSaga(order: Order) env Shop {
        step reserve_inventory -> Reservation {
            action: shop::reserve(env, order),
            compensate: shop::release(env, reserve_inventory),
        }
        step charge_payment -> Charge {
            action: shop::charge(env, ctx, order),
            depends_on: [reserve_inventory],
            effect: external,
            idempotent: true,
            retry: { max_attempts: 3, backoff: exponential, initial: 200ms, max: 2s },
            compensate: shop::refund(env, charge_payment),
        }
        step ship -> String {
            action: shop::ship(env, ctx, order, reserve_inventory, charge_payment),
            effect: external,
            idempotent: true,
            retry: { max_attempts: 3, backoff: exponential, initial: 200ms, max: 2s },
        }
    }
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The run.
    pub run: RunId,
    /// Why the run failed.
    pub error: String,
    /// Every service call, in order.
    pub calls: Vec<String>,
    /// The steps compensated, in the order the journal recorded them.
    pub compensated: Vec<String>,
    /// The run's dead letter.
    pub dead_letter: Option<DeadLetter>,
}

/// Runs the order `o-1001` to its failure and compensation.
pub async fn run(log: &Log) -> Result<Summary, Box<dyn Error>> {
    let engine = Engine::builder().seed(7).build();
    let calls = Arc::new(Mutex::new(Vec::new()));
    engine.register::<OrderSaga>(Shop {
        calls: calls.clone(),
        log: Some(log.clone()),
    })?;
    let progress = Progress::start(&engine, OrderSaga::spec(), log);
    let order = Order {
        id: "o-1001".into(),
        sku: "KB-42".into(),
        amount_cents: 12_900,
        address: "221B Nowhere Street, Atlantis".into(),
    };
    log.line(format!("Placing order {}.", order.id));
    let run = engine.start::<OrderSaga>(OrderSagaInput { order }).await?;
    let error = match run.outputs().await {
        Ok(outputs) => {
            return Err(format!(
                "expected the order to fail, but it shipped: {}",
                outputs.ship
            )
            .into())
        }
        Err(error) => error.to_string(),
    };
    progress.finish().await;

    let compensated = journal(&engine, run.id())
        .await?
        .iter()
        .filter_map(|event| match event {
            Event::Compensated {
                step, error: None, ..
            } => Some(OrderSaga::spec().steps.get(*step)?.id.clone()),
            _ => None,
        })
        .collect();
    let dead_letter = engine
        .dead_letters()
        .await?
        .into_iter()
        .find(|letter| letter.run == run.id());
    let calls = calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(Summary {
        run: run.id(),
        error,
        calls,
        compensated,
        dead_letter,
    })
}

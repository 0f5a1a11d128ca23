//! Every key of the spec language in one workflow: every retry key, compensate,
//! reconcile, idempotent, condition, prompt, every `on_timeout` form, literal arguments.

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Order {
    id: u64,
    total_cents: i64,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Charge {
    id: String,
}

pub struct Services {
    currency: &'static str,
}

mod payments {
    use super::*;

    pub async fn score(order: Order, threshold: u32) -> Result<u32, StepError> {
        Ok(u32::try_from(order.total_cents).unwrap_or(threshold) % 100)
    }

    pub async fn charge(
        env: &Services,
        ctx: &StepContext,
        order: Order,
        note: &str,
        adjustment: i64,
        capture: bool,
    ) -> Result<Charge, StepError> {
        let _ = (env.currency, note, adjustment, capture, order.total_cents);
        Ok(Charge {
            id: ctx.idempotency_key.clone(),
        })
    }

    pub async fn find_charge(ctx: &StepContext, order: Order) -> Result<Option<Charge>, StepError> {
        let _ = (&ctx.idempotency_key, order.id);
        Ok(None)
    }

    pub async fn refund(env: &Services, charge: Charge, ratio: f64) -> Result<(), StepError> {
        let _ = (env.currency, charge.id, ratio);
        Ok(())
    }

    pub async fn ship(order: Order, charge: Charge, fraud: u32) -> Result<String, StepError> {
        Ok(format!("{}:{}:{fraud}", order.id, charge.id))
    }

    pub async fn notify(ctx: &StepContext, tracking: Option<String>) -> Result<(), StepError> {
        let _ = (&ctx.run_id, tracking);
        Ok(())
    }
}

workflow! {
    /// Charge, review and ship an order.
    pub workflow Fulfilment(order: Order) env Services {
        /// Scores the order for fraud.
        step fraud_score -> u32 {
            action: payments::score(order, 50),
            timeout: 500ms,
        }
        /// Charges the card, exactly once.
        step charge_card -> Charge {
            action: payments::charge(env, ctx, order, "first charge", -5, true),
            depends_on: [fraud_score],
            on_failure: abort,
            effect: external,
            idempotent: true,
            spawn: true,
            reconcile: payments::find_charge(ctx, order),
            compensate: payments::refund(env, charge_card, 1.0),
            timeout: 30s,
            retry: {
                max_attempts: 4,
                backoff: exponential,
                initial: 500ms,
                max: 10s,
                multiplier: 1.5,
                jitter: 10%,
                deadline: 5m,
                retry_on: [timeout, rate_limited, unavailable, not_found],
            },
        }
        human fraud_review -> Approval {
            assignee: "fraud_team",
            prompt: "Is this order fraudulent?",
            depends_on: [charge_card],
            condition: *fraud_score > 80,
            timeout: 4h,
            on_timeout: escalate("fraud_leads"),
        }
        human manager_review -> Approval {
            assignee: "managers",
            depends_on: [fraud_review],
            timeout: 1d,
            on_timeout: approve,
            on_failure: continue,
        }
        human audit_review -> Approval {
            assignee: "auditors",
            depends_on: [charge_card],
            timeout: 7d,
            on_timeout: reject,
            on_failure: continue,
        }
        human legal_review -> Approval {
            assignee: "legal",
            depends_on: [charge_card],
            timeout: 30m,
            on_timeout: abort,
            on_failure: continue,
        }
        step ship_order -> String {
            action: payments::ship(order, charge_card, fraud_score),
            depends_on: [manager_review, audit_review, legal_review],
            condition: order.total_cents > 0 && manager_review.is_none_or(|review| review.approved),
            effect: internal,
            retry: { max_attempts: 2, backoff: fixed, initial: 1s, max: 1s, jitter: none },
            on_failure: continue,
        }
        step notify_customer -> () {
            action: payments::notify(ctx, ship_order),
            effect: external,
            retry: { max_attempts: 3, backoff: linear, jitter: equal },
            idempotent: true,
        }
    }
}

fn main() {
    let _ = Fulfilment::MERMAID;
}

//! A spec file whose calls take every kind of argument (inputs, upstream outputs, an
//! optional one, a map's item and outputs, `env`, `ctx`, `with:` literals of each type),
//! with compensate and reconcile, and actions named without an `actions:` module: each call
//! goes through the signature the spec expects, and the right functions pass it.

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Order {
    id: u64,
    lines: Vec<u32>,
}

pub struct Services {
    currency: &'static str,
}

pub async fn score(order: Order, threshold: u32) -> Result<u32, StepError> {
    Ok(u32::try_from(order.id).unwrap_or(threshold))
}

pub async fn charge(
    env: &Services,
    ctx: &StepContext,
    order: Order,
    note: &str,
    adjustment: i64,
    capture: bool,
    ratio: f64,
) -> Result<String, StepError> {
    let _ = (env.currency, note, adjustment, capture, ratio, order.id);
    Ok(ctx.idempotency_key.clone())
}

pub async fn find_charge(ctx: &StepContext, order: Order) -> Result<Option<String>, StepError> {
    let _ = (&ctx.idempotency_key, order.id);
    Ok(None)
}

pub async fn refund(env: &Services, charge: String) -> Result<u8, StepError> {
    let _ = (env.currency, charge);
    Ok(0)
}

pub async fn pack(line: u32, fraud: u32) -> Result<u32, StepError> {
    Ok(line + fraud)
}

pub async fn notify(ctx: &StepContext, packed: Vec<u32>, bonus: Option<u32>) -> Result<(), StepError> {
    let _ = (&ctx.run_id, packed, bonus);
    Ok(())
}

workflow_core::workflow_file!("specs/file-calls.yaml", env: Services);

fn main() {
    let _ = Fulfil::MERMAID;
}

//! Conditions over maybe-absent outputs: a step that may fail under `continue`, or is
//! itself conditional, is seen as `Option<&T>` by conditions and `Option<T>` by actions.
//! Conditions may call functions, use `matches!`, `match`, `let` and `if let`.

use workflow_core::prelude::*;

async fn score() -> Result<u32, StepError> {
    Ok(7)
}

async fn enrich(score: Option<u32>) -> Result<String, StepError> {
    Ok(format!("score {score:?}"))
}

fn is_low(score: &u32) -> bool {
    *score < 50
}

async fn ship(score: Option<u32>, note: Option<String>) -> Result<(), StepError> {
    let _ = (score, note);
    Ok(())
}

workflow! {
    pub workflow Shipping() {
        step fraud_score -> u32 {
            action: score(),
            on_failure: continue,
        }
        step enrich_order -> String {
            action: enrich(fraud_score),
            condition: fraud_score.is_some_and(|score| *score < 50),
        }
        step ship_order -> () {
            action: ship(fraud_score, enrich_order),
            condition: fraud_score.is_none() || enrich_order.is_some_and(|note| !note.is_empty()),
        }
        step audit_order -> () {
            action: ship(fraud_score, enrich_order),
            depends_on: [ship_order],
            condition: matches!(fraud_score, Some(score) if is_low(score))
                && match enrich_order {
                    Some(note) => {
                        let length = note.len();
                        length > 0
                    }
                    None => true,
                }
                && if let Some(score) = fraud_score { *score > 1 } else { ship_order.is_some() },
        }
    }
}

fn main() {
    let _ = Shipping::MERMAID;
}

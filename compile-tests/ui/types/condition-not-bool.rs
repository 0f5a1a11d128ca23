use workflow_core::prelude::*;

async fn score() -> Result<u32, StepError> {
    Ok(7)
}

async fn ship() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Shipping() {
        step fraud_score -> u32 {
            action: score(),
        }
        step ship_order -> () {
            action: ship(),
            depends_on: [fraud_score],
            condition: *fraud_score,
        }
    }
}

fn main() {}

use workflow_core::prelude::*;

async fn score() -> Result<u32, StepError> {
    Ok(7)
}

workflow! {
    pub workflow Shipping() {
        step fraud_score -> u32 {
            action: score(),
            condition: *fraud_score < 50,
        }
    }
}

fn main() {}

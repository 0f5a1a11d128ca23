use workflow_core::prelude::*;

async fn charge(_ctx: &StepContext) -> Result<u64, StepError> {
    Ok(42)
}

workflow! {
    pub workflow Billing() {
        step charge_card -> u64 {
            action: charge(ctx),
            effect: external,
            retry: { max_attempts: 3, initial: 1s, max: 30s },
        }
    }
}

fn main() {}

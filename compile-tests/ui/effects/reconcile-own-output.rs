use workflow_core::prelude::*;

async fn charge(_ctx: &StepContext) -> Result<u64, StepError> {
    Ok(42)
}

async fn find_charge(_charge: u64) -> Result<Option<u64>, StepError> {
    Ok(None)
}

workflow! {
    pub workflow Billing() {
        step charge_card -> u64 {
            action: charge(ctx),
            effect: external,
            retry: { max_attempts: 3 },
            reconcile: find_charge(charge_card),
        }
    }
}

fn main() {}

use workflow_core::prelude::*;

async fn reserve() -> Result<u64, StepError> {
    Ok(7)
}

async fn charge() -> Result<u64, StepError> {
    Ok(42)
}

async fn refund(_charge: u64, _seat: u64) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Booking() {
        step reserve_seat -> u64 {
            action: reserve(),
        }
        step charge_card -> u64 {
            action: charge(),
            compensate: refund(charge_card, reserve_seat),
        }
    }
}

fn main() {}

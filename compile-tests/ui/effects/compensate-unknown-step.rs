use workflow_core::prelude::*;

async fn reserve() -> Result<u64, StepError> {
    Ok(7)
}

async fn release(_reservation: u64) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Booking() {
        step reserve_seat -> u64 {
            action: reserve(),
            compensate: release(reserve_set),
        }
    }
}

fn main() {}

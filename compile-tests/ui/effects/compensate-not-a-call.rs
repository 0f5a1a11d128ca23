use workflow_core::prelude::*;

async fn reserve() -> Result<u64, StepError> {
    Ok(7)
}

workflow! {
    pub workflow Booking() {
        step reserve_seat -> u64 {
            action: reserve(),
            compensate: release,
        }
    }
}

fn main() {}

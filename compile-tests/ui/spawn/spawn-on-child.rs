use workflow_core::prelude::*;

async fn pack(order: u64) -> Result<u64, StepError> {
    Ok(order)
}

workflow! {
    pub workflow Packing(order: u64) {
        step pack -> u64 { action: pack(order) }
    }
}

workflow! {
    pub workflow Orders(order: u64) {
        step packing -> PackingOutputs {
            workflow: Packing(order: order),
            spawn: true,
        }
    }
}

fn main() {}

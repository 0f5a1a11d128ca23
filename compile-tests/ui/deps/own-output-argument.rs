use workflow_core::prelude::*;

async fn bump(n: u32) -> Result<u32, StepError> {
    Ok(n + 1)
}

workflow! {
    pub workflow Counter() {
        step count -> u32 {
            action: bump(count),
        }
    }
}

fn main() {}

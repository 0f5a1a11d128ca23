use workflow_core::prelude::*;

async fn provision() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    pub workflow Provisioning() {
        step provision_workspace -> u32 {
            action: provision(),
            retry: { max_attempts: 3, retry_on: [unavailable, unsafe] },
        }
    }
}

fn main() {}

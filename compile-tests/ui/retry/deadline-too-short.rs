use workflow_core::prelude::*;

async fn provision() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    pub workflow Provisioning() {
        step provision_workspace -> u32 {
            action: provision(),
            retry: { max_attempts: 10, initial: 1s, max: 60s, deadline: 20s },
        }
    }
}

fn main() {}

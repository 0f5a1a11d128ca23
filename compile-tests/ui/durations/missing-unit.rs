use workflow_core::prelude::*;

async fn create() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> u32 {
            action: create(),
            timeout: 30,
        }
    }
}

fn main() {}

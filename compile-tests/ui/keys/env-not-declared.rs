use workflow_core::prelude::*;

pub struct Services;

async fn create(_env: &Services) -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> u32 {
            action: create(env),
        }
    }
}

fn main() {}

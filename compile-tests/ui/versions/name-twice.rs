use workflow_core::prelude::*;

async fn create() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    #[workflow(name = "Onboarding")]
    #[workflow(name = "OnboardingV2")]
    pub workflow OnboardingV2() {
        step create_account -> u32 {
            action: create(),
        }
    }
}

fn main() {}

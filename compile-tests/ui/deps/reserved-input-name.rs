use workflow_core::prelude::*;

async fn noop() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding(env: String) {
        step create_account -> () {
            action: noop(),
        }
    }
}

fn main() {}

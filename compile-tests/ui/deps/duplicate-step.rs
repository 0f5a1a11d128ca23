use workflow_core::prelude::*;

async fn noop() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> () {
            action: noop(),
        }
        step create_account -> () {
            action: noop(),
        }
    }
}

fn main() {}

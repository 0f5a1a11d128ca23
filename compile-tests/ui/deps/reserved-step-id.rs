use workflow_core::prelude::*;

async fn noop() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding() {
        step ctx -> () {
            action: noop(),
        }
    }
}

fn main() {}

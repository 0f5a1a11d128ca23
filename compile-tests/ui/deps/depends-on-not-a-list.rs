use workflow_core::prelude::*;

async fn noop() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> () {
            action: noop(),
        }
        step send_welcome -> () {
            action: noop(),
            depends_on: create_account,
        }
    }
}

fn main() {}

use workflow_core::prelude::*;

async fn send() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding() {
        step send_welcome -> () {
            action: send(),
            effect: extrenal,
        }
    }
}

fn main() {}

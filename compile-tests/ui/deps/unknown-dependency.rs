use workflow_core::prelude::*;

async fn create() -> Result<u32, StepError> {
    Ok(1)
}

async fn welcome() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> u32 {
            action: create(),
        }
        step send_welcome -> () {
            action: welcome(),
            depends_on: [creat_account],
        }
    }
}

fn main() {}

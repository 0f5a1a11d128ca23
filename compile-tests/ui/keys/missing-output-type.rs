use workflow_core::prelude::*;

async fn create() -> Result<u32, StepError> {
    Ok(1)
}

async fn provision(_user: u32) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding() {
        step create_account {
            action: create(),
        }
        step provision_workspace -> () {
            action: provision(create_account),
        }
    }
}

fn main() {}

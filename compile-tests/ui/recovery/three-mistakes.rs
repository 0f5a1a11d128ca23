use workflow_core::prelude::*;

async fn create() -> Result<u32, StepError> {
    Ok(1)
}

async fn provision(_user: u32) -> Result<u32, StepError> {
    Ok(2)
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> u32 {
            acton: create(),
        }
        step provision_workspace -> u32 {
            action: provision(create_account),
            timeout: 2min,
        }
        human human_review -> Approval {
            assignee: "trust_and_safety_team",
            depends_on: [provision_workspace],
            timeout: 48h,
        }
    }
}

fn main() {}

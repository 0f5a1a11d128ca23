use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct User {
    id: u64,
}

#[derive(Clone, Serialize, Deserialize)]
pub struct Workspace {
    owner: u64,
}

async fn create_workspace() -> Result<Workspace, StepError> {
    Ok(Workspace { owner: 7 })
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> User {
            action: create_workspace(),
        }
    }
}

fn main() {}

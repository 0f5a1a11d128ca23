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

async fn create_user() -> Result<User, StepError> {
    Ok(User { id: 7 })
}

async fn rename_workspace(workspace: Workspace) -> Result<Workspace, StepError> {
    Ok(workspace)
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> User {
            action: create_user(),
        }
        step provision_workspace -> Workspace {
            action: rename_workspace(create_account),
        }
    }
}

fn main() {}

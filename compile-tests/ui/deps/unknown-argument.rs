use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Signup {
    email: String,
}

async fn create(signup: Signup) -> Result<String, StepError> {
    Ok(signup.email)
}

workflow! {
    pub workflow Onboarding(signup: Signup) {
        step create_account -> String {
            action: create(signupp),
        }
    }
}

fn main() {}

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Signup {
    email: String,
}

async fn noop() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Onboarding(signup: Signup) {
        step signup -> () {
            action: noop(),
        }
    }
}

fn main() {}

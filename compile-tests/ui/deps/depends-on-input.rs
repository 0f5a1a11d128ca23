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
        step create_account -> () {
            action: noop(),
            depends_on: [signup],
        }
    }
}

fn main() {}

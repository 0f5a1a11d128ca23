use workflow_core::prelude::*;

pub struct MyError;

async fn create() -> Result<u32, MyError> {
    Ok(1)
}

workflow! {
    pub workflow Onboarding() {
        step create_account -> u32 {
            action: create(),
        }
    }
}

fn main() {}

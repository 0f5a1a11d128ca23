use workflow_core::prelude::*;

pub struct Services;
pub struct Clients;

async fn create(_clients: &Clients) -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    pub workflow Onboarding() env Services {
        step create_account -> u32 {
            action: create(env),
        }
    }
}

fn main() {}

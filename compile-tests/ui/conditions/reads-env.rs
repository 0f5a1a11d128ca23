use workflow_core::prelude::*;

pub struct Services {
    pub shipping_enabled: bool,
}

async fn ship(_env: &Services) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Shipping() env Services {
        step ship_order -> () {
            action: ship(env),
            condition: env.shipping_enabled,
        }
    }
}

fn main() {}

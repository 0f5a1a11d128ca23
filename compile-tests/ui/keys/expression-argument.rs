use workflow_core::prelude::*;

async fn fetch() -> Result<u32, StepError> {
    Ok(1)
}

async fn double(n: u32) -> Result<u32, StepError> {
    Ok(n * 2)
}

workflow! {
    pub workflow Numbers() {
        step a -> u32 {
            action: fetch(),
        }
        step b -> u32 {
            action: double(a + 1),
        }
    }
}

fn main() {}

use workflow_core::prelude::*;

async fn classify() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    pub workflow Sorting() {
        step r#type -> u32 {
            action: classify(),
        }
    }
}

fn main() {}

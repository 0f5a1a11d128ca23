use workflow_core::prelude::*;

async fn digest(data: String) -> Result<u64, StepError> {
    Ok(data.len() as u64)
}

workflow! {
    pub workflow Hashing(data: String) {
        step digest -> u64 {
            action: digest(data),
            spawn: yes,
        }
    }
}

fn main() {}

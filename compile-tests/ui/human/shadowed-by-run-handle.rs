use workflow_core::prelude::*;

async fn prepare() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    workflow Review() {
        step draft -> u32 { action: prepare() }
        human cancel -> Approval {
            assignee: "mods",
            depends_on: [draft],
            timeout: 1h,
            on_timeout: reject,
        }
    }
}

fn main() {}

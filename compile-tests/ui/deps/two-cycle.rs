use workflow_core::prelude::*;

async fn noop() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Pingpong() {
        step ping -> () {
            action: noop(),
            depends_on: [pong],
        }
        step pong -> () {
            action: noop(),
            depends_on: [ping],
        }
    }
}

fn main() {}

use workflow_core::prelude::*;

async fn noop() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Triangle() {
        step a -> () {
            action: noop(),
            depends_on: [c],
        }
        step b -> () {
            action: noop(),
            depends_on: [a],
        }
        step c -> () {
            action: noop(),
            depends_on: [b],
        }
    }
}

fn main() {}

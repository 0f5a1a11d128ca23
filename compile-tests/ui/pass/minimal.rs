//! The smallest workflow: one step, no inputs, no environment.

use workflow_core::prelude::*;

async fn hello() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    workflow Hello() {
        step say_hello -> () {
            action: hello(),
        }
    }
}

fn main() {
    let _ = Hello::MERMAID;
}

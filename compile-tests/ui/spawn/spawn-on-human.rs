use workflow_core::prelude::*;

workflow! {
    pub workflow Review() {
        human approve -> Approval {
            assignee: "ops",
            timeout: 1h,
            on_timeout: reject,
            spawn: true,
        }
    }
}

fn main() {}

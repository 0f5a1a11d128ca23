use workflow_core::prelude::*;

workflow! {
    pub workflow Review() {
        human human_review -> Approval {
            assignee: "trust_and_safety_team",
            timeout: 48h,
        }
    }
}

fn main() {}

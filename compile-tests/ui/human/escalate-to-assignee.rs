use workflow_core::prelude::*;

workflow! {
    pub workflow Review() {
        human human_review -> Approval {
            assignee: "trust_and_safety_team",
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_team"),
        }
    }
}

fn main() {}

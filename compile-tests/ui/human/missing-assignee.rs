use workflow_core::prelude::*;

workflow! {
    pub workflow Review() {
        human human_review -> Approval {
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_leads"),
        }
    }
}

fn main() {}

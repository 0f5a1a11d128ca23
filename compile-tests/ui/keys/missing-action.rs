use workflow_core::prelude::*;

workflow! {
    pub workflow Onboarding() {
        step create_account -> u32 {
            timeout: 30s,
        }
    }
}

fn main() {}

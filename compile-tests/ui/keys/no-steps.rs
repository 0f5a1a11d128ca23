use workflow_core::prelude::*;

workflow! {
    pub workflow Onboarding() {}
}

fn main() {}

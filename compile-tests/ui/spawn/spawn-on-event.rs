use workflow_core::prelude::*;

workflow! {
    pub workflow Payment() {
        event paid -> u64 {
            timeout: 1h,
            on_timeout: abort,
            spawn: true,
        }
    }
}

fn main() {}

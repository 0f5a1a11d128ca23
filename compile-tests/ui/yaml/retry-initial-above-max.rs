workflow_core::workflow_file!("specs/retry-initial-above-max.yaml");

fn main() {}

workflow_core::workflow_file!("specs/retry-unknown-key.yaml");

fn main() {}

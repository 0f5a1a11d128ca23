workflow_core::workflow_file!("specs/retry-zero-attempts.yaml");

fn main() {}

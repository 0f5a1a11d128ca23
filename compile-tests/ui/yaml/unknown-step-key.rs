workflow_core::workflow_file!("specs/unknown-step-key.yaml");

fn main() {}

workflow_core::workflow_file!("specs/condition-unknown-step.yaml");

fn main() {}

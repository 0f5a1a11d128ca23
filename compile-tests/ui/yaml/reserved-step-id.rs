workflow_core::workflow_file!("specs/reserved-step-id.yaml");

fn main() {}

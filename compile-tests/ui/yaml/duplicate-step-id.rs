workflow_core::workflow_file!("specs/duplicate-step-id.yaml");

fn main() {}

workflow_core::workflow_file!("specs/steps-not-a-list.yaml");

fn main() {}

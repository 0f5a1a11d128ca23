workflow_core::workflow_file!("specs/flow-max-wait.yaml");

fn main() {}

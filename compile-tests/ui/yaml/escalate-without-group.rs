workflow_core::workflow_file!("specs/escalate-without-group.yaml");

fn main() {}

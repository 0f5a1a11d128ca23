workflow_core::workflow_file!("specs/escalate-to-without-escalate.yaml");

fn main() {}

workflow_core::workflow_file!("specs/human-without-timeout.yaml");

fn main() {}

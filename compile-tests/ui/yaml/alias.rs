workflow_core::workflow_file!("specs/alias.yaml");

fn main() {}

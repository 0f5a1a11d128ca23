workflow_core::workflow_file!("specs/unknown-argument.yaml");

fn main() {}

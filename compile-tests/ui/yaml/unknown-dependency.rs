workflow_core::workflow_file!("specs/unknown-dependency.yaml");

fn main() {}

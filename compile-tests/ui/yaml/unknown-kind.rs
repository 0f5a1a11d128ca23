workflow_core::workflow_file!("specs/unknown-kind.yaml");

fn main() {}

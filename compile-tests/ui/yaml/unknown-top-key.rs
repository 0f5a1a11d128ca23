workflow_core::workflow_file!("specs/unknown-top-key.yaml");

fn main() {}

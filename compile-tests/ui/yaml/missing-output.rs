workflow_core::workflow_file!("specs/missing-output.yaml");

fn main() {}

workflow_core::workflow_file!("specs/bad-output-type.yaml");

fn main() {}

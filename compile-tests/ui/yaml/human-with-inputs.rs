workflow_core::workflow_file!("specs/human-with-inputs.yaml");

fn main() {}

workflow_core::workflow_file!("specs/duplicate-key.yaml");

fn main() {}

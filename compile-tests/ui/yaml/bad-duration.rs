workflow_core::workflow_file!("specs/bad-duration.yaml");

fn main() {}

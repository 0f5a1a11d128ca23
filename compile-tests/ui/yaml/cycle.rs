workflow_core::workflow_file!("specs/cycle.yaml");

fn main() {}

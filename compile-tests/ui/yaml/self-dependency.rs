workflow_core::workflow_file!("specs/self-dependency.yaml");

fn main() {}

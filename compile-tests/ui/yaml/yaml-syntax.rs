workflow_core::workflow_file!("specs/yaml-syntax.yaml");

fn main() {}

workflow_core::workflow_file!("specs/retried-external-effect.yaml");

fn main() {}

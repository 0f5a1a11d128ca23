workflow_core::workflow_file!("specs/unknown-step-key.yaml", action: crate::acts);

fn main() {}

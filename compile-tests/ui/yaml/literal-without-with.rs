workflow_core::workflow_file!("specs/literal-without-with.yaml");

fn main() {}

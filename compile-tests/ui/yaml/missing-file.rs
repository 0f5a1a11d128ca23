workflow_core::workflow_file!("specs/no-such-file.yaml");

fn main() {}

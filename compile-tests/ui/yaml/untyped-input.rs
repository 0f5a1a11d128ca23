// An input the steps read but the file does not declare: the help shows the `inputs:`
// mapping to write, with the type in place.
workflow_core::workflow_file!("specs/untyped-input.yaml");

fn main() {}

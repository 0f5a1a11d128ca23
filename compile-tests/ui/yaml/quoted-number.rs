// A number in quotes is text to YAML: refused where the spec takes a number.
workflow_core::workflow_file!("specs/quoted-number.yaml");

fn main() {}

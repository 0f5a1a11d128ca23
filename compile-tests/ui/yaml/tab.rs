// A tab in the indentation is reported at the tab, not at the value before it.
workflow_core::workflow_file!("specs/tab.yaml");

fn main() {}

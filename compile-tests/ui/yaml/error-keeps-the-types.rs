// A mistake in the file is one error: the workflow's types are still generated, so code
// that uses them does not fail too.
workflow_core::workflow_file!("specs/unknown-step-key.yaml");

fn main() {
    let _ = Orders::MERMAID;
    let _ = OrdersInput { order: 7 };
}

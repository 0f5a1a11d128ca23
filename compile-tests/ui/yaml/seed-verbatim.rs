// Seed 003's `user-onboarding.yaml`, verbatim: one error for each thing it lacks to
// compile (typed inputs and outputs, the escalation group, the template's place).
workflow_core::workflow_file!("../../../examples/specs/user-onboarding.yaml");

fn main() {}

// A compensation the actions module lacks (one that takes no arguments): reported at its
// line in the file, with the signature the spec expects.
mod acts {
    pub async fn charge(order: u32) -> Result<u32, workflow_core::StepError> {
        Ok(order)
    }
}

workflow_core::workflow_file!("specs/missing-compensation.yaml", actions: crate::acts);

fn main() {}

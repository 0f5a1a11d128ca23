// An action whose output is not the step's `output:` type: reported at the action's line
// in the file, with the signature the spec expects.
mod acts {
    pub async fn fetch(order: u32) -> Result<String, workflow_core::StepError> {
        Ok(order.to_string())
    }
}

workflow_core::workflow_file!("specs/wrong-action-output.yaml", actions: crate::acts);

fn main() {}

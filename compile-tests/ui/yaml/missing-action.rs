// A step's action that the actions module lacks: reported at its line in the file, with
// the signature the spec expects.
mod acts {
    pub async fn fetch(order: u32) -> Result<u32, workflow_core::StepError> {
        Ok(order)
    }
}

workflow_core::workflow_file!("specs/missing-action.yaml", actions: crate::acts);

fn main() {}

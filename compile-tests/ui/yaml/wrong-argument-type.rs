mod acts {
    pub async fn fetch(order: u32) -> Result<u32, workflow_core::StepError> {
        Ok(order)
    }
}

workflow_core::workflow_file!("specs/wrong-argument-type.yaml", actions: crate::acts);

fn main() {}

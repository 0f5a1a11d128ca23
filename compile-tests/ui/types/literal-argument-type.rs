use workflow_core::prelude::*;

async fn send(_copies: u32) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow Mailing() {
        step send_mail -> () {
            action: send("three"),
        }
    }
}

fn main() {}

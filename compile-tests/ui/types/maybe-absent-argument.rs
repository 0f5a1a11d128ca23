use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct Receipt(String);

async fn send_welcome() -> Result<Receipt, StepError> {
    Ok(Receipt("sent".into()))
}

async fn archive(receipt: Receipt) -> Result<(), StepError> {
    let _ = receipt.0;
    Ok(())
}

workflow! {
    pub workflow Onboarding() {
        step send_welcome_email -> Receipt {
            action: send_welcome(),
            on_failure: continue,
        }
        step archive_receipt -> () {
            action: archive(send_welcome_email),
        }
    }
}

fn main() {}

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

#[derive(Clone, Serialize, Deserialize)]
pub struct PaymentConfirmed {
    amount_cents: u64,
}

async fn reserve() -> Result<u32, StepError> {
    Ok(1)
}

workflow! {
    pub workflow Fulfil() {
        step reserve_lines -> u32 {
            action: reserve(),
        }
        event payment {
            depends_on: [reserve_lines],
            timeout: 1h,
        }
    }
}

fn main() {}

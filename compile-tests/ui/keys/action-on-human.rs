use workflow_core::prelude::*;

async fn review() -> Result<Approval, StepError> {
    Ok(Approval::approve(None))
}

workflow! {
    pub workflow Onboarding() {
        human human_review -> Approval {
            action: review(),
            assignee: "trust_and_safety_team",
            timeout: 48h,
            on_timeout: escalate("trust_and_safety_leads"),
        }
    }
}

fn main() {}

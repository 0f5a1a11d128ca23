use workflow_core::prelude::*;

async fn report() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow DailyReport() {
        step fetch -> () {
            action: report(),
        }
        schedule: { cron: "0 9 * * *" },
    }
}

fn main() {}

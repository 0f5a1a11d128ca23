use workflow_core::prelude::*;
use workflow_core::Tick;

async fn report(_tick: Tick) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow DailyReport(tick: Tick) {
        schedule: { cron: "0 9 * *" },
        step fetch -> () {
            action: report(tick),
        }
    }
}

fn main() {}

use workflow_core::prelude::*;


async fn report(_tick: String) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow DailyReport(tick: String) {
        schedule: { cron: "0 9 * * *" },
        step fetch -> () {
            action: report(tick),
        }
    }
}

fn main() {}

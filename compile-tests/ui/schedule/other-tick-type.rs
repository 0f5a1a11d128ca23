use workflow_core::prelude::*;

mod my {
    #[derive(Clone, serde::Serialize, serde::Deserialize)]
    pub struct Tick;
}
async fn report(_tick: my::Tick) -> Result<(), StepError> {
    Ok(())
}

workflow! {
    pub workflow DailyReport(tick: my::Tick) {
        schedule: { cron: "0 9 * * *" },
        step fetch -> () {
            action: report(tick),
        }
    }
}

fn main() {}

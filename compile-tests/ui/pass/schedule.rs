//! A scheduled workflow with every schedule key, and one without inputs: both compile, and
//! the generated type exposes the schedule.

use std::time::Duration;

use workflow_core::prelude::*;
use workflow_core::spec::{Catchup, DstGap, Overlap};
use workflow_core::Tick;

async fn fetch(tick: Tick) -> Result<u64, StepError> {
    Ok(tick.scheduled)
}

async fn ping() -> Result<(), StepError> {
    Ok(())
}

workflow! {
    /// Every weekday at 09:00 Berlin time.
    pub workflow DailyReport(tick: Tick) {
        schedule: {
            cron: "0 9 * * MON-FRI",
            tz: "Europe/Berlin",
            overlap: skip,
            catchup: all(max: 10),
            window: 6h,
            dst_gap: next_valid,
            jitter: 30s,
        },
        step report -> u64 {
            action: fetch(tick),
        }
    }
}

workflow! {
    pub workflow Heartbeat() {
        schedule: { cron: "*/10 * * * * *", overlap: cancel_previous, catchup: none },
        step beat -> () {
            action: ping(),
        }
    }
}

workflow! {
    pub workflow Plain() {
        step beat -> () {
            action: ping(),
        }
    }
}

fn main() {
    let schedule = DailyReport::schedule().expect("a schedule");
    assert_eq!(schedule.cron, "0 9 * * MON-FRI");
    assert_eq!(schedule.catchup, Catchup::All { max: 10 });
    assert_eq!(schedule.jitter, Some(Duration::from_secs(30)));
    assert_eq!(schedule.dst_gap, DstGap::NextValid);
    let heartbeat = <Heartbeat as Workflow>::schedule().expect("a schedule");
    assert_eq!(heartbeat.overlap, Overlap::CancelPrevious);
    assert!(Plain::schedule().is_none());
}

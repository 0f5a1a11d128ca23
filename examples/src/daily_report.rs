//! A scheduled report: every weekday at 09:00 Berlin time, fetch yesterday's numbers,
//! flag anomalies, and when there are any, have an analyst look before the report goes
//! out (escalating to the leads after four hours).
//!
//! The scenario runs a simulated week and a half on paused tokio time, across the spring
//! change to summer time (Sunday 2026-03-29): the report fires at 09:00 local time on each
//! weekday, 08:00 UTC before the change and 07:00 UTC after it, never on the weekend.
//! Wednesday's numbers hold an anomaly, which the analyst approves.

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow::clock::TokioClock;
use workflow::prelude::*;
use workflow::Tick;

use crate::Log;

/// 2026-03-23T00:00:00Z, a Monday.
pub const START: u64 = 1_774_224_000_000;

/// A day's numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Numbers {
    /// The day the report is about (the tick's local date).
    pub day: String,
    /// Orders taken.
    pub orders: u32,
    /// Refunds given.
    pub refunds: u32,
}

/// What looks wrong in a day's numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Anomalies {
    /// One line per anomaly; empty when nothing looks wrong.
    pub found: Vec<String>,
}

/// The environment: the reports sent so far.
#[derive(Debug, Default)]
pub struct Reporting {
    sent: Arc<Mutex<Vec<String>>>,
}

/// The steps' implementations.
pub mod report {
    use super::*;

    /// Fetches the numbers for the tick's day (simulated: Wednesday has many refunds).
    pub async fn fetch(tick: Tick) -> Result<Numbers, StepError> {
        let day = local_day(tick.scheduled);
        let refunds = if day.ends_with("-25") { 90 } else { 4 };
        Ok(Numbers {
            day,
            orders: 400,
            refunds,
        })
    }

    /// Flags a refund rate above 10%.
    pub async fn check(numbers: Numbers) -> Result<Anomalies, StepError> {
        let mut found = Vec::new();
        if numbers.refunds * 10 > numbers.orders {
            found.push(format!(
                "{} refunds for {} orders",
                numbers.refunds, numbers.orders
            ));
        }
        Ok(Anomalies { found })
    }

    /// Sends the report.
    pub async fn send(
        env: &Reporting,
        numbers: Numbers,
        review: Option<Approval>,
    ) -> Result<String, StepError> {
        let note = match review {
            Some(review) => format!(" (anomalies reviewed by {})", review.by),
            None => String::new(),
        };
        let line = format!(
            "report for {}: {} orders, {} refunds{note}",
            numbers.day, numbers.orders, numbers.refunds
        );
        env.sent.lock().unwrap().push(line.clone());
        Ok(line)
    }
}

/// The tick's scheduled time as a Berlin date, `2026-03-25`.
pub fn local_day(scheduled: u64) -> String {
    let text = workflow::schedule::CompiledSchedule::new(
        workflow::schedule::Schedule::new("0 9 * * *").in_zone("Europe/Berlin"),
    )
    .map(|schedule| schedule.local(scheduled))
    .unwrap_or_default();
    text.chars().take(10).collect()
}

workflow! {
    /// Every weekday at 09:00 Berlin time: the day's numbers, reviewed when they look wrong.
    pub workflow DailyReport(tick: Tick) env Reporting {
        schedule: {
            cron: "0 9 * * MON-FRI",
            tz: "Europe/Berlin",
            overlap: skip,
            catchup: latest,
            window: 6h,
        },
        step fetch -> Numbers { action: report::fetch(tick) }
        step check -> Anomalies { action: report::check(fetch) }
        human review -> Approval {
            assignee: "analysts",
            depends_on: [check],
            condition: !check.found.is_empty(),
            timeout: 4h,
            on_timeout: escalate("analytics_leads"),
            prompt: "The numbers look unusual: send the report anyway?",
        }
        step send -> String {
            action: report::send(env, fetch, review),
            depends_on: [review],
        }
    }
}

/// What the week looked like.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Each run's tick: its scheduled time as Berlin wall-clock time.
    pub ticks: Vec<String>,
    /// The reports sent, in order.
    pub sent: Vec<String>,
    /// The days whose anomalies a person reviewed.
    pub reviewed: Vec<String>,
}

/// Runs ten simulated days from Monday 2026-03-23 00:00 UTC; the analyst approves the
/// anomalous day's report.
pub async fn run(log: &Log) -> Result<Summary, Box<dyn Error>> {
    let engine = Engine::builder()
        .clock(TokioClock::starting_at(START))
        .seed(9)
        .build();
    let reporting = Reporting::default();
    let sent = Arc::clone(&reporting.sent);
    engine.register::<DailyReport>(reporting)?;
    let mut reviewed = Vec::new();
    let end = START + 10 * 86_400_000;
    while engine.now() < end {
        tokio::time::sleep(Duration::from_secs(600)).await;
        for task in engine.open_tasks().await? {
            let day = local_day(engine.now());
            log.line(format!(
                "{day}: {} asks {}: {}",
                task.step,
                task.assignee,
                task.prompt.clone().unwrap_or_default()
            ));
            let run = engine.handle::<DailyReport>(task.run).await?;
            run.review()
                .approve("ana@analysts", Some("a refund campaign"))
                .await?;
            reviewed.push(day);
        }
    }
    let ticks = engine
        .schedules()
        .list(0)
        .await?
        .into_iter()
        .map(|info| info.row)
        .collect::<Vec<_>>();
    log.line(format!(
        "schedule {}: missed {}, skipped {}",
        ticks[0].id, ticks[0].state.missed, ticks[0].state.skipped
    ));
    let runs = engine
        .runs(workflow::store::RunFilter {
            workflow: Some("DailyReport".into()),
            ..Default::default()
        })
        .await?;
    let mut scheduled: Vec<u64> = runs
        .iter()
        .filter_map(|run| run.idempotency_key.as_deref())
        .filter_map(|key| key.rsplit('@').next()?.parse().ok())
        .collect();
    scheduled.sort_unstable();
    let schedule = workflow::schedule::CompiledSchedule::new(
        DailyReport::schedule().cloned().ok_or("no schedule")?,
    )?;
    let ticks: Vec<String> = scheduled.iter().map(|&at| schedule.local(at)).collect();
    for tick in &ticks {
        log.line(format!("ran for {tick}"));
    }
    let sent = sent.lock().unwrap().clone();
    for line in &sent {
        log.line(line.clone());
    }
    engine.shutdown();
    Ok(Summary {
        ticks,
        sent,
        reviewed,
    })
}

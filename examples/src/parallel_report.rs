//! Fan out, then merge: four independent fetches with different latencies run in
//! parallel (none names another, so the engine starts them together), and a merge step
//! that names all four runs once they are in. The run takes about as long as the slowest
//! fetch, not the sum of them.

use std::error::Error;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow::journal::Event;
use workflow::prelude::*;

use crate::{fmt_duration, journal, Log, Progress};

/// One fetched figure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// What it measures.
    pub name: String,
    /// Its value.
    pub value: u64,
}

/// The merged report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The week reported on.
    pub week: String,
    /// The figures, in a fixed order.
    pub lines: Vec<String>,
}

/// The environment: the simulated latency of each source.
#[derive(Debug, Clone)]
pub struct Sources {
    /// `(source, latency)`, in declaration order of the fetch steps.
    pub latencies: [(&'static str, Duration); 4],
}

impl Default for Sources {
    fn default() -> Self {
        Sources {
            latencies: [
                ("sales", Duration::from_millis(400)),
                ("inventory", Duration::from_millis(700)),
                ("support", Duration::from_millis(250)),
                ("traffic", Duration::from_millis(550)),
            ],
        }
    }
}

impl Sources {
    /// The sum of the latencies: what fetching one after the other would take.
    pub fn sequential(&self) -> Duration {
        self.latencies.iter().map(|(_, latency)| *latency).sum()
    }

    /// The slowest fetch.
    pub fn slowest(&self) -> (&'static str, Duration) {
        self.latencies
            .iter()
            .copied()
            .max_by_key(|(_, latency)| *latency)
            .unwrap_or(("none", Duration::ZERO))
    }
}

/// The steps' implementations.
pub mod fetch {
    use super::*;

    /// Fetches one figure from `source` (simulated: waits its latency).
    pub async fn figure(env: &Sources, week: String, source: &str) -> Result<Metric, StepError> {
        let latency = env
            .latencies
            .iter()
            .find(|(name, _)| *name == source)
            .map(|(_, latency)| *latency)
            .ok_or_else(|| StepError::not_found(format!("no source named {source}")))?;
        tokio::time::sleep(latency).await;
        let value = week.bytes().map(u64::from).sum::<u64>() * (latency.as_millis() as u64 / 50);
        Ok(Metric {
            name: source.to_owned(),
            value,
        })
    }

    /// Merges the figures into the report.
    pub async fn merge(
        _env: &Sources,
        week: String,
        sales: Metric,
        inventory: Metric,
        support: Metric,
        traffic: Metric,
    ) -> Result<Report, StepError> {
        let lines = [sales, inventory, support, traffic]
            .into_iter()
            .map(|metric| format!("{:<10} {:>8}", metric.name, metric.value))
            .collect();
        Ok(Report { week, lines })
    }
}

workflow! {
    /// The weekly report: four independent fetches, then a merge.
    pub workflow WeeklyReport(week: String) env Sources {
        step sales -> Metric { action: fetch::figure(env, week, "sales") }
        step inventory -> Metric { action: fetch::figure(env, week, "inventory") }
        step support -> Metric { action: fetch::figure(env, week, "support") }
        step traffic -> Metric { action: fetch::figure(env, week, "traffic") }
        step merge -> Report {
            action: fetch::merge(env, week, sales, inventory, support, traffic),
        }
    }
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Summary {
    /// The merged report.
    pub report: Report,
    /// How long the run took.
    pub elapsed: Duration,
    /// Each fetch's start and end, relative to the run's start (from the journal).
    pub fetches: Vec<(String, Duration, Duration)>,
    /// The slowest fetch and its latency.
    pub slowest: (&'static str, Duration),
    /// What the fetches would take one after the other.
    pub sequential: Duration,
}

/// Builds the report for `week` with the given source latencies.
pub async fn run(sources: Sources, log: &Log) -> Result<Summary, Box<dyn Error>> {
    let slowest = sources.slowest();
    let sequential = sources.sequential();
    let engine = Engine::builder().build();
    engine.register::<WeeklyReport>(sources)?;
    let progress = Progress::start(&engine, WeeklyReport::spec(), log);

    let started = tokio::time::Instant::now();
    let run = engine
        .start::<WeeklyReport>(WeeklyReportInput {
            week: "2026-W29".into(),
        })
        .await?;
    let outputs = run.outputs().await?;
    let elapsed = started.elapsed();
    progress.finish().await;

    let events = journal(&engine, run.id()).await?;
    let origin = events.first().map_or(0, Event::at);
    let since = |at: u64| Duration::from_millis(at.saturating_sub(origin));
    let spec = WeeklyReport::spec();
    let fetches = events
        .iter()
        .filter_map(|event| match event {
            Event::AttemptStarted { step, at, .. } => Some((*step, *at)),
            _ => None,
        })
        .filter_map(|(step, start)| {
            let id = spec.steps.get(step)?.id.clone();
            let end = events.iter().find_map(|event| match event {
                Event::StepSucceeded { step: s, at, .. } if *s == step => Some(*at),
                _ => None,
            })?;
            (id != "merge").then(|| (id, since(start), since(end)))
        })
        .collect();
    log.line(format!(
        "elapsed {} (slowest fetch: {} {}; one after the other: {})",
        fmt_duration(elapsed),
        slowest.0,
        fmt_duration(slowest.1),
        fmt_duration(sequential)
    ));
    Ok(Summary {
        report: outputs.merge,
        elapsed,
        fetches,
        slowest,
        sequential,
    })
}

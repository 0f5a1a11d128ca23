//! The upgrade check: what a new build would do with the runs in flight, before it is
//! deployed.
//!
//! Run [`check`] from the new build's own binary (an `upgrade-check` command of it) against
//! the production store, with an engine on which the new build registered its workflows as
//! it would at start-up. For every unfinished run (running or parked) it answers one of:
//!
//! - [`Verdict::Continue`]: the run's fingerprint is registered, and its journal replays
//!   through the new build: the inputs, every finished step's output (a map step's once all
//!   its items finished), every decision and every event payload decode into the new types;
//! - [`Verdict::Park`]: no registration has the run's fingerprint, so a worker of the new
//!   build would park it (the report names the fingerprints that are registered under the
//!   workflow's name, none when the workflow is gone);
//! - [`Verdict::Undecodable`]: the fingerprint is registered but a journaled value no longer
//!   decodes (a renamed or retyped field): the entry, what it is and serde's message.
//!
//! It only reads: nothing in the store changes.
//!
//! ```no_run
//! # use workflow_core::prelude::*;
//! # async fn demo(engine: Engine) -> Result<(), Box<dyn std::error::Error>> {
//! // `engine` is the new build's, its workflows registered, over the production store.
//! let report = workflow_core::upgrade::check(&**engine.store(), &engine).await?;
//! print!("{report}");
//! if !report.is_safe() {
//!     std::process::exit(1);
//! }
//! # Ok(()) }
//! ```

use std::fmt;

use crate::engine::Version;
use crate::error::RunId;
use crate::journal::Event;
use crate::machine::Machine;
use crate::store::{RunFilter, RunStatus, Store, StoreError, StoredRun};
use crate::CallError;
use crate::Engine;

/// What the new build would do with one unfinished run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Registered, and every journaled value decodes: the run goes on.
    Continue,
    /// No registration has the run's fingerprint: a worker would park it.
    Park {
        /// The fingerprints the new build registers under the workflow's name (none when
        /// it does not register the workflow at all).
        registered: Vec<String>,
    },
    /// Registered, but a journaled value no longer decodes into the new types.
    Undecodable {
        /// The journal entry's position (from 0).
        entry: usize,
        /// What the value is: `input`, `output of step charge`, `decision of step
        /// approve`, `event payload of step shipped`.
        what: String,
        /// The decoder's message.
        message: String,
    },
}

/// One unfinished run and its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunVerdict {
    /// The run.
    pub run: RunId,
    /// Its workflow's journaled name.
    pub workflow: String,
    /// The fingerprint it runs under.
    pub fingerprint: String,
    /// `running` or `parked`.
    pub status: RunStatus,
    /// What the new build would do with it.
    pub verdict: Verdict,
}

/// Every unfinished run of a store, each with its verdict, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpgradeReport {
    /// One entry per unfinished run.
    pub runs: Vec<RunVerdict>,
}

impl UpgradeReport {
    /// The runs that would go on.
    pub fn continuing(&self) -> impl Iterator<Item = &RunVerdict> {
        self.runs
            .iter()
            .filter(|run| run.verdict == Verdict::Continue)
    }

    /// The runs that would park (their fingerprint is not registered).
    pub fn parking(&self) -> impl Iterator<Item = &RunVerdict> {
        self.runs
            .iter()
            .filter(|run| matches!(run.verdict, Verdict::Park { .. }))
    }

    /// The runs whose journal no longer decodes.
    pub fn undecodable(&self) -> impl Iterator<Item = &RunVerdict> {
        self.runs
            .iter()
            .filter(|run| matches!(run.verdict, Verdict::Undecodable { .. }))
    }

    /// Whether every unfinished run would go on.
    pub fn is_safe(&self) -> bool {
        self.runs.iter().all(|run| run.verdict == Verdict::Continue)
    }
}

impl fmt::Display for UpgradeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (go, park, bad) = (
            self.continuing().count(),
            self.parking().count(),
            self.undecodable().count(),
        );
        writeln!(
            f,
            "{} unfinished run(s): {go} continue, {park} would park, {bad} do not decode",
            self.runs.len()
        )?;
        for run in &self.runs {
            let head = format!(
                "{} {} ({}, {})",
                run.run,
                run.workflow,
                run.status.as_str(),
                run.fingerprint
            );
            match &run.verdict {
                Verdict::Continue => writeln!(f, "  continue     {head}")?,
                Verdict::Park { registered } if registered.is_empty() => {
                    writeln!(f, "  park         {head}: the workflow is not registered")?
                }
                Verdict::Park { registered } => writeln!(
                    f,
                    "  park         {head}: registered versions are {}",
                    registered.join(", ")
                )?,
                Verdict::Undecodable {
                    entry,
                    what,
                    message,
                } => writeln!(
                    f,
                    "  undecodable  {head}: journal entry {entry}, the {what}: {message}"
                )?,
            }
        }
        Ok(())
    }
}

/// How many runs are read from the store at a time.
const PAGE: usize = 200;

/// The verdict of every unfinished run in `store` for the workflows registered on `engine`
/// (the new build's). Reads only.
pub async fn check(store: &dyn Store, engine: &Engine) -> Result<UpgradeReport, StoreError> {
    let mut report = UpgradeReport::default();
    for status in [RunStatus::Running, RunStatus::Parked] {
        let mut before = None;
        loop {
            let page = store
                .runs(RunFilter {
                    status: Some(status),
                    before,
                    limit: Some(PAGE),
                    ..RunFilter::default()
                })
                .await?;
            before = page.last().map(|record| record.id);
            for record in &page {
                let Some(stored) = store.load(record.id).await? else {
                    continue; // purged meanwhile
                };
                let verdict = match engine.registration(&record.workflow, &record.fingerprint) {
                    None => Verdict::Park {
                        registered: engine
                            .registered_fingerprints(&record.workflow)
                            .into_iter()
                            .map(str::to_owned)
                            .collect(),
                    },
                    Some(registered) => replay(&registered, &stored),
                };
                report.runs.push(RunVerdict {
                    run: record.id,
                    workflow: record.workflow.clone(),
                    fingerprint: record.fingerprint.clone(),
                    status,
                    verdict,
                });
            }
            if page.len() < PAGE {
                break;
            }
        }
    }
    report.runs.sort_by_key(|run| std::cmp::Reverse(run.run.0));
    Ok(report)
}

/// Replays `stored`'s journal through the new build: every journaled value must decode,
/// then the machine must take every entry.
fn replay(registered: &Version, stored: &StoredRun) -> Verdict {
    let spec = registered.spec();
    let name = |step: usize| {
        spec.steps
            .get(step)
            .map_or_else(|| format!("#{step}"), |s| s.id.clone())
    };
    for (entry, event) in stored.events.iter().enumerate() {
        let checked: Option<(String, Result<(), CallError>)> = match event {
            Event::RunStarted { input, .. } => Some((
                "input".to_owned(),
                registered
                    .check_input(input)
                    .map_err(|error| CallError::Decode {
                        step: 0,
                        message: error.to_string(),
                    }),
            )),
            Event::StepSucceeded { step, output, .. } => Some((
                format!("output of step {}", name(*step)),
                registered.check_output(*step, output),
            )),
            Event::TaskDecided { step, decision, .. }
            | Event::TaskApproved { step, decision, .. } => Some((
                format!("decision of step {}", name(*step)),
                registered.decision(*step, decision.clone()).map(drop),
            )),
            Event::EventReceived { step, payload, .. }
            | Event::EventBuffered { step, payload, .. } => Some((
                format!("event payload of step {}", name(*step)),
                registered.event(*step, payload.clone()).map(drop),
            )),
            _ => None,
        };
        if let Some((what, Err(error))) = checked {
            let message = match error {
                CallError::Decode { message, .. } => message,
                other => other.to_string(),
            };
            return Verdict::Undecodable {
                entry,
                what,
                message,
            };
        }
    }
    // Every value decodes; the machine takes the journal as the new build would.
    let _ = Machine::replay(spec, &stored.events);
    Verdict::Continue
}

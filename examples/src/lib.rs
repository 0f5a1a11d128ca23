//! The runnable examples' scenarios, as a library so that `tests/tests/examples.rs` runs
//! exactly what `cargo run --example <name>` runs.
//!
//! Each module holds one scenario: its `workflow!` spec, the (simulated) services its
//! steps call, and a `run` function that drives it on an [`Engine`] and returns a summary
//! of what happened. The files `examples/<name>.rs` are thin `main`s around them.
//!
//! Each example builds only what it uses: the scenarios on SQLite need nothing beyond the
//! `workflow` facade's defaults; `ticket_server` needs the feature `server`,
//! `dashboard_report` the feature `browser` and `workers` the feature `postgres`
//! (`cargo run --example workers --features postgres`).
//!
//! - [`onboarding`]: DESIGN.md's user-onboarding spec on a SQLite file, resumable.
//! - [`ticket_triage`]: the failure-handling seed's incident (duplicate webhooks, an
//!   approval before an alert, a timeout after the alert was sent), with a dry-run mode.
//! - `ticket_server`: the same triage behind `workflow-server`: the webhook is verified
//!   at the front door, before anything is journaled, and the lead approves in the inbox.
//! - [`daily_report`]: a weekday 09:00 Berlin schedule across the change to summer time,
//!   with a human review of anomalous numbers.
//! - [`content_moderation`]: a human review that escalates after 48 simulated hours.
//! - [`order_saga`]: a permanent failure that compensates completed steps in reverse.
//! - `dashboard_report`: a browser step logs in to a dashboard without an API and
//!   downloads its report (retried after a 503, keeping the login); a person reviews
//!   the anomalies; the report is published through the dashboard's form.
//! - [`parallel_report`]: independent fetches in parallel, merged.
//! - [`order_fulfilment`]: a map over order lines, a child workflow and an event, on SQLite.
//! - `workers`: three worker processes on one PostgreSQL database; a killed worker's
//!   runs move to the others.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod content_moderation;
pub mod daily_report;
#[cfg(feature = "browser")]
pub mod dashboard_report;
pub mod onboarding;
pub mod onboarding_file;
pub mod order_fulfilment;
pub mod order_saga;
pub mod parallel_report;
#[cfg(feature = "server")]
pub mod ticket_server;
pub mod ticket_triage;
#[cfg(feature = "postgres")]
pub mod workers;

use std::collections::HashMap;
use std::error::Error;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{broadcast, oneshot};
use tokio::task::JoinHandle;
use workflow::journal::{Event, Timestamp};
use workflow::spec::Spec;
use workflow::{Engine, RunId, TaskInfo};

/// Where an example writes its output: to stdout (and kept), or only kept (for tests).
///
/// Cheap to clone; clones share the same lines.
#[derive(Debug, Clone)]
pub struct Log {
    echo: bool,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Log {
    /// Prints every line as it is written, and keeps it.
    pub fn stdout() -> Self {
        Log {
            echo: true,
            lines: Arc::default(),
        }
    }

    /// Keeps the lines without printing them.
    pub fn quiet() -> Self {
        Log {
            echo: false,
            lines: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<String>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one line (or several, separated by `\n`).
    pub fn line(&self, line: impl Into<String>) {
        let line = line.into();
        // Print under the lock so lines from concurrent tasks never interleave.
        let mut lines = self.lock();
        if self.echo {
            // Ignore a closed stdout (`| head`): the lines are still kept.
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        }
        lines.push(line);
    }

    /// Every line written so far.
    pub fn lines(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// Whether some line contains `needle`.
    pub fn contains(&self, needle: &str) -> bool {
        self.lock().iter().any(|line| line.contains(needle))
    }
}

/// `1.25s`, `12m05s` or `48h00m`: short, readable durations for simulated and real time.
pub fn fmt_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    if ms < 60_000 {
        format!("{:.2}s", duration.as_secs_f64())
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// Prints a live, readable line for every journal event of the engine's runs, as the
/// engine journals it (through [`Engine::subscribe`]).
///
/// Start it before the runs (and before `resume_all`) so no event is missed; call
/// [`Progress::finish`] once the runs are done to print the last events.
#[derive(Debug)]
pub struct Progress {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Progress {
    /// Subscribes to `engine`'s events; `spec` names the steps. Times are shown relative
    /// to now, by the engine's clock.
    pub fn start(engine: &Engine, spec: &'static Spec, log: &Log) -> Self {
        let mut events = engine.subscribe();
        let mut printer = Printer {
            spec,
            origin: engine.now(),
            failed_at: HashMap::new(),
            log: log.clone(),
        };
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    received = events.recv() => match received {
                        Ok((run, event)) => printer.print(run, &event),
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            printer.log.line(format!("  ({missed} events not shown: the journal has them)"));
                        }
                        Err(broadcast::error::RecvError::Closed) => break,
                    },
                    _ = &mut stopped => {
                        // Everything journaled so far is already in the channel.
                        while let Ok((run, event)) = events.try_recv() {
                            printer.print(run, &event);
                        }
                        break;
                    }
                }
            }
        });
        Progress {
            stop: Some(stop),
            task,
        }
    }

    /// Prints the events journaled so far and stops.
    pub async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

struct Printer {
    spec: &'static Spec,
    origin: Timestamp,
    /// When each step's last attempt failed, to show the backoff before the retry.
    failed_at: HashMap<(RunId, usize), Timestamp>,
    log: Log,
}

impl Printer {
    fn print(&mut self, run: RunId, event: &Event) {
        let at = fmt_duration(Duration::from_millis(
            event.at().saturating_sub(self.origin),
        ));
        if let Some(what) = self.describe(run, event) {
            self.log.line(format!("  [{at:>7} {run}] {what}"));
        }
    }

    fn step(&self, step: usize) -> &'static str {
        self.spec.steps.get(step).map_or("?", |s| s.id.as_str())
    }

    fn describe(&mut self, run: RunId, event: &Event) -> Option<String> {
        Some(match event {
            Event::RunStarted {
                workflow,
                dry_run,
                trace_id,
                ..
            } => {
                let mode = if *dry_run { " (dry run)" } else { "" };
                format!("run of {workflow} started{mode}, trace {trace_id}")
            }
            Event::AttemptStarted { step, attempt, at } => {
                let step_id = self.step(*step);
                match self.failed_at.remove(&(run, *step)) {
                    Some(failed) if *attempt > 1 => {
                        let waited = fmt_duration(Duration::from_millis(at.saturating_sub(failed)));
                        format!("{step_id}: attempt {attempt} started (after {waited} of backoff)")
                    }
                    _ if *attempt > 1 => {
                        format!("{step_id}: attempt {attempt} started (a retry, after the restart)")
                    }
                    _ => format!("{step_id}: started"),
                }
            }
            Event::AttemptFailed {
                step,
                attempt,
                kind,
                message,
                at,
                ..
            } => {
                self.failed_at.insert((run, *step), *at);
                let spec = self.spec.steps.get(*step)?;
                let retried = spec.retry.as_ref().is_some_and(|p| p.retries(*kind))
                    && *attempt < spec.max_attempts();
                let next = if retried {
                    "transient: will retry"
                } else {
                    "not retried"
                };
                format!(
                    "{}: attempt {attempt} FAILED ({kind}: {message}); {next}",
                    spec.id
                )
            }
            Event::StepSucceeded { step, .. } => format!("{}: succeeded", self.step(*step)),
            Event::StepSkipped { step, reason, .. } => {
                format!("{}: skipped ({reason})", self.step(*step))
            }
            Event::EffectProposed { step, .. } => format!(
                "{}: dry run: external effect PROPOSED, not executed",
                self.step(*step)
            ),
            Event::TaskOpened {
                step,
                assignee,
                deadline,
                at,
                ..
            } => format!(
                "{}: waiting for a decision by {assignee} (times out in {})",
                self.step(*step),
                fmt_duration(Duration::from_millis(deadline.saturating_sub(*at)))
            ),
            Event::TaskEscalated {
                step,
                to,
                deadline,
                at,
                ..
            } => format!(
                "{}: no decision before the deadline: ESCALATED to {to} (new deadline in {})",
                self.step(*step),
                fmt_duration(Duration::from_millis(deadline.saturating_sub(*at)))
            ),
            Event::TaskDecided {
                step, by, decision, ..
            } => {
                let verdict = match decision.get("approved").and_then(|v| v.as_bool()) {
                    Some(true) => "approved",
                    Some(false) => "rejected",
                    None => "decided",
                };
                format!("{}: {verdict} by {by}", self.step(*step))
            }
            Event::TaskExpired { step, .. } => {
                format!("{}: expired with no decision", self.step(*step))
            }
            Event::Compensated { step, error, .. } => match error {
                None => format!("{}: compensated (its effect was undone)", self.step(*step)),
                Some(error) => format!("{}: compensation FAILED: {error}", self.step(*step)),
            },
            Event::DeadlinePassed { .. } => "the run passed its deadline".to_owned(),
            Event::Cancelled { by, .. } => format!("cancelled by {by}"),
            Event::Retried { by, .. } => format!("retried from the dead-letter list by {by}"),
            _ => return None,
        })
    }
}

/// Waits until the human task `step` of `run` is open and returns it, polling the
/// engine's open tasks. Gives up when the run finishes first or after `limit`.
pub async fn wait_for_task(
    engine: &Engine,
    run: RunId,
    step: &str,
    limit: Duration,
) -> Result<TaskInfo, Box<dyn Error>> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let open = engine.open_tasks().await?;
        if let Some(task) = open.into_iter().find(|t| t.run == run && t.step == step) {
            return Ok(task);
        }
        let record = engine.inspect(run).await?.record;
        if record.status.is_finished() {
            return Err(format!(
                "{run} finished ({}) without opening task `{step}`",
                record.status.as_str()
            )
            .into());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("task `{step}` of {run} did not open within {limit:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A run's journal, from the engine's store.
pub async fn journal(engine: &Engine, run: RunId) -> Result<Vec<Event>, Box<dyn Error>> {
    let stored = engine
        .store()
        .load(run)
        .await?
        .ok_or_else(|| format!("{run} is not in the store"))?;
    Ok(stored.events)
}

//! Many workers on one PostgreSQL database: the workflow and one worker's loop, for the
//! `workers` example (`examples/workers.rs`), which runs three of them as processes, kills
//! the one that drives the most runs, and shows its runs moving to the others.
//!
//! A worker is an [`Engine`] on a [`PgStore`] with a name of its own and a short lease.
//! [`Engine::resume_all`] starts its background work: it renews its leases every third of
//! the lease, takes over runs whose owner's lease lapsed (the owner stopped renewing it:
//! killed, frozen, cut off), and wakes early on the store's notifications.

use std::error::Error;
use std::time::Duration;

use workflow::journal::Event;
use workflow::prelude::*;
use workflow::{PgOptions, PgStore};

/// The invoicing service the steps call: each call takes `step_time`.
#[derive(Debug, Clone)]
pub struct Billing {
    /// How long each step takes (long enough to kill a worker in the middle of a run).
    pub step_time: Duration,
}

mod billing {
    use super::*;

    pub(super) async fn prepare(env: &Billing, number: u64) -> Result<u64, StepError> {
        tokio::time::sleep(env.step_time).await;
        Ok(100 + number)
    }

    pub(super) async fn charge(
        env: &Billing,
        ctx: &StepContext,
        amount: u64,
    ) -> Result<u64, StepError> {
        tokio::time::sleep(env.step_time).await;
        // A real payment API would take `ctx.idempotency_key`, so a retry charges once.
        let _ = &ctx.idempotency_key;
        Ok(amount * 2)
    }

    pub(super) async fn send(
        env: &Billing,
        number: u64,
        charged: u64,
    ) -> Result<String, StepError> {
        tokio::time::sleep(env.step_time).await;
        Ok(format!("invoice {number}: charged {charged}"))
    }
}

workflow! {
    /// An invoice: prepared, charged, sent. Each step takes a while.
    pub workflow Invoice(number: u64) env Billing {
        step prepare -> u64 { action: billing::prepare(env, number) }
        step charge -> u64 {
            action: billing::charge(env, ctx, prepare),
            effect: external,
            idempotent: true,
        }
        step send -> String { action: billing::send(env, number, charge) }
    }
}

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The database (`postgres://…`).
    pub url: String,
    /// The schema of the store.
    pub schema: String,
    /// The worker's name: its engine's owner name.
    pub name: String,
    /// Its lease on the runs it drives.
    pub lease: Duration,
    /// The idempotency keys of the runs it starts (every worker may get the same ones:
    /// each key makes one run).
    pub starts: Vec<(String, u64)>,
    /// How long each step takes.
    pub step_time: Duration,
}

/// Completes on SIGTERM (or Ctrl-C).
async fn terminated() {
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs one worker until the process is killed or told to stop (SIGTERM, Ctrl-C: it
/// drains, handing its runs over): starts its runs, then drives whatever it owns or takes
/// over, printing each step it completes.
pub async fn worker(config: WorkerConfig) -> Result<(), Box<dyn Error>> {
    let options = PgOptions {
        schema: config.schema.clone(),
        max_connections: 4,
        ..PgOptions::default()
    };
    let store = PgStore::connect_with(&config.url, options).await?;
    let engine = Engine::builder()
        .store(store)
        .owner(config.name.clone())
        .lease(config.lease)
        .build();
    engine.register::<Invoice>(Billing {
        step_time: config.step_time,
    })?;
    let mut events = engine.subscribe();
    let resumed = engine.resume_all().await?;
    if resumed > 0 {
        println!("{}: resumed {resumed} run(s)", config.name);
    }
    for (key, number) in &config.starts {
        let run = engine
            .start_with::<Invoice>(InvoiceInput { number: *number }, StartOptions::key(key))
            .await?;
        println!("{}: started {} ({key})", config.name, run.id());
    }
    let steps = Invoice::spec();
    let mut stop = std::pin::pin!(terminated());
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            () = &mut stop => {
                // A rolling deploy's stop: hand the runs over, not leave them to lapse.
                let drained = engine.drain(Duration::from_secs(10)).await;
                println!(
                    "{}: drained: handed over {} run(s), stopped {} at the deadline",
                    config.name,
                    drained.handed_over.len(),
                    drained.stopped.len()
                );
                return Ok(());
            }
        };
        match event {
            Ok((run, Event::StepSucceeded { step, .. })) => {
                let id = steps.steps.get(step).map_or("?", |s| s.id.as_str());
                println!("{}: {run} step `{id}` done", config.name);
            }
            Ok((run, Event::AttemptStarted { step, attempt, .. })) if attempt > 1 || step > 0 => {
                let id = steps.steps.get(step).map_or("?", |s| s.id.as_str());
                println!(
                    "{}: {run} step `{id}` started (attempt {attempt})",
                    config.name
                );
            }
            Ok(_) => {}
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

//! A rolling deploy on PostgreSQL: three workers under load, each drained
//! (`Engine::drain`) and restarted in turn while runs keep starting. Asserted: every run
//! completes; every step's action finished once (no attempt was stopped: the deadline
//! outlasts a step); the keyed external effect, sent to a service that applies once per
//! key, was applied once per run; and each handed-over run was taken up by another worker
//! well before its lease would have lapsed. The handover times (release → the next
//! owner's first journal entry) are printed: p50, p99, max. Each drained worker's row
//! (`Store::workers`) says it drained and stopped.
//!
//! The server comes from `WORKFLOW_TEST_DATABASE_URL` (see `pg_testing::server`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workflow_core::prelude::*;
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_core::Handover;
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

/// A lapse would take this long: a handover must be far quicker.
const LEASE: Duration = Duration::from_secs(10);
const STEP: Duration = Duration::from_millis(150);

/// What the runs did: each action that finished, by idempotency key, and the effects a
/// downstream service applied, by key.
#[derive(Default)]
pub struct Ledger {
    finished: Mutex<HashMap<String, u32>>,
    applied: Mutex<HashMap<String, u32>>,
}

async fn work(ledger: &Ledger, ctx: &StepContext) -> Result<u32, StepError> {
    tokio::time::sleep(STEP).await;
    *ledger
        .finished
        .lock()
        .unwrap()
        .entry(ctx.idempotency_key.clone())
        .or_default() += 1;
    Ok(ctx.attempt)
}

async fn charge(ledger: &Ledger, ctx: &StepContext) -> Result<u32, StepError> {
    tokio::time::sleep(STEP).await;
    let mut applied = ledger.applied.lock().unwrap();
    *applied.entry(ctx.idempotency_key.clone()).or_default() += 1;
    Ok(1)
}

workflow! {
    /// Four steps, one of them an external effect.
    workflow Deploy(n: u64) env Arc<Ledger> {
        step a -> u32 { action: work(env, ctx) }
        step b -> u32 { action: work(env, ctx), depends_on: [a] }
        step pay -> u32 { action: charge(env, ctx), effect: external, depends_on: [b] }
        step d -> u32 { action: work(env, ctx), depends_on: [pay] }
    }
}

async fn worker(url: &str, schema: &Schema, owner: &str, ledger: &Arc<Ledger>) -> Engine {
    let store = PgStore::connect_with(url, schema.options())
        .await
        .expect("connect");
    let engine = Engine::builder()
        .store(store)
        .owner(owner)
        .lease(LEASE)
        .build();
    engine.register::<Deploy>(Arc::clone(ledger)).unwrap();
    engine.resume_all().await.unwrap();
    engine
}

async fn start(engine: &Engine, runs: std::ops::Range<u64>) {
    for n in runs {
        engine
            .start_with::<Deploy>(DeployInput { n }, StartOptions::key(format!("d-{n}")))
            .await
            .unwrap();
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_hands_every_run_over_without_losing_or_repeating_work() {
    let Some(url) = pg_testing::server("a_rolling_deploy_hands_every_run_over").await else {
        return;
    };
    let schema = Schema::new(&url, "drain_rolling");
    let ledger = Arc::new(Ledger::default());
    let mut workers = Vec::new();
    for i in 0..3 {
        workers.push(worker(&url, &schema, &format!("w{i}"), &ledger).await);
    }
    let reader = PgStore::connect_with(&url, schema.options()).await.unwrap();
    let mut next = 0;
    let mut handovers: Vec<Handover> = Vec::new();
    for round in 0..3 {
        // Load on every worker, then drain one of them mid-run and start it again.
        for engine in &workers {
            start(engine, next..next + 10).await;
            next += 10;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        let drained = workers[round].drain(Duration::from_secs(5)).await;
        assert!(drained.stopped.is_empty(), "{drained:?}");
        assert!(drained.released, "{drained:?}");
        // Its worker row says it drained, then stopped.
        let rows = reader.workers().await.unwrap();
        let row = rows
            .iter()
            .find(|row| row.name == format!("w{round}"))
            .unwrap_or_else(|| panic!("no worker row for w{round}: {rows:?}"));
        assert!(row.stopped && row.draining_since.is_some(), "{row:?}");
        handovers.extend(drained.handed_over.iter().copied());
        workers[round] = worker(&url, &schema, &format!("w{round}-{}", round + 1), &ledger).await;
    }
    let runs = next as usize;
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let records = reader.runs(RunFilter::default()).await.unwrap();
        let done = records
            .iter()
            .filter(|r| r.status == RunStatus::Completed)
            .count();
        if records.len() == runs && done == runs {
            break;
        }
        assert!(
            Instant::now() < until,
            "{done} of {runs} runs completed: {:?}",
            records
                .iter()
                .filter(|r| r.status != RunStatus::Completed)
                .map(|r| (r.id, r.status, r.owner.clone(), r.note.clone()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Nothing lost, nothing done twice.
    let finished = ledger.finished.lock().unwrap().clone();
    assert_eq!(finished.len(), runs * 3, "every internal step ran");
    assert!(
        finished.values().all(|n| *n == 1),
        "{:?}",
        finished
            .iter()
            .filter(|(_, n)| **n != 1)
            .collect::<Vec<_>>()
    );
    let applied = ledger.applied.lock().unwrap().clone();
    assert_eq!(applied.len(), runs);
    assert!(applied.values().all(|n| *n == 1), "{applied:?}");

    // Handover: from the release to the next owner's first journal entry.
    assert!(!handovers.is_empty());
    let mut times = Vec::new();
    for handover in &handovers {
        let events = reader.load(handover.run).await.unwrap().unwrap().events;
        let from = handover.journal_len.unwrap_or(0) as usize;
        if let Some(next) = events
            .get(from..)
            .and_then(|rest| rest.iter().find(|e| e.at() >= handover.released_at))
        {
            times.push(next.at() - handover.released_at);
        }
    }
    times.sort_unstable();
    let (p50, p99, max) = (
        percentile(&times, 0.5),
        percentile(&times, 0.99),
        *times.last().unwrap(),
    );
    eprintln!(
        "handover of {} runs (release → first entry elsewhere): p50 {p50} ms, p99 {p99} ms, \
         max {max} ms (a lapse would take {} ms)",
        times.len(),
        LEASE.as_millis()
    );
    // Released, not lapsed: every run moved long before its lease would have ended.
    assert!(
        max < LEASE.as_millis() as u64 / 2,
        "p50 {p50} p99 {p99} max {max}"
    );
    for engine in &workers {
        engine.shutdown();
    }
    schema.drop().await;
}

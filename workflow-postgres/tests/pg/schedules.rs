//! Two engines sharing one schema fire one per-second schedule: every tick starts exactly
//! one run, whichever engine decides it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workflow_core::prelude::*;
use workflow_core::schedule::{Overlap, Schedule};
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_core::Tick;
use workflow_postgres::testing::{self as pg_testing, Schema};

/// The scheduled times each engine's runs were given, in the order they ran.
#[derive(Default)]
pub struct Ledger(Mutex<Vec<(String, u64)>>);

/// An engine's name and the shared ledger.
pub struct Worker(String, Arc<Ledger>);

async fn record(env: &Worker, tick: Tick) -> Result<(), StepError> {
    env.1
         .0
        .lock()
        .unwrap()
        .push((env.0.clone(), tick.scheduled));
    Ok(())
}

workflow! {
    /// Records which engine ran which tick.
    pub workflow Ticked(tick: Tick) env Worker {
        step record -> () { action: record(env, tick) }
    }
}

fn engine(store: Arc<dyn Store>, name: &str, ledger: &Arc<Ledger>) -> Engine {
    let engine = Engine::builder()
        .shared_store(store)
        .lease(Duration::from_secs(3))
        .build();
    engine
        .register::<Ticked>(Worker(name.to_owned(), Arc::clone(ledger)))
        .unwrap();
    engine
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_start_each_tick_of_a_per_second_schedule_once() {
    let Some(url) =
        pg_testing::server("two_engines_start_each_tick_of_a_per_second_schedule_once").await
    else {
        return;
    };
    let schema = Schema::new(&url, "schedules");
    let first: Arc<dyn Store> = Arc::new(schema.store().await);
    let second: Arc<dyn Store> = Arc::new(schema.store().await);
    let ledger = Arc::new(Ledger::default());
    let a = engine(Arc::clone(&first), "a", &ledger);
    let b = engine(Arc::clone(&second), "b", &ledger);
    let mut every_second = Schedule::new("* * * * * *");
    every_second.overlap = Overlap::Allow;
    a.schedules()
        .create("per-second", "Ticked", every_second)
        .await
        .unwrap();
    let _ = b.schedules();

    // Wait (up to 30 s) for eight ticks to have run, then stop the schedule.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ledger.0.lock().unwrap().len() < 8 {
        assert!(Instant::now() < deadline, "eight ticks within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.schedules().pause("per-second").await.unwrap();
    // Let any run already started finish.
    let deadline = Instant::now() + Duration::from_secs(30);
    let runs = loop {
        let runs = first
            .runs(RunFilter {
                workflow: Some("Ticked".into()),
                ..RunFilter::default()
            })
            .await
            .unwrap();
        if runs.iter().all(|r| r.status == RunStatus::Completed) {
            break runs;
        }
        assert!(Instant::now() < deadline, "the runs finish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let ran = ledger.0.lock().unwrap().clone();
    let ticks: BTreeSet<u64> = ran.iter().map(|(_, t)| *t).collect();
    assert_eq!(ticks.len(), ran.len(), "no tick ran twice: {ran:?}");
    assert_eq!(runs.len(), ran.len(), "one run per tick");
    let keys: BTreeSet<String> = runs
        .iter()
        .filter_map(|r| r.idempotency_key.clone())
        .collect();
    let expected: BTreeSet<String> = ticks
        .iter()
        .map(|t| format!("schedule:per-second@{t}"))
        .collect();
    assert_eq!(keys, expected);
    // Whole seconds, one after another: no tick was skipped between the first and last.
    let ticks: Vec<u64> = ticks.into_iter().collect();
    assert!(ticks.iter().all(|t| t % 1000 == 0));
    assert!(
        ticks.windows(2).all(|w| w[1] - w[0] == 1000),
        "consecutive seconds: {ticks:?}"
    );
    a.shutdown();
    b.shutdown();
    schema.drop().await;
}

//! Flow control on PostgreSQL with two engines on one schema (each its own connection
//! pool, as two processes would be): a paused worker's step slot frees within one lease
//! and a waiting run on the other worker takes it; a key's workflow-level limit holds
//! across both workers.
//!
//! The server comes from `WORKFLOW_TEST_DATABASE_URL` (see `pg_testing::server`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workflow_core::prelude::*;
use workflow_core::store::Store;
use workflow_core::testing::FaultyStore;
use workflow_postgres::testing::{self as pg_testing, Schema};

/// What ran: (worker, input, started, finished).
#[derive(Default)]
pub struct Ledger(Mutex<Vec<(String, String, Instant, Instant)>>);

/// A worker's environment: its name, how long its attempts take, the shared ledger.
pub struct Env {
    worker: &'static str,
    takes: Duration,
    ledger: Arc<Ledger>,
}

async fn call_psp(env: &Env, name: String) -> Result<String, StepError> {
    let start = Instant::now();
    tokio::time::sleep(env.takes).await;
    env.ledger
        .0
        .lock()
        .unwrap()
        .push((env.worker.to_owned(), name.clone(), start, Instant::now()));
    Ok(name)
}

workflow! {
    workflow PspCall(customer: String, name: String) env Env {
        concurrency: { key: customer, limit: 1 },
        step call -> String {
            action: call_psp(env, name),
            concurrency: { key: "psp", limit: 1 },
        }
    }
}

const LEASE: Duration = Duration::from_millis(1_500);

fn engine(
    store: Arc<dyn Store>,
    worker: &'static str,
    takes: Duration,
    ledger: &Arc<Ledger>,
) -> Engine {
    let engine = Engine::builder()
        .shared_store(store)
        .owner(worker)
        .lease(LEASE)
        .build();
    engine
        .register::<PspCall>(Env {
            worker,
            takes,
            ledger: Arc::clone(ledger),
        })
        .unwrap();
    engine
}

fn input(customer: &str, name: &str) -> PspCallInput {
    PspCallInput {
        customer: customer.to_owned(),
        name: name.to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_workers_slot_frees_within_one_lease() {
    let Some(url) = pg_testing::server("a_paused_workers_slot_frees_within_one_lease").await else {
        return;
    };
    let db = Schema::new(&url, "flow_paused_slot");
    let ledger = Arc::new(Ledger::default());
    let paused = Arc::new(FaultyStore::new(Arc::new(db.store().await)));
    // Worker a's attempt would hold the psp slot for a minute.
    let a = engine(paused.clone(), "worker-a", Duration::from_secs(60), &ledger);
    a.resume_all().await.unwrap();
    let first = a.start::<PspCall>(input("c1", "first")).await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let flow = a.store().flow_of(first.id()).await.unwrap();
        if !flow.held.is_empty() {
            break;
        }
        assert!(Instant::now() < until, "worker a never took the slot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Worker a stops renewing (a paused process): its lease lapses within one lease.
    paused.slow_renewals(Duration::from_secs(3600));
    let paused_at = Instant::now();
    let b = engine(
        Arc::new(db.store().await),
        "worker-b",
        Duration::from_millis(50),
        &ledger,
    );
    b.resume_all().await.unwrap();
    let second = b.start::<PspCall>(input("c2", "second")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), second.outputs())
        .await
        .expect("the second run gets the slot")
        .unwrap();
    let waited = paused_at.elapsed();
    assert!(
        waited >= LEASE / 2,
        "the second run did not wait for the paused worker's slot: {waited:?}"
    );
    assert!(
        waited < LEASE * 4,
        "the slot freed {waited:?} after the pause, more than a lease and the polling after it"
    );
    let entries = ledger.0.lock().unwrap().clone();
    assert!(
        entries.iter().any(|e| e.0 == "worker-b" && e.1 == "second"),
        "{entries:?}"
    );
    // Worker a's attempt never finished (it was fenced off): no two attempts finished
    // while holding the one slot.
    assert!(!entries.iter().any(|e| e.0 == "worker-a"), "{entries:?}");
    drop(a);
    drop(b);
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_limit_holds_across_two_workers() {
    let Some(url) = pg_testing::server("a_keys_limit_holds_across_two_workers").await else {
        return;
    };
    let db = Schema::new(&url, "flow_two_workers");
    let ledger = Arc::new(Ledger::default());
    let a = engine(
        Arc::new(db.store().await),
        "worker-a",
        Duration::from_millis(200),
        &ledger,
    );
    let b = engine(
        Arc::new(db.store().await),
        "worker-b",
        Duration::from_millis(200),
        &ledger,
    );
    a.resume_all().await.unwrap();
    b.resume_all().await.unwrap();
    let mut handles = Vec::new();
    for i in 0..6 {
        let engine = if i % 2 == 0 { &a } else { &b };
        let customer = if i < 4 { "c1" } else { "c2" };
        handles.push(
            engine
                .start::<PspCall>(input(customer, &format!("r{i}")))
                .await
                .unwrap(),
        );
    }
    for handle in &handles {
        tokio::time::timeout(Duration::from_secs(60), handle.outputs())
            .await
            .expect("every run finishes")
            .unwrap();
    }
    let entries = ledger.0.lock().unwrap().clone();
    assert_eq!(entries.len(), 6, "{entries:?}");
    // One psp slot: no two attempts overlapped, on either worker.
    for (i, x) in entries.iter().enumerate() {
        for y in &entries[i + 1..] {
            assert!(
                !(x.2 < y.3 && y.2 < x.3),
                "two attempts held the one slot: {x:?} {y:?}"
            );
        }
    }
    drop(a);
    drop(b);
    db.drop().await;
}

//! Starts that do not come from `start`: a child workflow with a workflow-level
//! concurrency key, and a parked run restarted by an operator, are admitted like any other
//! start of their workflow, so its limit holds for them too (memory and SQLite stores,
//! paused time). A cancel of a run still queued for its key is carried out at its
//! admission, before any step runs.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use workflow_core::clock::TokioClock;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, Store};
use workflow_sqlite::SqliteStore;

/// Each charge: (customer, started, finished).
static LEDGER: Mutex<Vec<(String, Instant, Instant)>> = Mutex::new(Vec::new());

async fn charge(customer: String, cents: u64) -> Result<u64, StepError> {
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(10)).await;
    LEDGER
        .lock()
        .unwrap()
        .push((customer, started, Instant::now()));
    Ok(cents)
}

workflow! {
    pub workflow Charge(customer: String, cents: u64) {
        concurrency: { key: customer, limit: 1 },
        step charge -> u64 { action: charge(customer, cents) }
    }
}

workflow! {
    pub workflow Order(customer: String, cents: u64) {
        step pay -> ChargeOutputs { workflow: Charge(customer: customer, cents: cents) }
    }
}

workflow! {
    #[workflow(name = "Charge")]
    pub workflow ChargeV2(customer: String, cents: u64) {
        concurrency: { key: customer, limit: 1 },
        step charge -> u64 { action: charge(customer, cents) }
        step receipt -> u64 { action: receipt(charge) }
    }
}

async fn receipt(cents: u64) -> Result<u64, StepError> {
    Ok(cents)
}

fn engine(store: &Arc<dyn Store>) -> Engine {
    Engine::builder()
        .shared_store(Arc::clone(store))
        .clock(TokioClock::starting_at(1_000_000))
        .build()
}

#[tokio::test(start_paused = true)]
async fn a_restarted_parked_run_waits_for_its_key() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let before = engine(&store);
    before.register::<Charge>(()).unwrap();
    let old = before
        .start::<Charge>(ChargeInput {
            customer: "c9".into(),
            cents: 1,
        })
        .await
        .unwrap();
    // Stopped mid-charge; the next engine has a new version, so the run is parked.
    tokio::time::sleep(Duration::from_secs(1)).await;
    before.shutdown();
    let after = engine(&store);
    after.register::<ChargeV2>(()).unwrap();
    after.resume_all().await.unwrap();
    let holder = after
        .start::<ChargeV2>(ChargeV2Input {
            customer: "c9".into(),
            cents: 2,
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let restarted = after.restart_parked(old.id(), "ops").await.unwrap();
    let flow = store.flow_of(restarted).await.unwrap();
    let gate = flow.gate.expect("the restarted run is gated");
    assert!(
        !gate.admitted,
        "it waits while run {} holds c9",
        holder.id()
    );
    let restarted = after.handle::<ChargeV2>(restarted).await.unwrap();
    for run in [&holder, &restarted] {
        tokio::time::timeout(Duration::from_secs(600), run.outputs())
            .await
            .expect("both finish")
            .unwrap();
    }
    let ledger: Vec<_> = LEDGER
        .lock()
        .unwrap()
        .iter()
        .filter(|(customer, ..)| customer == "c9")
        .cloned()
        .collect();
    assert_eq!(ledger.len(), 2);
    assert!(
        ledger[0].2 <= ledger[1].1,
        "the restarted run charged after the holder: {ledger:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn children_of_a_limited_workflow_hold_its_limit() {
    let file = std::env::temp_dir().join(format!("workflow-children-{}.db", std::process::id()));
    let stores: [(&str, Arc<dyn Store>); 2] = [
        ("memory", Arc::new(MemoryStore::new())),
        ("sqlite", Arc::new(SqliteStore::open(&file).unwrap())),
    ];
    for (label, store) in stores {
        let engine = engine(&store);
        engine.register::<Order>(()).unwrap();
        engine.register::<Charge>(()).unwrap();
        engine.resume_all().await.unwrap();
        let mut orders = Vec::new();
        for (customer, cents) in [("c42", 100), ("c42", 200), ("c42", 300), ("c7", 400)] {
            orders.push(
                engine
                    .start::<Order>(OrderInput {
                        customer: format!("{label}/{customer}"),
                        cents,
                    })
                    .await
                    .unwrap(),
            );
        }
        let mut paid = Vec::new();
        for order in &orders {
            let outputs = tokio::time::timeout(Duration::from_secs(600), order.outputs())
                .await
                .expect("every order finishes")
                .unwrap();
            paid.push(outputs.pay.charge);
        }
        assert_eq!(paid, [100, 200, 300, 400], "{label}");
        let ledger: Vec<_> = LEDGER
            .lock()
            .unwrap()
            .iter()
            .filter(|(customer, ..)| customer.starts_with(&format!("{label}/")))
            .cloned()
            .collect();
        assert_eq!(ledger.len(), 4, "{label}: each child charged once");
        let c42: Vec<_> = ledger
            .iter()
            .filter(|(c, ..)| *c == format!("{label}/c42"))
            .collect();
        for (i, a) in c42.iter().enumerate() {
            for b in &c42[i + 1..] {
                assert!(
                    a.2 <= b.1 || b.2 <= a.1,
                    "{label}: two charges of c42 at once: {a:?} {b:?}"
                );
            }
        }
        // The other customer's child did not wait for c42's.
        let c7 = ledger
            .iter()
            .find(|(c, ..)| *c == format!("{label}/c7"))
            .unwrap();
        let first = c42.iter().map(|(_, started, _)| *started).min().unwrap();
        assert!(
            c7.1 < first + Duration::from_secs(10),
            "{label}: c7 waited for c42"
        );
        engine.shutdown();
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

#[tokio::test(start_paused = true)]
async fn a_queued_run_cancelled_runs_no_step() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(&store);
    engine.register::<Charge>(()).unwrap();
    engine.resume_all().await.unwrap();
    let start = |cents| {
        engine.start::<Charge>(ChargeInput {
            customer: "c5".into(),
            cents,
        })
    };
    let holder = start(1).await.unwrap();
    let queued = start(2).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    engine.cancel(queued.id(), "ops").await.unwrap();
    let wait = Duration::from_secs(600);
    let held = tokio::time::timeout(wait, holder.outputs()).await.unwrap();
    assert_eq!(held.unwrap().charge, 1);
    let Err(error) = tokio::time::timeout(wait, queued.outputs()).await.unwrap() else {
        panic!("the cancelled run completed");
    };
    assert!(matches!(error, RunError::Cancelled(_)), "{error}");
    let charged = LEDGER
        .lock()
        .unwrap()
        .iter()
        .filter(|(customer, ..)| customer == "c5")
        .count();
    assert_eq!(charged, 1, "only the holder charged");
}

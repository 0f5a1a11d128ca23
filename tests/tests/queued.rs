//! Queued starts in one process, on the memory and SQLite stores: `Engine::enqueue` writes
//! a run owned by nobody; an intake-only engine never drives it; a worker engine over the
//! same store admits it (oldest first, as many as it has room for) and drives it; a
//! repeated idempotency key names the same run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use workflow_core::clock::TokioClock;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_sqlite::SqliteStore;

/// What ran where: (engine label, input, started at, finished at), in start order.
#[derive(Default)]
pub struct Ledger {
    entries: Mutex<Vec<Entry>>,
}

type Entry = (String, String, tokio::time::Instant, tokio::time::Instant);

/// A worker's environment: its label and the shared ledger.
pub struct Env {
    label: &'static str,
    ledger: Arc<Ledger>,
}

async fn work(env: &Env, name: String) -> Result<String, StepError> {
    let start = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let end = tokio::time::Instant::now();
    env.ledger
        .entries
        .lock()
        .unwrap()
        .push((env.label.to_owned(), name.clone(), start, end));
    Ok(format!("hello {name}"))
}

workflow! {
    workflow Greet(name: String) env Env {
        step greet -> String { action: work(env, name) }
    }
}

fn env(label: &'static str, ledger: &Arc<Ledger>) -> Env {
    Env {
        label,
        ledger: Arc::clone(ledger),
    }
}

fn intake(store: &Arc<dyn Store>) -> Engine {
    Engine::builder()
        .shared_store(Arc::clone(store))
        .clock(TokioClock::starting_at(1_000))
        .intake_only()
        .build()
}

fn worker(store: &Arc<dyn Store>) -> workflow_core::EngineBuilder {
    Engine::builder()
        .shared_store(Arc::clone(store))
        .clock(TokioClock::starting_at(1_000))
}

struct TempDb(std::path::PathBuf);

impl TempDb {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let file = format!("workflow-queued-{name}-{}-{nanos}.db", std::process::id());
        TempDb(std::env::temp_dir().join(file))
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

/// The run as the store has it: status, owner and journal length.
async fn stored(store: &Arc<dyn Store>, run: RunId) -> (RunStatus, Option<String>, usize) {
    let stored = store.load(run).await.unwrap().unwrap();
    (
        stored.record.status,
        stored.record.owner,
        stored.events.len(),
    )
}

/// An intake-only engine queues runs and never drives them, however long it waits; a
/// repeated key names the same run; a worker started later admits and drives them once.
async fn intake_queues_and_a_worker_drives(store: Arc<dyn Store>) {
    let ledger = Arc::new(Ledger::default());
    let intake = intake(&store);
    // Registering on an intake engine checks inputs by name; it still drives nothing.
    intake.register::<Greet>(env("intake", &ledger)).unwrap();
    assert!(intake.is_intake_only());
    assert_eq!(intake.resume_all().await.unwrap(), 0);

    let first = intake
        .enqueue::<Greet>(
            GreetInput { name: "ada".into() },
            StartOptions::key("order-1"),
        )
        .await
        .unwrap();
    assert!(first.was_created());
    let again = intake
        .enqueue::<Greet>(
            GreetInput { name: "ada".into() },
            StartOptions::key("order-1"),
        )
        .await
        .unwrap();
    assert_eq!(again.id(), first.id(), "the key names the queued run");
    assert!(!again.was_created());
    // An intake-only engine's start enqueues too.
    let second = intake
        .start::<Greet>(GreetInput { name: "bob".into() })
        .await
        .unwrap();
    let (third, created) = intake
        .start_json(
            "Greet",
            serde_json::json!({ "name": "cy" }),
            StartOptions::default(),
        )
        .await
        .unwrap();
    assert!(created);
    let wrong = intake
        .start_json(
            "Greet",
            serde_json::json!({ "nom": 3 }),
            StartOptions::default(),
        )
        .await;
    assert!(
        matches!(wrong, Err(RunError::Decode { .. })),
        "inputs are checked against the type: {wrong:?}"
    );

    tokio::time::sleep(Duration::from_secs(30)).await;
    for run in [first.id(), second.id(), third] {
        assert_eq!(
            stored(&store, run).await,
            (RunStatus::Running, None, 1),
            "queued: nobody's, nothing but its start"
        );
    }
    assert!(ledger.entries.lock().unwrap().is_empty());

    // The intake's handle waits for whoever drives the run.
    let waiting = tokio::spawn(async move { first.outputs().await });
    let worker = worker(&store).build();
    worker.register::<Greet>(env("worker", &ledger)).unwrap();
    assert_eq!(worker.resume_all().await.unwrap(), 3, "all three admitted");
    let outputs = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the run finishes")
        .unwrap()
        .unwrap();
    assert_eq!(outputs.greet, "hello ada");
    let handle = worker.handle::<Greet>(second.id()).await.unwrap();
    assert_eq!(handle.outputs().await.unwrap().greet, "hello bob");
    let handle = worker.handle::<Greet>(third).await.unwrap();
    assert_eq!(handle.outputs().await.unwrap().greet, "hello cy");
    let entries = ledger.entries.lock().unwrap().clone();
    let mut names: Vec<&str> = entries.iter().map(|e| e.1.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["ada", "bob", "cy"], "each run once");
    assert!(entries.iter().all(|e| e.0 == "worker"), "{entries:?}");
}

/// A worker that runs already admits what an intake engine queues later, oldest first and
/// no more at once than `max_live_runs`.
async fn a_running_worker_admits_in_order(store: Arc<dyn Store>) {
    let ledger = Arc::new(Ledger::default());
    let worker = worker(&store).max_live_runs(1).build();
    worker.register::<Greet>(env("worker", &ledger)).unwrap();
    worker.resume_all().await.unwrap();
    let intake = intake(&store);
    let mut runs = Vec::new();
    for name in ["r1", "r2", "r3", "r4"] {
        let input = GreetInput { name: name.into() };
        runs.push(
            intake
                .enqueue::<Greet>(input, StartOptions::default())
                .await
                .unwrap(),
        );
    }
    for run in &runs {
        tokio::time::timeout(Duration::from_secs(60), run.outputs())
            .await
            .expect("admitted and finished")
            .unwrap();
    }
    let entries = ledger.entries.lock().unwrap().clone();
    let names: Vec<&str> = entries.iter().map(|e| e.1.as_str()).collect();
    assert_eq!(names, ["r1", "r2", "r3", "r4"], "oldest first");
    for pair in entries.windows(2) {
        assert!(
            pair[1].2 >= pair[0].3,
            "one live run at a time: {entries:?}"
        );
    }
    for run in &runs {
        assert_eq!(stored(&store, run.id()).await.0, RunStatus::Completed);
    }
}

/// A worker's own `enqueue` is admitted by its own background task.
/// A worker admits runs it queued itself, their initiator journaled with the start.
async fn a_worker_admits_its_own_queue(store: Arc<dyn Store>) {
    let ledger = Arc::new(Ledger::default());
    let worker = worker(&store).build();
    worker.register::<Greet>(env("worker", &ledger)).unwrap();
    let run = worker
        .enqueue::<Greet>(
            GreetInput {
                name: "solo".into(),
            },
            StartOptions::key("solo").initiator("alice"),
        )
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        while stored(&store, run.id()).await.0 != RunStatus::Completed {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("admitted without anyone waiting on it");
    assert_eq!(ledger.entries.lock().unwrap().len(), 1);
    // Who queued it is journaled with its start, so `self_approval: false` holds.
    let events = store.load(run.id()).await.unwrap().unwrap().events;
    assert!(
        matches!(&events[1], workflow_core::journal::Event::Initiated { by, .. } if by == "alice"),
        "{:?}",
        events[1]
    );
}

fn memory() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

#[tokio::test(start_paused = true)]
async fn memory_intake_queues_and_a_worker_drives() {
    intake_queues_and_a_worker_drives(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_a_running_worker_admits_in_order() {
    a_running_worker_admits_in_order(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn memory_a_worker_admits_its_own_queue() {
    a_worker_admits_its_own_queue(memory()).await;
}

#[tokio::test(start_paused = true)]
async fn sqlite_intake_queues_and_a_worker_drives() {
    let db = TempDb::new("intake");
    intake_queues_and_a_worker_drives(Arc::new(SqliteStore::open(&db.0).unwrap())).await;
}

#[tokio::test(start_paused = true)]
async fn sqlite_a_running_worker_admits_in_order() {
    let db = TempDb::new("order");
    a_running_worker_admits_in_order(Arc::new(SqliteStore::open(&db.0).unwrap())).await;
}

#[tokio::test(start_paused = true)]
async fn sqlite_a_worker_admits_its_own_queue() {
    let db = TempDb::new("own");
    a_worker_admits_its_own_queue(Arc::new(SqliteStore::open(&db.0).unwrap())).await;
}

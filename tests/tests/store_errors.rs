//! Store failures by what retrying would do: a transient failure is retried until the
//! write lands; a write the store refuses for good parks the run with the store's reason
//! (in its note, as `runs show` and the API show it) and counts it in
//! `workflow_runs_parked_total{reason="store_rejected"}`, instead of stalling it silently.

use std::sync::Arc;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use workflow_core::clock::TokioClock;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store, StoreError};
use workflow_core::testing::{FaultyStore, Write};
use workflow_sqlite::SqliteStore;

async fn fetch(item: String) -> Result<String, StepError> {
    Ok(item)
}

async fn publish(item: String) -> Result<String, StepError> {
    Ok(format!("published {item}"))
}

workflow! {
    workflow Publish(item: String) {
        step fetch -> String { action: fetch(item) }
        step publish -> String { action: publish(fetch) }
    }
}

/// Runs `scenario` on a current-thread runtime with paused time, recording metrics.
fn recorded<F, Fut>(scenario: F) -> DebuggingRecorder
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let recorder = DebuggingRecorder::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || runtime.block_on(scenario()));
    recorder
}

fn parked_count(recorder: &DebuggingRecorder, reason: &str) -> u64 {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            key.key().name() == "workflow_runs_parked_total"
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "reason" && l.value() == reason)
        })
        .map(|(_, _, _, value)| match value {
            DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum()
}

async fn wait_status(store: &dyn Store, run: RunId, status: RunStatus) -> Option<String> {
    for _ in 0..600 {
        let record = store.load(run).await.unwrap().unwrap().record;
        if record.status == status {
            return record.note;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{run} never became {status:?}");
}

/// An engine with `Publish` over a store that fails on demand, and the store beneath it.
fn faulty_engine() -> (Arc<dyn Store>, FaultyStore, Engine) {
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let faulty = FaultyStore::new(Arc::clone(&inner));
    let engine = Engine::builder()
        .shared_store(Arc::new(faulty.clone()))
        .clock(TokioClock::starting_at(0))
        .build();
    engine.register::<Publish>(()).unwrap();
    (inner, faulty, engine)
}

#[test]
fn a_write_the_store_refuses_for_good_parks_the_run_with_the_reason() {
    let recorder = recorded(|| async {
        let (inner, faulty, engine) = faulty_engine();
        // The first commit after the start (the first step's result) is refused for good.
        faulty.fail_next(
            Write::Commit,
            1,
            StoreError::Rejected {
                reason: "value too long for type character varying(64) (SQLSTATE 22001)".into(),
            },
        );
        let run = engine
            .start::<Publish>(PublishInput { item: "a".into() })
            .await
            .unwrap()
            .id();
        let note = wait_status(&*inner, run, RunStatus::Parked).await.unwrap();
        assert!(
            note.contains("refused a write of this run for good"),
            "{note}"
        );
        assert!(note.contains("SQLSTATE 22001"), "{note}");
        // Nothing of the refused write was kept: the journal holds the start only.
        let events = inner.load(run).await.unwrap().unwrap().events;
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, workflow_core::journal::Event::StepSucceeded { .. })),
            "{events:?}"
        );
        assert_eq!(faulty.failures(), 1);
    });
    assert_eq!(parked_count(&recorder, "store_rejected"), 1);
}

#[test]
fn a_transient_failure_is_retried_until_the_write_lands() {
    let recorder = recorded(|| async {
        let (_, faulty, engine) = faulty_engine();
        faulty.fail_next(
            Write::Commit,
            3,
            StoreError::Io("could not serialize access (SQLSTATE 40001)".into()),
        );
        let run = engine
            .start::<Publish>(PublishInput { item: "b".into() })
            .await
            .unwrap();
        let outputs = run.outputs().await.unwrap();
        assert_eq!(outputs.publish, "published b");
        assert_eq!(faulty.failures(), 3);
    });
    assert_eq!(parked_count(&recorder, "store_rejected"), 0);
}

#[test]
fn errors_say_whether_retrying_can_help() {
    let transient = [
        StoreError::Io("reset".into()),
        StoreError::Unreachable {
            target: "db:5432/x".into(),
            reason: "refused".into(),
        },
        StoreError::DiskFull { path: "f".into() },
        StoreError::Locked {
            path: "f".into(),
            waited_ms: 5,
        },
    ];
    assert!(transient.iter().all(StoreError::is_transient));
    let final_ = [
        StoreError::Rejected {
            reason: "check".into(),
        },
        StoreError::Conflict {
            run: RunId(1),
            seq: 2,
        },
        StoreError::Fenced {
            run: RunId(1),
            owner: "a".into(),
        },
        StoreError::Corrupt {
            run: RunId(1),
            seq: 0,
        },
        StoreError::UnknownRun(RunId(1)),
    ];
    assert!(final_.iter().all(|e| !e.is_transient()));
}

/// A real SQLite file whose journal refuses an entry (a trigger, as a check constraint
/// added by hand would): the run is parked with SQLite's reason, nothing is retried
/// forever, and a second run that does not trip the check completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_refusing_an_entry_parks_the_run() {
    let dir = std::env::temp_dir().join(format!("store-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("runs.db");
    let _ = std::fs::remove_file(&path);
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON journal
             WHEN NEW.event LIKE '%published poison%'
             BEGIN SELECT RAISE(ABORT, 'poison is not published'); END;",
        )
        .unwrap();
    }
    let engine = Engine::builder().shared_store(Arc::clone(&store)).build();
    engine.register::<Publish>(()).unwrap();
    let poisoned = engine
        .start::<Publish>(PublishInput {
            item: "poison".into(),
        })
        .await
        .unwrap()
        .id();
    let fine = engine
        .start::<Publish>(PublishInput {
            item: "bread".into(),
        })
        .await
        .unwrap();
    assert_eq!(fine.outputs().await.unwrap().publish, "published bread");
    let note = wait_status(&*store, poisoned, RunStatus::Parked)
        .await
        .unwrap();
    assert!(note.contains("poison is not published"), "{note}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! A run whose journal was damaged on disk is never driven, on every store: an engine that
//! takes the run up finds the damage, lists the run as damaged (with the store's typed
//! error), leaves it `running` (not failed, not dead-lettered), and drives the store's
//! other runs as usual. In a store one engine drives it gives up its claim; in a store
//! several workers share it keeps the claim, so the workers do not pass the run around.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use workflow_conformance::Subject;
use workflow_core::prelude::*;
use workflow_core::store::{RunFilter, RunStatus, StoreError};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_sqlite::SqliteOptions;

async fn draft(item: String) -> Result<String, StepError> {
    Ok(format!("draft of {item}"))
}

workflow! {
    /// A draft a moderator reviews.
    workflow Review(item: String) {
        step draft -> String { action: draft(item) }
        human review -> Approval {
            assignee: "mods",
            depends_on: [draft],
            timeout: 1h,
            on_timeout: abort,
        }
    }
}

/// An engine named `worker-1`. Its lease is short: on PostgreSQL the damaged run may be
/// set aside by the engine's heartbeat rather than by `resume_all`, and heartbeats come
/// every third of a lease (10 s with the default lease, as long as the test waits).
async fn engine(subject: &Subject) -> Engine {
    let engine = Engine::builder()
        .shared_store(subject.store.clone())
        .owner("worker-1")
        .lease(Duration::from_millis(1_500))
        .build();
    engine.register::<Review>(()).unwrap();
    engine
}

/// Two runs wait for their reviews; the engine stops; entry 1 of the first is damaged;
/// an engine restarted under the same name resumes only the second.
async fn a_damaged_run_is_not_driven(subject: Subject) {
    let first = engine(&subject).await;
    let mut runs = Vec::new();
    for item in ["post 1", "post 2"] {
        let input = ReviewInput { item: item.into() };
        runs.push(first.start::<Review>(input).await.unwrap().id());
    }
    tokio::time::timeout(Duration::from_secs(20), async {
        while first.open_tasks().await.unwrap().len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("both reviews open");
    first.shutdown();
    let (damaged, intact) = (runs[0], runs[1]);
    (subject.damage)(damaged, 1).await;

    let second = engine(&subject).await;
    second.resume_all().await.unwrap();
    // On a store several workers share, the engine's heartbeat may be the one that takes
    // the damaged run up and sets it aside, in the background.
    let shared = subject.store.multi_worker();
    let record = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let listed = subject.store.runs(RunFilter::default()).await.unwrap();
            let record = listed
                .into_iter()
                .find(|r| r.id == damaged)
                .expect("listed");
            if !second.damaged().is_empty() && record.owner.is_some() == shared {
                break record;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the damaged run is set aside");
    assert_eq!(
        second.damaged(),
        [(
            damaged,
            StoreError::Corrupt {
                run: damaged,
                seq: 1
            }
        )]
    );
    assert_eq!(record.status, RunStatus::Running, "not failed");
    if shared {
        // Held, through more than a lease, by the worker that found the damage.
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        let listed = subject.store.runs(RunFilter::default()).await.unwrap();
        let record = listed.iter().find(|r| r.id == damaged).expect("listed");
        assert_eq!(record.owner.as_deref(), Some("worker-1"));
    } else {
        assert_eq!(record.owner, None, "its claim was given up");
    }
    assert!(subject.store.dead_letters().await.unwrap().is_empty());
    let verification = subject.store.verify().await.unwrap();
    assert_eq!(
        verification
            .damaged
            .iter()
            .map(|d| d.run)
            .collect::<Vec<_>>(),
        [Some(damaged)]
    );

    // The intact run is driven: its review is decided and it completes.
    let handle = second.handle::<Review>(intact).await.unwrap();
    handle.review().approve("ana@mods", None).await.unwrap();
    let outputs = tokio::time::timeout(Duration::from_secs(20), handle.outputs())
        .await
        .expect("the intact run finishes")
        .unwrap();
    assert_eq!(outputs.draft, "draft of post 2");
    second.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory() {
    a_damaged_run_is_not_driven(Subject::memory()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite() {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "workflow-damaged-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let subject =
        workflow_sqlite::testing::subject(dir.join("store.db"), SqliteOptions::default()).unwrap();
    a_damaged_run_is_not_driven(subject).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres() {
    let Some(url) = pg_testing::server("damaged::on_postgres").await else {
        return;
    };
    let schema = Schema::new(&url, "damaged");
    a_damaged_run_is_not_driven(schema.subject().await).await;
    schema.drop().await;
}

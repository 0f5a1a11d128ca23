//! One commit per step boundary: a step's result and the starts it makes ready are one
//! transaction, a run's creation rides with its first start and its end with its last
//! result. Counted on every store, so the figure cannot regress silently.

use std::sync::Arc;

use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, Message, Store};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

async fn add(n: u32) -> Result<u32, StepError> {
    Ok(n + 1)
}

workflow! {
    /// Ten steps in a chain.
    workflow Chain(n: u32) {
        step s1 -> u32 { action: add(n) }
        step s2 -> u32 { action: add(s1) }
        step s3 -> u32 { action: add(s2) }
        step s4 -> u32 { action: add(s3) }
        step s5 -> u32 { action: add(s4) }
        step s6 -> u32 { action: add(s5) }
        step s7 -> u32 { action: add(s6) }
        step s8 -> u32 { action: add(s7) }
        step s9 -> u32 { action: add(s8) }
        step s10 -> u32 { action: add(s9) }
    }
}

/// Creation with the first start, nine boundaries, the last result with the run's end.
const COMMITS_PER_RUN: u64 = 11;

#[tokio::test]
async fn a_ten_step_run_is_eleven_commits_in_memory() {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder().shared_store(store.clone()).build();
    engine.register::<Chain>(()).unwrap();
    let outputs = engine
        .start::<Chain>(ChainInput { n: 0 })
        .await
        .unwrap()
        .outputs()
        .await
        .unwrap();
    assert_eq!(outputs.s10, 10);
    assert_eq!(store.commits(), COMMITS_PER_RUN);
    assert_eq!(
        store.journal_writes(),
        21,
        "run_started + 10 starts + 10 results"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_step_run_is_eleven_commits_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("workflow-commits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("commits.db");
    let _ = std::fs::remove_file(&path);
    let options = SqliteOptions {
        synchronous: Synchronous::Off,
        ..SqliteOptions::default()
    };
    let store = Arc::new(SqliteStore::open_with(&path, options).unwrap());
    let engine = Engine::builder().shared_store(store.clone()).build();
    engine.register::<Chain>(()).unwrap();
    let run = engine.start::<Chain>(ChainInput { n: 0 }).await.unwrap();
    assert_eq!(run.outputs().await.unwrap().s10, 10);
    // The spec's registration is one more transaction, made before the run was created.
    assert_eq!(store.commits(), 1 + COMMITS_PER_RUN);
    assert_eq!(store.journal_writes(), 21);
    drop(engine);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On PostgreSQL the same eleven commits, each one statement with the checksums of what
/// it writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_step_run_is_eleven_commits_on_postgres() {
    use workflow_postgres::testing::{self as pg_testing, Schema};

    let Some(url) = pg_testing::server("a_ten_step_run_is_eleven_commits_on_postgres").await else {
        return;
    };
    let schema = Schema::new(&url, "commits");
    let store = Arc::new(schema.store().await);
    let engine = Engine::builder().shared_store(store.clone()).build();
    engine.register::<Chain>(()).unwrap();
    let run = engine.start::<Chain>(ChainInput { n: 0 }).await.unwrap();
    assert_eq!(run.outputs().await.unwrap().s10, 10);
    assert_eq!(store.commits(), COMMITS_PER_RUN);
    assert_eq!(store.journal_writes(), 21);
    engine.shutdown();
    drop(engine);
    drop(store);
    schema.drop().await;
}

/// The store a run's steps write to behind the engine's back, as another process would.
struct Outside(Arc<MemoryStore>);

/// Leaves a cancellation in the run's inbox, announced to nobody.
async fn leave_cancel(outside: &Outside, ctx: &StepContext, n: u32) -> Result<u32, StepError> {
    let message = Message::Cancel {
        by: "ops@outside".into(),
    };
    outside
        .0
        .submit(ctx.run_id, &message, None, 0)
        .await
        .map_err(|error| StepError::permanent(error.to_string()))?;
    Ok(n)
}

workflow! {
    /// A first step that leaves a message in its own run's inbox, then two more.
    workflow Messaged(n: u32) env Outside {
        step first -> u32 { action: leave_cancel(env, ctx, n) }
        step second -> u32 { action: add(first) }
        step third -> u32 { action: add(second) }
    }
}

/// A new run's driver does not read the inbox before its first commit: that commit's
/// answer says whether messages wait. A message left after the driver started (on a store
/// no poller watches, so nothing else would find it) is taken in right after it.
#[tokio::test]
async fn a_new_runs_first_commit_finds_the_messages_left_in_its_inbox() {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::builder().shared_store(store.clone()).build();
    engine.register::<Messaged>(Outside(store.clone())).unwrap();
    let run = engine
        .start::<Messaged>(MessagedInput { n: 1 })
        .await
        .unwrap();
    let outcome = run.outputs().await.map(|outputs| outputs.third);
    assert!(
        matches!(outcome, Err(RunError::Cancelled(_))),
        "{outcome:?}"
    );
    let events = store.load(run.id()).await.unwrap().unwrap().events;
    let cancelled = events
        .iter()
        .find_map(|event| match event {
            Event::Cancelled { by, inbox, .. } => Some((by.as_str(), inbox.is_some())),
            _ => None,
        })
        .expect("the run journaled its cancellation");
    assert_eq!(cancelled, ("ops@outside", true));
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, Event::StepSucceeded { step: 2, .. })),
        "the third step never ran"
    );
}

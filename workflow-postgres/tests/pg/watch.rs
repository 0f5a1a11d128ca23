//! Watched runs and worker rows on PostgreSQL: a commit to a watched run notifies the
//! store's channel for its watchers (in any process), a commit to a run nobody watches
//! notifies nothing and costs the same one statement; a heartbeat is one statement too.

use std::time::Duration;

use sqlx::postgres::PgListener;
use workflow_core::journal::Event;
use workflow_core::store::{Commit, Fence, Heartbeat, Store};
use workflow_postgres::testing::{self as pg_testing, Schema};

use super::{claim_all, claimant, create, wall_clock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_notifies_only_while_its_run_is_watched() {
    let Some(url) = pg_testing::server("a_commit_notifies_only_while_watched").await else {
        return;
    };
    let schema = Schema::new(&url, "watch");
    let (watcher, writer) = (schema.store().await, schema.store().await);
    let watched = create(&writer, None).await.id();
    let unwatched = create(&writer, None).await.id();
    let leases = writer
        .claim(claim_all(claimant("w", 60_000, wall_clock()), None))
        .await
        .expect("claim");
    let token = |run| leases.iter().find(|l| l.run == run).expect("claimed").token;

    // What the channel carries, heard by a listener of our own.
    let pool = sqlx::PgPool::connect(&url).await.expect("a pool");
    let mut heard = PgListener::connect_with(&pool).await.expect("a listener");
    heard
        .listen(&format!("workflow_{}", schema.name()))
        .await
        .expect("listen");

    let mut watch = watcher.watch(watched).await.expect("watch");
    let commit = |run, seq: u64| {
        let events = [Event::AttemptStarted {
            step: 0,
            attempt: seq as u32,
            at: 2_000,
        }];
        let fence = Fence {
            owner: "w",
            token: token(run),
        };
        let writer = &writer;
        async move {
            let before = writer.round_trips();
            writer
                .commit(Commit {
                    fence: Some(fence),
                    ..Commit::events(run, seq, &events, 2_000)
                })
                .await
                .expect("commit");
            writer.round_trips() - before
        }
    };
    // The run nobody watches first, then the watched one: one statement each, and the
    // first commit notification on the channel is the watched run's.
    assert_eq!(commit(unwatched, 1).await, 1);
    assert_eq!(commit(watched, 1).await, 1, "watched, still one statement");
    let payload = loop {
        let notification = heard.recv().await.expect("a notification");
        if notification.payload().starts_with("commit ") {
            break notification.payload().to_owned();
        }
    };
    assert_eq!(payload, format!("commit {}", watched.0));
    // The watcher's store heard it too (the mark's renewal is a quarter minute away).
    tokio::time::timeout(Duration::from_secs(10), watch.changed())
        .await
        .expect("the watch is told of the commit");
    assert!(!watch.needs_renewal());

    // A heartbeat renews and records its worker in one statement.
    let before = writer.round_trips();
    let held = writer
        .heartbeat(Heartbeat {
            claimant: claimant("w", 60_000, wall_clock()),
            started: 1_000,
            draining: None,
        })
        .await
        .expect("heartbeat");
    assert_eq!(held.len(), 2);
    assert_eq!(writer.round_trips() - before, 1);
    drop((watcher, writer));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_worker_rows_migrates_with_its_runs_unwatched() {
    let Some(url) = pg_testing::server("a_database_from_before_worker_rows").await else {
        return;
    };
    let schema = Schema::new(&url, "workers_migrate");
    schema
        .create_at_version(workflow_postgres::PgStore::SCHEMA_VERSION - 1)
        .await;
    schema
        .execute(
            "INSERT INTO runs (id, workflow, fingerprint, status, owner, lease_until,
                               journal_len, created_at, updated_at, crc)
             OVERRIDING SYSTEM VALUE
             VALUES (1, 'onboard', 'fp1', 'running', 'w', now() + interval '1 hour', 0, 1, 1, 0)",
        )
        .await
        .expect("a run from before");
    let store = schema.store().await;
    assert_eq!(store.workers().await.expect("workers"), Vec::new());
    schema
        .execute(
            "DO $$ BEGIN
                IF EXISTS (SELECT 1 FROM runs WHERE watched_until IS NOT NULL) THEN
                    RAISE EXCEPTION 'a run from before is marked watched';
                END IF;
             END $$;",
        )
        .await
        .expect("runs from before are not watched");
    // Its owner's token, of this timeline (the functions exist once the store opened).
    schema
        .execute("UPDATE runs SET lease_token = workflow_epoch() + 1 WHERE id = 1")
        .await
        .expect("a token");
    let held = store
        .heartbeat(Heartbeat {
            claimant: claimant("w", 60_000, wall_clock()),
            started: 1_000,
            draining: None,
        })
        .await
        .expect("heartbeat");
    assert_eq!(held, [workflow_core::RunId(1)]);
    let rows = store.workers().await.expect("workers");
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].name.as_str(), rows[0].stopped), ("w", false));
    store.release("w", None).await.expect("release");
    assert!(store.workers().await.expect("workers")[0].stopped);
    drop(store);
    schema.drop().await;
}

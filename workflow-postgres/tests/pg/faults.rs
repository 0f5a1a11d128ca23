//! Faults and bad input: an unreachable host, schemas this library must not touch,
//! connections dropped under the store, and wake-ups through `NOTIFY`.

use std::time::Duration;

use workflow_core::store::{Message, Store, StoreError};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::{PgOptions, PgStore};

use super::create;

#[tokio::test]
async fn an_unreachable_server_is_named_without_its_password() {
    let options = PgOptions {
        connect_timeout: Duration::from_millis(600),
        ..PgOptions::default()
    };
    let error = PgStore::connect_with("postgres://ana:s3cret@127.0.0.1:1/orders", options)
        .await
        .expect_err("nothing listens on port 1");
    let StoreError::Unreachable { target, .. } = &error else {
        panic!("expected Unreachable, got {error:?}");
    };
    assert_eq!(target, "127.0.0.1:1/orders");
    let shown = error.to_string();
    assert!(shown.contains("127.0.0.1:1"), "{shown}");
    assert!(!shown.contains("s3cret") && !format!("{error:?}").contains("s3cret"));

    let bad = PgStore::connect("postgres://ana:s3cret@[::1/orders").await;
    let Err(StoreError::Io(message)) = bad else {
        panic!("a malformed URL is refused: {bad:?}");
    };
    assert!(!message.contains("s3cret"), "{message}");
    let bad_schema = PgStore::connect("postgres://127.0.0.1:1/db?schema=no-dashes").await;
    assert!(matches!(bad_schema, Err(StoreError::Io(m)) if m.contains("schema name")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_schema_is_refused_and_left_untouched() {
    let Some(url) = pg_testing::server("a_newer_schema_is_refused_and_left_untouched").await else {
        return;
    };
    let schema = Schema::new(&url, "newer");
    let store = schema.store().await;
    let run = create(&store, None).await.id();
    drop(store);
    schema
        .execute("UPDATE workflow_schema SET version = 99")
        .await
        .unwrap();
    let refused = PgStore::connect(&schema.url()).await;
    assert!(
        matches!(
            &refused,
            Err(StoreError::NewerSchema { found: 99, supported, path })
                if *supported == PgStore::SCHEMA_VERSION && path.contains(schema.name())
        ),
        "{refused:?}"
    );
    // Untouched: the version and the run are as they were. (Put the version back to read.)
    schema
        .execute(&format!(
            "DO $$ BEGIN
                IF (SELECT version FROM workflow_schema) <> 99 THEN
                    RAISE EXCEPTION 'the version changed';
                END IF;
             END $$;
             UPDATE workflow_schema SET version = {}",
            PgStore::SCHEMA_VERSION
        ))
        .await
        .expect("the version is still 99");
    let store = schema.store().await;
    assert!(store.load(run).await.unwrap().is_some());
    schema.drop().await;

    // A schema holding tables of our names that are not a store's is refused too.
    let foreign = Schema::new(&url, "foreign");
    foreign
        .execute(&format!(
            "CREATE SCHEMA {0}; CREATE TABLE {0}.runs (x int)",
            foreign.name()
        ))
        .await
        .unwrap();
    let refused = PgStore::connect(&foreign.url()).await;
    assert!(
        matches!(&refused, Err(StoreError::CorruptFile { reason, .. }) if reason.contains("runs")),
        "{refused:?}"
    );
    foreign.drop().await;
}

/// Kills every connection of a store's schema from the server side.
async fn drop_connections(schema: &Schema) {
    schema
        .execute(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = 'workflow:{}' AND pid <> pg_backend_pid()",
            schema.name()
        ))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_wake_other_stores_and_survive_a_reconnect() {
    let Some(url) =
        pg_testing::server("notifications_wake_other_stores_and_survive_a_reconnect").await
    else {
        return;
    };
    let schema = Schema::new(&url, "notify");
    let listening = schema.store().await;
    let writer = schema.store().await;
    let mut signal = listening.wake_signal().expect("the store listens");
    let run = create(&writer, None).await.id();
    let cancel = Message::Cancel { by: "ops".into() };
    // The listener may still be connecting: submit until a submission wakes this store.
    // The store itself never polls, so only a notification moves its signal.
    let mut woken = false;
    for attempt in 0..40 {
        signal.borrow_and_update();
        let key = format!("k{attempt}");
        writer
            .submit(run, &cancel, Some(&key), 2_000)
            .await
            .unwrap();
        if tokio::time::timeout(Duration::from_millis(500), signal.changed())
            .await
            .is_ok()
        {
            woken = true;
            break;
        }
    }
    assert!(woken, "a submission in another store wakes this one");

    // Every connection of the schema dies; the stores reconnect on their own.
    drop_connections(&schema).await;
    tokio::time::timeout(Duration::from_secs(10), signal.changed())
        .await
        .expect("the listener notices and listens again")
        .unwrap();
    let (pending, _) = listening.pending_inbox(0).await.expect("reads reconnect");
    assert_eq!(pending, [run]);
    let before = listening.inbox(run, 0).await.unwrap().len();
    drop_connections(&schema).await;
    signal.borrow_and_update();
    let second = writer
        .submit(run, &cancel, Some("again"), 2_001)
        .await
        .expect("writes reconnect");
    assert!(second.id() > 0);
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            signal.changed().await.unwrap();
            let inbox = listening.inbox(run, 0).await.unwrap();
            if inbox.len() == before + 1 {
                return;
            }
        }
    })
    .await
    .expect("the new message is seen");
    schema.drop().await;
}

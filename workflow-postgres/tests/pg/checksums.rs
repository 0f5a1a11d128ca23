//! Checksums on PostgreSQL: a database of schema version 1 migrates with every row's
//! checksum computed once; every kind of row changed behind the store's back is reported
//! by its read and by `verify`, and never rewritten; ids of any size key their rows'
//! checksums.

use serde_json::json;
use workflow_core::journal::Event;
use workflow_core::store::{
    Commit, DeadLetter, DeadLetterChange, Message, RunFilter, RunStatus, Store, StoreError,
};
use workflow_core::ErrorKind;
use workflow_core::RunId;
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

use super::{create, started};

fn attempt(step: usize, at: u64) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at,
    }
}

fn letter(run: RunId) -> DeadLetter {
    DeadLetter {
        run,
        workflow: "onboard".to_owned(),
        step: "send".to_owned(),
        attempts: 3,
        kind: ErrorKind::Unavailable,
        message: "smtp down".to_owned(),
        trace_id: "t".to_owned(),
        at: 5_000,
    }
}

fn sql_text(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_database_migrates_with_every_checksum_computed() {
    let Some(url) = pg_testing::server("a_version_1_database_migrates").await else {
        return;
    };
    let schema = Schema::new(&url, "v1");
    schema.create_at_version(1).await;
    // What version 1 of the library wrote: a failed run with a dead letter, a running run
    // with a message in its inbox, a spec.
    let first = serde_json::to_string(&started(1_000)).unwrap();
    let second = serde_json::to_string(&attempt(0, 1_100)).unwrap();
    let cancel = serde_json::to_string(&Message::Cancel { by: "ops".into() }).unwrap();
    schema
        .execute(&format!(
            "SELECT workflow_create('onboard', 'fp1', 'k1', ARRAY[{first}], NULL, NULL, 0,
                                    NULL, NULL, 1000, 'n1', 'c');
             SELECT workflow_create('onboard', 'fp1', NULL, ARRAY[{first}], NULL, NULL, 0,
                                    NULL, NULL, 1000, 'n2', 'c');
             SELECT workflow_commit(1, 1, ARRAY[{second}], ARRAY[NULL::bigint], NULL, 0,
                                    'failed', 'boom', 1::smallint, 'onboard', 'send', 3,
                                    'unavailable', 'smtp down', 't', 5000, NULL, 1100, 'c');
             SELECT workflow_submit(2, {cancel}, 'k', 1200, 'c');
             INSERT INTO specs VALUES ('fp1', 'onboard', '{{\"v\":1}}', 1000, 1000);",
            first = sql_text(&first),
            second = sql_text(&second),
            cancel = sql_text(&cancel),
        ))
        .await
        .unwrap();

    let store = schema.store().await;
    let verification = store.verify().await.unwrap();
    assert!(verification.is_clean(), "{verification:?}");
    assert_eq!(
        verification.rows,
        2 + 3 + 1 + 1 + 1,
        "runs, entries, inbox, letter, spec"
    );
    let failed = store.load(RunId(1)).await.unwrap().expect("run 1");
    assert_eq!(failed.record.status, RunStatus::Failed);
    assert_eq!(failed.events, [started(1_000), attempt(0, 1_100)]);
    assert_eq!(store.dead_letters().await.unwrap(), [letter(RunId(1))]);
    assert_eq!(store.inbox(RunId(2), 0).await.unwrap().len(), 1);
    assert_eq!(
        store.spec("fp1").await.unwrap().as_deref(),
        Some("{\"v\":1}")
    );
    // The new version writes on: a commit to the migrated run checks out.
    store
        .commit(Commit::events(RunId(2), 1, &[attempt(0, 1_300)], 1_300))
        .await
        .unwrap();
    assert!(store.verify().await.unwrap().is_clean());
    drop(store);
    let reopened = PgStore::connect(&schema.url()).await.unwrap();
    assert_eq!(
        reopened.load(RunId(2)).await.unwrap().unwrap().events.len(),
        2
    );
    drop(reopened);
    // A writer of version 1 cannot add a row without a checksum.
    let old_writer = schema
        .execute("INSERT INTO specs VALUES ('fp2', 'onboard', '{}', 1, 1)")
        .await;
    assert!(old_writer.is_err(), "the checksum column has no default");
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_damaged_row_is_reported_and_left_as_it_is() {
    let Some(url) = pg_testing::server("every_kind_of_damaged_row_is_reported").await else {
        return;
    };
    let schema = Schema::new(&url, "damage");
    let store = schema.store().await;
    let run = create(&store, Some("k1")).await.id();
    let letter = letter(run);
    store
        .commit(Commit {
            status: Some((RunStatus::Failed, Some("boom"))),
            dead_letter: DeadLetterChange::Put(&letter),
            ..Commit::events(run, 1, &[attempt(0, 1_100), attempt(1, 1_200)], 1_100)
        })
        .await
        .unwrap();
    let other = create(&store, None).await.id();
    store
        .commit(Commit::events(
            other,
            1,
            &[attempt(0, 1_100), attempt(1, 1_150)],
            1_100,
        ))
        .await
        .unwrap();
    let cancel = Message::Cancel { by: "ops".into() };
    let message = store
        .submit(other, &cancel, None, 1_200)
        .await
        .unwrap()
        .id();
    store.put_spec("fp1", "onboard", "{}", 1_300).await.unwrap();
    assert!(store.verify().await.unwrap().is_clean());

    // The lease columns are not covered (claims rewrite them in bulk): still intact.
    schema
        .execute(&format!(
            "UPDATE runs SET owner = 'someone' WHERE id = {}",
            other.0
        ))
        .await
        .unwrap();
    assert!(store.verify().await.unwrap().is_clean());

    let row = |table: &str, key: String| StoreError::CorruptRow {
        table: table.to_owned(),
        key,
    };
    schema
        .execute(&format!(
            "UPDATE runs SET note = 'fine' WHERE id = {run};
             UPDATE dead_letters SET message = 'all good' WHERE run_id = {run};
             UPDATE inbox SET at = 1 WHERE id = {message};
             UPDATE specs SET spec = '{{\"v\":2}}' WHERE fingerprint = 'fp1';
             DELETE FROM journal WHERE run_id = {other} AND seq = 1;",
            run = run.0,
            other = other.0
        ))
        .await
        .unwrap();
    assert_eq!(
        store.load(run).await.unwrap_err(),
        row("runs", run.to_string())
    );
    assert_eq!(
        store.runs(RunFilter::default()).await.unwrap_err(),
        row("runs", run.to_string())
    );
    assert_eq!(
        store.dead_letters().await.unwrap_err(),
        row("dead_letters", run.to_string())
    );
    assert_eq!(
        store.inbox(other, 0).await.unwrap_err(),
        row("inbox", message.to_string())
    );
    assert_eq!(
        store.spec("fp1").await.unwrap_err(),
        row("specs", "fp1".into())
    );
    assert_eq!(
        store.specs("onboard").await.unwrap_err(),
        row("specs", "fp1".into())
    );
    assert_eq!(
        store.load(other).await.unwrap_err(),
        StoreError::Corrupt { run: other, seq: 1 },
        "a gap in the journal"
    );
    // A write that would change the damaged run's row is refused, not re-checksummed.
    let retried = store
        .commit(Commit {
            status: Some((RunStatus::Running, None)),
            dead_letter: DeadLetterChange::Remove,
            ..Commit::events(run, 3, &[], 2_000)
        })
        .await;
    assert_eq!(retried.unwrap_err(), row("runs", run.to_string()));

    let verification = store.verify().await.unwrap();
    let mut found: Vec<(String, String, String)> = verification
        .damaged
        .iter()
        .map(|d| (d.table.clone(), d.key.clone(), d.reason.clone()))
        .collect();
    found.sort();
    let mismatch = "its checksum does not match its contents".to_owned();
    let mut expected = vec![
        ("dead_letters".into(), run.to_string(), mismatch.clone()),
        ("inbox".into(), message.to_string(), mismatch.clone()),
        (
            "journal".into(),
            format!("{other}/1"),
            "missing from the journal".into(),
        ),
        ("runs".into(), run.to_string(), mismatch.clone()),
        (
            "runs".into(),
            other.to_string(),
            "its row says the journal has at least 3 entries; the journal holds 2".into(),
        ),
        ("specs".into(), "fp1".into(), mismatch),
    ];
    expected.sort();
    assert_eq!(found, expected, "{verification:?}");
    // Nothing was rewritten: the same damage is there to be found again.
    assert_eq!(store.verify().await.unwrap(), verification);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_of_any_size_key_their_checksums() {
    let Some(url) = pg_testing::server("ids_of_any_size_key_their_checksums").await else {
        return;
    };
    let schema = Schema::new(&url, "ids");
    let store = schema.store().await;
    schema
        .execute(
            "ALTER TABLE runs ALTER COLUMN id RESTART WITH 6148914691236517205;
             ALTER TABLE inbox ALTER COLUMN id RESTART WITH 9223372036854775000;",
        )
        .await
        .unwrap();
    let run = create(&store, Some("big")).await.id();
    assert_eq!(run, RunId(6_148_914_691_236_517_205));
    let event = Message::Event {
        step: "paid".into(),
        event_id: "e1".into(),
        payload: json!({ "amount": 12 }),
    };
    let id = store
        .submit(run, &event, Some("e1"), 1_100)
        .await
        .unwrap()
        .id();
    assert_eq!(id, 9_223_372_036_854_775_000);
    assert_eq!(
        store.load(run).await.unwrap().unwrap().events,
        [started(1_000)]
    );
    assert_eq!(store.inbox(run, 0).await.unwrap()[0].message, event);
    assert!(store.verify().await.unwrap().is_clean());
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rows_new_checksum_is_written_only_over_the_row_it_was_computed_from() {
    let Some(url) = pg_testing::server("a_rows_new_checksum_is_written_only_over").await else {
        return;
    };
    let schema = Schema::new(&url, "stale");
    let (a, b) = (schema.store().await, schema.store().await);
    let status = |run, status, at| Commit {
        status: Some((status, None)),
        ..Commit::events(run, 1, &[], at)
    };

    // A run's end, by the store that created it: one statement.
    let run = create(&a, None).await.id();
    let before = a.round_trips();
    a.commit(status(run, RunStatus::Parked, 2_000))
        .await
        .unwrap();
    assert_eq!(
        a.round_trips() - before,
        1,
        "computed from the row it wrote"
    );
    // A store that never saw the run reads its row first.
    let before = b.round_trips();
    b.commit(status(run, RunStatus::Running, 2_100))
        .await
        .unwrap();
    assert_eq!(b.round_trips() - before, 2, "read, then written");

    // Another store changes a row this one saw: its checksum computed from the old row is
    // refused, the row read again, the commit made once.
    let other = create(&a, None).await.id();
    b.commit(Commit {
        inbox_cursor: Some(5),
        ..Commit::events(other, 1, &[], 2_200)
    })
    .await
    .unwrap();
    let before = a.round_trips();
    a.commit(status(other, RunStatus::Completed, 2_300))
        .await
        .unwrap();
    assert_eq!(a.round_trips() - before, 3, "refused, read, written");
    let record = a.load(other).await.unwrap().unwrap().record;
    assert_eq!(
        (record.status, record.updated_at),
        (RunStatus::Completed, 2_300)
    );
    assert!(a.verify().await.unwrap().is_clean());
    schema.drop().await;
}

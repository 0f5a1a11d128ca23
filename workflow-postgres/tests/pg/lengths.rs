//! A journal's length is the journal's: a step's commit by the run's owner writes no run
//! row, and the row's `journal_len` (a lower bound, written with the row and by lease
//! renewals) finds entries lost from a journal's end at the next renewal, status change,
//! load or check.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Row};
use workflow_core::journal::Event;
use workflow_core::store::{Commit, Fence, RunStatus, Store, StoreError};
use workflow_core::RunId;
use workflow_postgres::testing::{self as pg_testing, Schema};

use super::{claim_all, claimant, create, wall_clock};

fn attempt(step: usize) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at: 2_000,
    }
}

/// The run's `journal_len` as its row holds it.
async fn row_length(schema: &Schema, url: &str, run: RunId) -> i64 {
    let mut conn = PgConnectOptions::from_str(url)
        .unwrap()
        .options([("search_path", schema.name())])
        .connect()
        .await
        .unwrap();
    let row = sqlx::query("SELECT journal_len FROM runs WHERE id = $1")
        .bind(run.0 as i64)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let _ = conn.close().await;
    row.try_get(0).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_tail_is_found_at_the_next_renewal_status_change_load_and_check() {
    let Some(url) = pg_testing::server("a_lost_tail_is_found_at_the_next_renewal").await else {
        return;
    };
    let schema = Schema::new(&url, "lengths");
    let store = schema.store().await;
    let run = create(&store, None).await.id();
    let lease = store
        .claim(claim_all(claimant("a", 60_000, wall_clock()), None))
        .await
        .unwrap();
    let fence = Fence {
        owner: "a",
        token: lease[0].token,
    };
    for seq in 1..5 {
        store
            .commit(Commit {
                fence: Some(fence),
                ..Commit::events(run, seq, &[attempt(seq as usize)], 2_000)
            })
            .await
            .unwrap();
    }
    assert_eq!(
        row_length(&schema, &url, run).await,
        1,
        "the owner's steps wrote no run row"
    );
    assert_eq!(
        store
            .renew(claimant("a", 60_000, wall_clock()))
            .await
            .unwrap(),
        [run]
    );
    assert_eq!(
        row_length(&schema, &url, run).await,
        5,
        "a renewal records the length"
    );

    // Entries after the last write of the row are the journal's alone: losing one goes
    // unnoticed until the owner's next commit finds the journal shorter than it knows.
    store
        .commit(Commit {
            fence: Some(fence),
            ..Commit::events(run, 5, &[attempt(5)], 2_000)
        })
        .await
        .unwrap();
    schema
        .execute(&format!(
            "DELETE FROM journal WHERE run_id = {} AND seq = 5",
            run.0
        ))
        .await
        .unwrap();
    assert_eq!(store.load(run).await.unwrap().unwrap().events.len(), 5);
    assert!(store.verify().await.unwrap().is_clean());
    assert_eq!(
        store
            .commit(Commit {
                fence: Some(fence),
                ..Commit::events(run, 6, &[attempt(6)], 2_000)
            })
            .await,
        Err(StoreError::Conflict { run, seq: 6 }),
        "the owner's next commit"
    );

    // Below the recorded length, a loss is damage wherever it is looked at.
    schema
        .execute(&format!(
            "DELETE FROM journal WHERE run_id = {} AND seq = 4",
            run.0
        ))
        .await
        .unwrap();
    assert_eq!(
        store.load(run).await.unwrap_err(),
        StoreError::Corrupt { run, seq: 4 },
        "a load"
    );
    let verification = store.verify().await.unwrap();
    assert!(
        verification.damaged.iter().any(|d| d.run == Some(run)
            && d.reason == "its row says the journal has at least 5 entries; the journal holds 4"),
        "a check: {verification:?}"
    );
    assert_eq!(
        store
            .commit(Commit {
                fence: Some(fence),
                ..Commit {
                    status: Some((RunStatus::Completed, None)),
                    ..Commit::events(run, 4, &[], 2_000)
                }
            })
            .await,
        Err(StoreError::Corrupt { run, seq: 4 }),
        "a status change at the journal's length"
    );
    assert_eq!(
        store
            .renew(claimant("a", 60_000, wall_clock()))
            .await
            .unwrap(),
        Vec::<RunId>::new(),
        "a renewal: the run's lease is not renewed"
    );
    assert_eq!(
        row_length(&schema, &url, run).await,
        5,
        "nothing was rewritten"
    );
    schema.drop().await;
}

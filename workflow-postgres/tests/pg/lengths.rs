//! A journal's length is the journal's: a step's commit by the run's owner writes no run
//! row, and the row's `journal_len` (a lower bound, written with the row and by lease
//! renewals) finds entries lost from a journal's end at the next renewal, status change,
//! load or check.

use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Row};
use workflow_core::journal::Event;
use workflow_core::store::{Claim, Claimable, Commit, Fence, RunStatus, Store, StoreError};
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

/// The first column of the first row `sql` reads in the schema.
async fn one(schema: &Schema, url: &str, sql: &str) -> i64 {
    let mut conn = PgConnectOptions::from_str(url)
        .unwrap()
        .options([("search_path", schema.name())])
        .connect()
        .await
        .unwrap();
    let row = sqlx::query(sql).fetch_one(&mut conn).await.unwrap();
    let _ = conn.close().await;
    row.try_get(0).unwrap()
}

/// The run's `journal_len` as its row holds it.
async fn row_length(schema: &Schema, url: &str, run: RunId) -> i64 {
    let sql = format!("SELECT journal_len FROM runs WHERE id = {}", run.0);
    one(schema, url, &sql).await
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_before_lazy_lengths_opens_and_goes_on() {
    let Some(url) = pg_testing::server("a_store_from_before_lazy_lengths").await else {
        return;
    };
    let schema = Schema::new(&url, "lengths_before");
    let store = schema.store().await;
    let queued = create(&store, None).await.id();
    let begun = create(&store, None).await.id();
    let owned = create(&store, None).await.id();
    let now = wall_clock();
    let b = store
        .claim(claim_all(claimant("b", 60_000, now), Some(begun)))
        .await
        .unwrap();
    let a = store
        .claim(claim_all(claimant("a", 60_000, now), Some(owned)))
        .await
        .unwrap();
    for (run, token, owner, steps) in [(begun, b[0].token, "b", 3), (owned, a[0].token, "a", 4)] {
        for seq in 1..steps {
            store
                .commit(Commit {
                    fence: Some(Fence { owner, token }),
                    ..Commit::events(run, seq, &[attempt(seq as usize)], 2_000)
                })
                .await
                .unwrap();
        }
    }
    store.release("b", None).await.unwrap();
    drop(store);
    // As the previous version left a database: every row's length exact (each commit
    // wrote it), no index of begun runs nobody owns, the functions of revision 2.
    let version = one(&schema, &url, "SELECT version::bigint FROM workflow_schema").await;
    schema
        .execute(&format!(
            "UPDATE runs SET journal_len = (SELECT count(*) FROM journal WHERE run_id = runs.id);
             DROP INDEX runs_idle_begun;
             DROP FUNCTION workflow_renew(text, bigint);
             DELETE FROM workflow_functions WHERE name = 'workflow_renew';
             UPDATE workflow_functions SET checksum = 0 WHERE name = 'workflow_commit';
             UPDATE workflow_schema SET version = {}, functions = 2;",
            version - 1
        ))
        .await
        .unwrap();

    let store = schema.store().await;
    assert_eq!(
        one(&schema, &url, "SELECT version::bigint FROM workflow_schema").await,
        version
    );
    let fence = Fence {
        owner: "a",
        token: a[0].token,
    };
    store
        .commit(Commit {
            fence: Some(fence),
            ..Commit::events(owned, 4, &[attempt(4)], 2_000)
        })
        .await
        .expect("the owner's next step");
    store
        .commit(Commit {
            fence: Some(fence),
            status: Some((RunStatus::Completed, None)),
            ..Commit::events(owned, 5, &[], 2_000)
        })
        .await
        .expect("the owner's status change");
    let stored = store.load(owned).await.unwrap().unwrap();
    assert_eq!(stored.record.status, RunStatus::Completed);
    assert_eq!(stored.events.len(), 5);
    assert_eq!(row_length(&schema, &url, owned).await, 5);
    let now = wall_clock();
    let taken = store
        .claim(Claim {
            claimable: Claimable::Begun,
            ..claim_all(claimant("c", 60_000, now), None)
        })
        .await
        .unwrap();
    assert_eq!(taken.iter().map(|l| l.run).collect::<Vec<_>>(), [begun]);
    let taken = store
        .claim(Claim {
            claimable: Claimable::Queued,
            ..claim_all(claimant("c", 60_000, now), None)
        })
        .await
        .unwrap();
    assert_eq!(taken.iter().map(|l| l.run).collect::<Vec<_>>(), [queued]);
    assert!(store.verify().await.unwrap().is_clean());
    schema.drop().await;
}

/// A takeover racing the old owner's steps: the old owner's commits are either in the
/// journal before the claim (the claim waits for a commit holding the row's share lock)
/// or refused whole after it, never written behind the new owner's back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_racing_the_old_owners_steps_never_lets_one_in_after_it() {
    let Some(url) = pg_testing::server("a_takeover_racing_the_old_owners_steps").await else {
        return;
    };
    let schema = Schema::new(&url, "lengths_race");
    let store = std::sync::Arc::new(schema.store().await);
    for round in 0..20 {
        let run = create(&*store, None).await.id();
        // A lease of 1 ms: lapsed at once, still `a`'s until somebody claims it.
        let a = store
            .claim(claim_all(claimant("a", 1, wall_clock()), Some(run)))
            .await
            .unwrap();
        let fence_a = Fence {
            owner: "a",
            token: a[0].token,
        };
        let old = {
            let store = store.clone();
            tokio::spawn(async move {
                let mut seq = 1;
                loop {
                    let step = [attempt(1_000 + seq as usize)];
                    match store
                        .commit(Commit {
                            fence: Some(fence_a),
                            ..Commit::events(run, seq, &step, 2_000)
                        })
                        .await
                    {
                        Ok(()) => seq += 1,
                        Err(StoreError::Fenced { .. }) => return seq - 1,
                        Err(other) => panic!("round {round}: the old owner got {other}"),
                    }
                }
            })
        };
        // Let the old owner write a few steps (a varying number) before the takeover.
        while (store.load(run).await.unwrap().unwrap().events.len() as u64) < 2 + round % 5 {
            tokio::task::yield_now().await;
        }
        let b = loop {
            let taken = store
                .claim(claim_all(claimant("b", 60_000, wall_clock()), Some(run)))
                .await
                .unwrap();
            if let Some(lease) = taken.first() {
                break *lease;
            }
        };
        let length = store.load(run).await.unwrap().unwrap().events.len() as u64;
        store
            .commit(Commit {
                fence: Some(Fence {
                    owner: "b",
                    token: b.token,
                }),
                ..Commit::events(run, length, &[attempt(9_999)], 2_000)
            })
            .await
            .unwrap_or_else(|e| panic!("round {round}: the new owner's first step: {e}"));
        let written = old.await.unwrap();
        let events = store.load(run).await.unwrap().unwrap().events;
        assert_eq!(
            events.len() as u64,
            written + 2,
            "round {round}: the start, the old owner's accepted steps, the new owner's"
        );
        assert_eq!(events.last(), Some(&attempt(9_999)), "round {round}");
    }
    schema.drop().await;
}

//! Group commit: commits of different runs ready together share a transaction, and each
//! run is still checked alone inside it.

use workflow_core::journal::Event;
use workflow_core::store::{Commit, Fence, Store, StoreError};
use workflow_postgres::testing::{self as pg_testing, Schema};

use super::{claim_all, claimant, create};

fn attempt(step: usize) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at: 2_000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_or_conflicting_commit_fails_alone_inside_its_group() {
    let Some(url) =
        pg_testing::server("a_fenced_or_conflicting_commit_fails_alone_inside_its_group").await
    else {
        return;
    };
    let schema = Schema::new(&url, "group");
    // Four connections: one group on its way at a time, so commits sent together queue
    // behind the first and go as one group.
    let store = schema.store().await;
    let mut runs = Vec::new();
    for _ in 0..12 {
        runs.push(create(&store, None).await.id());
    }
    let leases = store
        .claim(claim_all(claimant("a", 60_000, 0), None))
        .await
        .unwrap();
    assert_eq!(leases.len(), runs.len());
    let events = [attempt(0)];
    let before = store.commits();
    let commits = leases.iter().enumerate().map(|(i, lease)| {
        let fence = Fence {
            // Run 3 is written under a fence that is not its owner's; run 7 at a length
            // its journal does not have.
            owner: if i == 3 { "b" } else { "a" },
            token: lease.token,
        };
        let seq = if i == 7 { 5 } else { 1 };
        let store = &store;
        let events = &events;
        async move {
            store
                .commit(Commit {
                    fence: Some(fence),
                    ..Commit::events(lease.run, seq, events, 2_000)
                })
                .await
        }
    });
    let outcomes = futures_util::future::join_all(commits).await;
    for (i, (lease, outcome)) in leases.iter().zip(&outcomes).enumerate() {
        let expected = match i {
            3 => Err(StoreError::Fenced {
                run: lease.run,
                owner: "b".into(),
            }),
            7 => Err(StoreError::Conflict {
                run: lease.run,
                seq: 5,
            }),
            _ => Ok(()),
        };
        assert_eq!(outcome, &expected, "the commit to run {i}");
        let stored = store.load(lease.run).await.unwrap().unwrap();
        let len = if matches!(i, 3 | 7) { 1 } else { 2 };
        assert_eq!(stored.events.len(), len, "run {i}'s journal");
    }
    let transactions = store.commits() - before;
    assert!(
        transactions < 10,
        "ten commits written in {transactions} transactions: they went in groups"
    );
    drop(store);
    schema.drop().await;
}

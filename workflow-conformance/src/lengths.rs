//! A journal's length is the journal's: a commit is placed by the entries already there
//! (never at a taken position, never after a gap), refused whole when its fence is stale,
//! and a status change is checked against every entry before it, not against what the
//! run's row last recorded.

use super::*;

/// A run created claimed by `owner`, then claimed again by it: the lease's first token is
/// stale, the second current.
async fn reclaimed(store: &dyn Store, owner: &str) -> (RunId, u64, u64) {
    let events = [started("onboard", 1_000)];
    let created = store
        .create_run(NewRun {
            owner: Some(claimant(owner, 60_000)),
            ..new_run("onboard", None, &events)
        })
        .await
        .expect("create");
    let Created::New { run, token } = created else {
        panic!("a new run was expected");
    };
    let again = store
        .claim(Claim {
            run: Some(run),
            reclaim_own: true,
            ..claim(claimant(owner, 60_000), &["onboard"])
        })
        .await
        .expect("claim again");
    assert_eq!(again.len(), 1, "the owner claims its run again: {again:?}");
    assert!(again[0].token > token, "a claim moves the token on");
    (run, token, again[0].token)
}

pub(super) async fn a_stale_tokens_commit_is_refused_whole(store: Arc<dyn Store>) {
    let (run, stale, current) = reclaimed(&*store, "a").await;
    let steps = [attempt(0, 1_100), attempt(1, 1_101), attempt(2, 1_102)];
    let refused = store
        .commit(Commit {
            fence: Some(Fence {
                owner: "a",
                token: stale,
            }),
            ..Commit::events(run, 1, &steps, 1_100)
        })
        .await;
    assert_eq!(
        refused,
        Err(StoreError::Fenced {
            run,
            owner: "a".to_owned()
        }),
        "the same owner under an older token is fenced"
    );
    assert_eq!(
        events_of(&*store, run).await.len(),
        1,
        "none of the refused entries was written"
    );
    // The position the refused commit asked for is free: the current token takes it.
    let mine = [attempt(0, 1_200)];
    store
        .commit(Commit {
            fence: Some(Fence {
                owner: "a",
                token: current,
            }),
            ..Commit::events(run, 1, &mine, 1_200)
        })
        .await
        .expect("the current token writes at the refused commit's position");
    let refused = store
        .commit(Commit {
            fence: Some(Fence {
                owner: "a",
                token: stale,
            }),
            ..Commit::events(run, 2, &steps, 1_300)
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Fenced { .. })),
        "still fenced at the right length: {refused:?}"
    );
    let events = events_of(&*store, run).await;
    assert_eq!(events.len(), 2);
    assert_eq!(events[1], mine[0]);
}

pub(super) async fn a_commit_after_a_gap_is_refused(store: Arc<dyn Store>) {
    let (run, _, token) = reclaimed(&*store, "a").await;
    let fence = Fence { owner: "a", token };
    let one = [attempt(0, 1_100)];
    for seq in [2, 5] {
        assert_eq!(
            store
                .commit(Commit {
                    fence: Some(fence),
                    ..Commit::events(run, seq, &one, 1_100)
                })
                .await,
            Err(StoreError::Conflict { run, seq }),
            "an entry at {seq} without the one before it"
        );
    }
    assert_eq!(events_of(&*store, run).await.len(), 1, "nothing written");
    for seq in 1..4 {
        store
            .commit(Commit {
                fence: Some(fence),
                ..Commit::events(run, seq, &[attempt(seq as usize, 1_100)], 1_100)
            })
            .await
            .expect("each step right after the last");
    }
    assert_eq!(
        store
            .commit(Commit {
                fence: Some(fence),
                ..Commit::events(run, 3, &one, 1_200)
            })
            .await,
        Err(StoreError::Conflict { run, seq: 3 }),
        "a taken position"
    );
    assert_eq!(events_of(&*store, run).await.len(), 4);
}

pub(super) async fn a_status_change_is_checked_against_the_journal(store: Arc<dyn Store>) {
    let (run, _, token) = reclaimed(&*store, "a").await;
    let fence = Fence { owner: "a", token };
    for seq in 1..6 {
        store
            .commit(Commit {
                fence: Some(fence),
                ..Commit::events(run, seq, &[attempt(seq as usize, 1_100)], 1_100)
            })
            .await
            .expect("a step");
    }
    // Every length the run had since its row was written is refused: the journal is 6
    // entries long, whatever the row recorded at the run's creation.
    for seq in [1, 3, 5, 7] {
        assert_eq!(
            store
                .commit(Commit {
                    fence: Some(fence),
                    ..with_status(run, seq, RunStatus::Completed, None)
                })
                .await,
            Err(StoreError::Conflict { run, seq }),
            "a status change at {seq}"
        );
    }
    let stored = store.load(run).await.expect("load").expect("run");
    assert_eq!(stored.record.status, RunStatus::Running);
    assert_eq!(stored.events.len(), 6);
    store
        .commit(Commit {
            fence: Some(fence),
            ..with_status(run, 6, RunStatus::Completed, None)
        })
        .await
        .expect("the status change at the journal's length");
    let stored = store.load(run).await.expect("load").expect("run");
    assert_eq!(stored.record.status, RunStatus::Completed);
    assert_eq!(stored.events.len(), 6);
    assert!(store.verify().await.expect("verify").is_clean());
}

pub(super) async fn a_released_run_is_begun(store: Arc<dyn Store>) {
    let (run, _, token) = reclaimed(&*store, "a").await;
    let fence = Fence { owner: "a", token };
    for seq in 1..4 {
        store
            .commit(Commit {
                fence: Some(fence),
                ..Commit::events(run, seq, &[attempt(seq as usize, 1_100)], 1_100)
            })
            .await
            .expect("a step");
    }
    let held = store.renew(claimant("a", 60_000)).await.expect("renew");
    assert_eq!(held, [run], "the lease is renewed");
    store
        .commit(Commit {
            fence: Some(fence),
            ..Commit::events(run, 4, &[attempt(4, 1_200)], 1_200)
        })
        .await
        .expect("a step after the renewal");
    store.release("a", None).await.expect("release");
    let queued = store
        .claim(Claim {
            claimable: Claimable::Queued,
            ..claim(claimant("b", 60_000), &["onboard"])
        })
        .await
        .expect("claim queued runs");
    assert!(
        queued.is_empty(),
        "a run with steps is not queued: {queued:?}"
    );
    let begun = store
        .claim(Claim {
            claimable: Claimable::Begun,
            ..claim(claimant("b", 60_000), &["onboard"])
        })
        .await
        .expect("claim begun runs");
    assert_eq!(begun.iter().map(|l| l.run).collect::<Vec<_>>(), [run]);
    let fence = Fence {
        owner: "b",
        token: begun[0].token,
    };
    store
        .commit(Commit {
            fence: Some(fence),
            ..Commit::events(run, 5, &[attempt(5, 1_300)], 1_300)
        })
        .await
        .expect("the next owner appends after every entry");
    assert_eq!(events_of(&*store, run).await.len(), 6);
    assert!(store.verify().await.expect("verify").is_clean());
}

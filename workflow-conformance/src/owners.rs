//! Owners: claims, lapsed leases and fencing, renewals and releases.

use super::*;

pub(super) async fn claims_honour_owners(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let other = create(&*store, "offboard", None).await.id();
    let done = create(&*store, "onboard", None).await.id();
    store
        .commit(with_status(done, 1, RunStatus::Completed, None))
        .await
        .expect("complete");
    let parked = create(&*store, "onboard", None).await.id();
    store
        .commit(with_status(
            parked,
            1,
            RunStatus::Parked,
            Some("spec changed"),
        ))
        .await
        .expect("park");

    let leases = store
        .claim(claim(claimant("a", 60_000), &["onboard"]))
        .await
        .expect("claim");
    assert_eq!(
        leases.len(),
        1,
        "only the running run of the workflow: {leases:?}"
    );
    assert_eq!(leases[0].run, run);
    let first = leases[0].token;
    assert!(first > 0);
    let record = store.load(run).await.expect("load").expect("run").record;
    assert_eq!(record.owner.as_deref(), Some("a"));

    let stolen = store
        .claim(claim(claimant("b", 60_000), &["onboard", "offboard"]))
        .await
        .expect("claim");
    assert_eq!(
        stolen.iter().map(|l| l.run).collect::<Vec<_>>(),
        [other],
        "a live lease is not taken"
    );
    let again = store
        .claim(claim(claimant("a", 60_000), &["onboard"]))
        .await
        .expect("claim");
    assert!(
        again.is_empty(),
        "own runs only with reclaim_own: {again:?}"
    );
    let reclaimed = store
        .claim(Claim {
            reclaim_own: true,
            ..claim(claimant("a", 60_000), &["onboard"])
        })
        .await
        .expect("reclaim");
    assert_eq!(reclaimed.len(), 1);
    assert!(reclaimed[0].token > first, "every claim moves the token on");
    let fresh = create(&*store, "onboard", None).await.id();
    let only = store
        .claim(Claim {
            run: Some(fresh),
            ..claim(claimant("c", 60_000), &["onboard"])
        })
        .await
        .expect("claim one");
    assert_eq!(only.iter().map(|l| l.run).collect::<Vec<_>>(), [fresh]);
    let none = store
        .claim(claim(claimant("d", 60_000), &[]))
        .await
        .expect("claim nothing");
    assert!(none.is_empty());
}

pub(super) async fn lapsed_leases_are_taken_over(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let a = store
        .claim(claim(claimant("a", 1), &["onboard"]))
        .await
        .expect("claim")[0];
    let events = [attempt(0, 1_100)];
    let fence_a = Fence {
        owner: "a",
        token: a.token,
    };
    store
        .commit(Commit {
            fence: Some(fence_a),
            ..Commit::events(run, 1, &events, 1_100)
        })
        .await
        .expect("the owner writes");
    tokio::time::sleep(Duration::from_millis(30)).await;
    let b = store
        .claim(claim(claimant("b", 60_000), &["onboard"]))
        .await
        .expect("claim");
    assert_eq!(b.len(), 1, "the lapsed lease is taken over");
    assert!(b[0].token > a.token);
    let late = [attempt(1, 1_200)];
    assert_eq!(
        store
            .commit(Commit {
                fence: Some(fence_a),
                ..Commit::events(run, 2, &late, 1_200)
            })
            .await,
        Err(StoreError::Fenced {
            run,
            owner: "a".to_owned()
        })
    );
    assert_eq!(events_of(&*store, run).await.len(), 2, "nothing from a");
    store
        .commit(Commit {
            fence: Some(Fence {
                owner: "b",
                token: b[0].token,
            }),
            ..Commit::events(run, 2, &late, 1_200)
        })
        .await
        .expect("the new owner writes");
}

pub(super) async fn renew_and_release(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let mine = create(&*store, "onboard", None).await.id();
    store
        .claim(claim(claimant("a", 1), &["onboard"]))
        .await
        .expect("claim");
    let held = store.renew(claimant("a", 60_000)).await.expect("renew");
    let mut held_sorted = held.clone();
    held_sorted.sort_unstable();
    assert_eq!(held_sorted, [run, mine]);
    tokio::time::sleep(Duration::from_millis(30)).await;
    let taken = store
        .claim(claim(claimant("b", 60_000), &["onboard"]))
        .await
        .expect("claim");
    assert!(taken.is_empty(), "renewed leases hold: {taken:?}");
    store.release("a", Some(&[run])).await.expect("release one");
    let taken = store
        .claim(claim(claimant("b", 60_000), &["onboard"]))
        .await
        .expect("claim");
    assert_eq!(taken.iter().map(|l| l.run).collect::<Vec<_>>(), [run]);
    // A release by an owner that no longer holds the run (a stale one, after another
    // claimed it) changes nothing: the new owner keeps it, as a fenced commit is refused.
    store
        .release("a", Some(&[run]))
        .await
        .expect("a stale release is no error");
    let record = store.load(run).await.expect("load").expect("run").record;
    assert_eq!(record.owner.as_deref(), Some("b"));
    store.release("a", None).await.expect("release all");
    let record = store.load(mine).await.expect("load").expect("run").record;
    assert_eq!(record.owner, None);
    assert_eq!(
        store.renew(claimant("a", 60_000)).await.expect("renew"),
        Vec::<RunId>::new()
    );
}

pub(super) async fn created_claimed(store: Arc<dyn Store>) {
    let events = [started("onboard", 1_000)];
    let created = store
        .create_run(NewRun {
            owner: Some(claimant("a", 60_000)),
            ..new_run("onboard", None, &events)
        })
        .await
        .expect("create");
    let Created::New { run, token } = created else {
        panic!("a new run was expected");
    };
    assert!(token > 0);
    let record = store.load(run).await.expect("load").expect("run").record;
    assert_eq!(record.owner.as_deref(), Some("a"));
    let taken = store
        .claim(claim(claimant("b", 60_000), &["onboard"]))
        .await
        .expect("claim");
    assert!(taken.is_empty());
    let next = [attempt(0, 1_001)];
    store
        .commit(Commit {
            fence: Some(Fence { owner: "a", token }),
            ..Commit::events(run, 1, &next, 1_001)
        })
        .await
        .expect("the creator writes");
    assert_eq!(
        store
            .commit(Commit {
                fence: Some(Fence {
                    owner: "a",
                    token: token + 1
                }),
                ..Commit::events(run, 2, &next, 1_002)
            })
            .await,
        Err(StoreError::Fenced {
            run,
            owner: "a".to_owned()
        }),
        "a token the run never gave out"
    );
}

pub(super) async fn finishing_releases(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let lease = store
        .claim(claim(claimant("a", 60_000), &["onboard"]))
        .await
        .expect("claim")[0];
    store
        .commit(Commit {
            fence: Some(Fence {
                owner: "a",
                token: lease.token,
            }),
            ..with_status(run, 1, RunStatus::Completed, None)
        })
        .await
        .expect("finish");
    let record = store.load(run).await.expect("load").expect("run").record;
    assert_eq!(record.status, RunStatus::Completed);
    assert_eq!(record.owner, None, "a finished run has no owner");
    let taken = store
        .claim(Claim {
            reclaim_own: true,
            ..claim(claimant("a", 60_000), &["onboard"])
        })
        .await
        .expect("claim");
    assert!(taken.is_empty(), "finished runs are never claimed");
}

pub(super) async fn claims_by_ownership(store: Arc<dyn Store>) {
    let lapsed = create(&*store, "onboard", None).await.id();
    store
        .claim(Claim {
            run: Some(lapsed),
            ..claim(claimant("a", 1), &["onboard"])
        })
        .await
        .expect("claim");
    let begun = create(&*store, "onboard", None).await.id();
    let events = [attempt(0, 1_100)];
    store
        .commit(Commit::events(begun, 1, &events, 1_100))
        .await
        .expect("an operator's write");
    let first = create(&*store, "onboard", None).await.id();
    let second = create(&*store, "onboard", None).await.id();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let queued = store
        .claim(Claim {
            claimable: Claimable::Queued,
            limit: Some(1),
            ..claim(claimant("b", 60_000), &["onboard"])
        })
        .await
        .expect("claim unowned");
    assert_eq!(
        queued.iter().map(|l| l.run).collect::<Vec<_>>(),
        [first],
        "queued runs only (nobody's, nothing after the start), the oldest first"
    );
    let taken = store
        .claim(Claim {
            claimable: Claimable::Begun,
            ..claim(claimant("c", 60_000), &["onboard"])
        })
        .await
        .expect("claim begun runs");
    assert_eq!(
        taken.iter().map(|l| l.run).collect::<Vec<_>>(),
        [lapsed, begun],
        "lapsed leases and begun runs nobody owns, never a queued run"
    );
    let rest = store
        .claim(Claim {
            claimable: Claimable::Queued,
            ..claim(claimant("c", 60_000), &["onboard"])
        })
        .await
        .expect("claim the rest");
    assert_eq!(rest.iter().map(|l| l.run).collect::<Vec<_>>(), [second]);
    let other = create(&*store, "onboard", None).await.id();
    let wrong_version = store
        .claim(Claim {
            claimable: Claimable::Queued,
            versions: Some(&["fp2"]),
            ..claim(claimant("c", 60_000), &["onboard"])
        })
        .await
        .expect("claim another version");
    assert!(wrong_version.is_empty(), "only the versions asked for");
    let right_version = store
        .claim(Claim {
            claimable: Claimable::Queued,
            versions: Some(&["fp2", "fp1"]),
            ..claim(claimant("c", 60_000), &["onboard"])
        })
        .await
        .expect("claim this version");
    assert_eq!(
        right_version.iter().map(|l| l.run).collect::<Vec<_>>(),
        [other]
    );
}

//! Runs and journals: creation, idempotency keys, commits at the expected length,
//! statuses and dead letters, listing, restarts of parked runs, every event kind.

use super::*;

pub(super) async fn created_runs_load_back(store: Arc<dyn Store>) {
    let events = [started("onboard", 1_000), attempt(0, 1_001)];
    let created = store
        .create_run(NewRun {
            parent: Some(RunId(77)),
            ..new_run("onboard", Some("evt-1"), &events)
        })
        .await
        .expect("create");
    let Created::New { run, token } = created else {
        panic!("a new run was expected, got {created:?}");
    };
    assert_eq!(token, 0, "an unowned run has no token yet");
    let stored = store.load(run).await.expect("load").expect("exists");
    assert_eq!(stored.events, events);
    let record = stored.record;
    assert_eq!(record.id, run);
    assert_eq!(record.workflow, "onboard");
    assert_eq!(record.fingerprint, "fp1");
    assert_eq!(record.status, RunStatus::Running);
    assert_eq!(record.idempotency_key.as_deref(), Some("evt-1"));
    assert_eq!(record.parent, Some(RunId(77)));
    assert_eq!(record.owner, None);
    assert_eq!(record.note, None);
    assert_eq!(record.created_at, 1_000);
    assert_eq!(store.load(RunId(run.0 + 1000)).await, Ok(None));
}

pub(super) async fn several_runs_load_at_once(store: Arc<dyn Store>) {
    let a = create(&*store, "onboard", None).await.id();
    let b = create(&*store, "onboard", None).await.id();
    let c = create(&*store, "other", None).await.id();
    let more = [attempt(0, 1_100), attempt(1, 1_200)];
    store
        .commit(Commit::events(b, 1, &more, 1_100))
        .await
        .expect("append");
    store
        .commit(with_status(c, 1, RunStatus::Completed, None))
        .await
        .expect("finish");
    let missing = RunId(a.0.max(b.0).max(c.0) + 1_000);
    let loaded = store
        .load_many(&[c, missing, b, a, b])
        .await
        .expect("load many");
    let mut one_by_one = Vec::new();
    for run in [c, b, a] {
        one_by_one.push(store.load(run).await.expect("load").expect("exists"));
    }
    assert_eq!(
        loaded, one_by_one,
        "in the order asked, each as `load` reads it, without the missing run or repeats"
    );
    assert_eq!(loaded[1].events.len(), 3, "the whole journal");
    assert_eq!(loaded[0].record.status, RunStatus::Completed);
    assert_eq!(store.load_many(&[]).await, Ok(Vec::new()));
    assert_eq!(store.load_many(&[missing]).await, Ok(Vec::new()));
}

pub(super) async fn idempotency_keys(store: Arc<dyn Store>) {
    let first = create(&*store, "onboard", Some("evt-1")).await;
    let again = create(&*store, "onboard", Some("evt-1")).await;
    assert!(matches!(first, Created::New { .. }));
    assert_eq!(again, Created::Existing(first.id()));
    assert_eq!(
        events_of(&*store, first.id()).await.len(),
        1,
        "nothing added"
    );
    let other = create(&*store, "offboard", Some("evt-1")).await;
    assert!(
        matches!(other, Created::New { .. }),
        "keys are per workflow"
    );
    assert_ne!(other.id(), first.id());
    let a = create(&*store, "onboard", None).await;
    let b = create(&*store, "onboard", None).await;
    assert_ne!(a.id(), b.id(), "runs without a key are always new");
    assert_eq!(
        store.runs(RunFilter::default()).await.expect("runs").len(),
        4
    );
}

pub(super) async fn commits_append_in_order(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let two = [attempt(0, 1_100), attempt(1, 1_101)];
    store
        .commit(Commit::events(run, 1, &two, 1_101))
        .await
        .expect("append at 1");
    assert_eq!(
        store.commit(Commit::events(run, 1, &two, 1_102)).await,
        Err(StoreError::Conflict { run, seq: 1 }),
        "a taken sequence number"
    );
    assert_eq!(
        store.commit(Commit::events(run, 9, &two, 1_102)).await,
        Err(StoreError::Conflict { run, seq: 9 }),
        "a gap"
    );
    let missing = RunId(run.0 + 1000);
    assert_eq!(
        store.commit(Commit::events(missing, 0, &two, 1_102)).await,
        Err(StoreError::UnknownRun(missing))
    );
    store
        .commit(Commit::events(run, 3, &[], 1_103))
        .await
        .expect("an empty commit at the right length");
    let events = events_of(&*store, run).await;
    assert_eq!(events.len(), 3);
    assert_eq!(events[1..], two);
}

pub(super) async fn refused_commits_write_nothing(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let letter = letter(run);
    let events = [attempt(0, 1_100)];
    let refused = store
        .commit(Commit {
            status: Some((RunStatus::Failed, Some("boom"))),
            dead_letter: DeadLetterChange::Put(&letter),
            inbox_cursor: Some(5),
            ..Commit::events(run, 4, &events, 1_100)
        })
        .await;
    assert_eq!(refused, Err(StoreError::Conflict { run, seq: 4 }));
    let stored = store.load(run).await.expect("load").expect("exists");
    assert_eq!(stored.events.len(), 1);
    assert_eq!(stored.record.status, RunStatus::Running);
    assert_eq!(stored.record.note, None);
    assert!(store.dead_letters().await.expect("letters").is_empty());
}

pub(super) async fn statuses_and_dead_letters(store: Arc<dyn Store>) {
    let a = create(&*store, "onboard", None).await.id();
    let b = create(&*store, "onboard", None).await.id();
    let letter_a = letter(a);
    let failed = [Event::AttemptFailed {
        step: 0,
        attempt: 3,
        kind: ErrorKind::Unavailable,
        message: "smtp down".to_owned(),
        retry_after: None,
        safe_after: None,
        at: 5_000,
    }];
    store
        .commit(Commit {
            status: Some((RunStatus::Failed, Some("failed at `send`"))),
            dead_letter: DeadLetterChange::Put(&letter_a),
            ..Commit::events(a, 1, &failed, 5_000)
        })
        .await
        .expect("fail a");
    store
        .commit(with_status(b, 1, RunStatus::Completed, None))
        .await
        .expect("complete b");
    let record = store.load(a).await.expect("load").expect("a").record;
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.note.as_deref(), Some("failed at `send`"));
    assert_eq!(store.dead_letters().await.expect("letters"), [letter_a]);
    let retried = [Event::Retried {
        by: "ops".to_owned(),
        at: 6_000,
    }];
    store
        .commit(Commit {
            status: Some((RunStatus::Running, Some("retried by ops"))),
            dead_letter: DeadLetterChange::Remove,
            ..Commit::events(a, 2, &retried, 6_000)
        })
        .await
        .expect("retry a");
    assert!(store.dead_letters().await.expect("letters").is_empty());
    let record = store.load(a).await.expect("load").expect("a").record;
    assert_eq!(record.status, RunStatus::Running);
    assert_eq!(record.note.as_deref(), Some("retried by ops"));
    let missing = RunId(b.0 + 1000);
    assert_eq!(
        store
            .commit(with_status(missing, 0, RunStatus::Completed, None))
            .await,
        Err(StoreError::UnknownRun(missing))
    );
}

pub(super) async fn runs_are_filtered_and_paged(store: Arc<dyn Store>) {
    let mut ids = Vec::new();
    for (workflow, status) in [
        ("onboard", RunStatus::Completed),
        ("offboard", RunStatus::Running),
        ("onboard", RunStatus::Running),
        ("onboard", RunStatus::Parked),
        ("offboard", RunStatus::Completed),
    ] {
        let run = create(&*store, workflow, None).await.id();
        if status != RunStatus::Running {
            store
                .commit(with_status(run, 1, status, None))
                .await
                .expect("status");
        }
        ids.push(run);
    }
    let listed = |filter: RunFilter| {
        let store = Arc::clone(&store);
        async move {
            store
                .runs(filter)
                .await
                .expect("runs")
                .into_iter()
                .map(|r| r.id)
                .collect::<Vec<_>>()
        }
    };
    let newest_first: Vec<RunId> = ids.iter().rev().copied().collect();
    assert_eq!(listed(RunFilter::default()).await, newest_first);
    assert_eq!(
        listed(RunFilter {
            workflow: Some("onboard".into()),
            ..RunFilter::default()
        })
        .await,
        [ids[3], ids[2], ids[0]]
    );
    assert_eq!(
        listed(RunFilter {
            status: Some(RunStatus::Running),
            ..RunFilter::default()
        })
        .await,
        [ids[2], ids[1]]
    );
    let page = |before| RunFilter {
        before,
        limit: Some(2),
        ..RunFilter::default()
    };
    assert_eq!(listed(page(None)).await, [ids[4], ids[3]]);
    assert_eq!(listed(page(Some(ids[3]))).await, [ids[2], ids[1]]);
    assert_eq!(listed(page(Some(ids[1]))).await, [ids[0]]);
}

pub(super) async fn supersede_parked(store: Arc<dyn Store>) {
    let old = create(&*store, "onboard", None).await.id();
    let running = create(&*store, "onboard", None).await.id();
    store
        .commit(with_status(old, 1, RunStatus::Parked, Some("spec changed")))
        .await
        .expect("park");
    let events = [started("onboard", 3_000)];
    let new = store
        .create_run(NewRun {
            fingerprint: "fp2",
            supersedes: Some((old, "restarted as its successor")),
            ..new_run("onboard", None, &events)
        })
        .await
        .expect("restart");
    let record = store.load(old).await.expect("load").expect("old").record;
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(record.note.as_deref(), Some("restarted as its successor"));
    let fresh = store
        .load(new.id())
        .await
        .expect("load")
        .expect("new")
        .record;
    assert_eq!(fresh.fingerprint, "fp2");
    let before = store.runs(RunFilter::default()).await.expect("runs").len();
    let refused = store
        .create_run(NewRun {
            supersedes: Some((running, "nope")),
            ..new_run("onboard", None, &events)
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { run, .. }) if run == running),
        "{refused:?}"
    );
    assert_eq!(
        store.runs(RunFilter::default()).await.expect("runs").len(),
        before,
        "no run was created"
    );
    let record = store
        .load(running)
        .await
        .expect("load")
        .expect("run")
        .record;
    assert_eq!(record.status, RunStatus::Running);
}

pub(super) async fn events_round_trip(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let events = [
        attempt(0, 1),
        Event::AttemptFailed {
            step: 0,
            attempt: 1,
            kind: ErrorKind::RateLimited,
            message: "slow down".to_owned(),
            retry_after: Some(1_500),
            safe_after: None,
            at: 2,
        },
        Event::StepSucceeded {
            step: 0,
            output: json!({ "id": 7, "name": "ünïcode ✓", "nested": [1, null, 2.5] }),
            at: 3,
        },
        Event::StepSkipped {
            step: 1,
            reason: "condition `x` is false".to_owned(),
            at: 4,
        },
        Event::EffectProposed {
            step: 2,
            item: None,
            args: json!({ "to": "a@b.c" }),
            at: 5,
        },
        Event::TaskOpened {
            step: 3,
            assignee: "ops".to_owned(),
            prompt: Some("Approve?".to_owned()),
            deadline: 100,
            at: 6,
        },
        Event::TaskEscalated {
            step: 3,
            to: "leads".to_owned(),
            deadline: 200,
            at: 7,
        },
        Event::MessageRefused {
            inbox: 4,
            step: Some(3),
            by: "eve".to_owned(),
            code: "unauthorized".to_owned(),
            reason: "eve may not decide".to_owned(),
            at: 8,
        },
        Event::TaskDecided {
            step: 3,
            by: "bob@leads".to_owned(),
            decision: json!({ "approved": true, "by": "bob@leads", "comment": null }),
            inbox: Some(5),
            via: None,
            at: 9,
        },
        Event::TaskExpired { step: 4, at: 10 },
        Event::DeadlinePassed { at: 11 },
        Event::CompensationStarted {
            step: 0,
            item: None,
            at: 12,
        },
        Event::Compensated {
            step: 0,
            item: Some(3),
            error: Some("undo failed".to_owned()),
            at: 13,
        },
        Event::Cancelled {
            by: "ops".to_owned(),
            inbox: None,
            at: 14,
        },
        Event::Retried {
            by: "ops".to_owned(),
            at: 15,
        },
        Event::StepFailed {
            step: 5,
            attempts: 2,
            kind: ErrorKind::Validation,
            message: "item 2 failed: bad".to_owned(),
            at: 16,
        },
        Event::EventAwaited {
            step: 6,
            deadline: 99,
            at: 17,
        },
        Event::EventBuffered {
            step: 6,
            event_id: "evt-1".to_owned(),
            payload: json!({ "paid": 12.5 }),
            inbox: Some(7),
            at: 18,
        },
        Event::EventReceived {
            step: 6,
            event_id: "evt-1".to_owned(),
            payload: json!({ "paid": 12.5 }),
            inbox: None,
            at: 19,
        },
        Event::EventExpired { step: 7, at: 20 },
        Event::MapStarted {
            step: 8,
            count: 3,
            at: 21,
        },
        Event::ItemStarted {
            step: 8,
            item: 1,
            attempt: 2,
            at: 22,
        },
        Event::ItemFailed {
            step: 8,
            item: 1,
            attempt: 2,
            kind: ErrorKind::Timeout,
            message: "slow".to_owned(),
            retry_after: None,
            at: 23,
        },
        Event::ItemSucceeded {
            step: 8,
            item: 0,
            output: json!("held"),
            at: 24,
        },
        Event::ChildStarted {
            step: 9,
            child: RunId(44),
            at: 25,
        },
        Event::ChildCancelled {
            step: 9,
            child: RunId(44),
            at: 26,
        },
    ];
    store
        .commit(Commit::events(run, 1, &events, 15))
        .await
        .expect("append every kind");
    assert_eq!(events_of(&*store, run).await[1..], events);
}

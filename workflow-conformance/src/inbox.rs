//! Inboxes and specs.

use super::*;

pub(super) async fn inbox_in_order(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let decision = Message::Decision {
        step: "review".to_owned(),
        by: "ana@ops".to_owned(),
        decision: json!({ "approved": true, "comment": "ok" }),
        via: None,
    };
    let event = Message::Event {
        step: "payment".to_owned(),
        event_id: "evt-9".to_owned(),
        payload: json!({ "amount": 12 }),
    };
    let cancel = Message::Cancel {
        by: "ops".to_owned(),
    };
    let first = store
        .submit(run, &decision, None, 2_000)
        .await
        .expect("submit");
    let second = store
        .submit(run, &event, Some("event:payment:evt-9"), 2_001)
        .await
        .expect("submit");
    let again = store
        .submit(run, &event, Some("event:payment:evt-9"), 2_002)
        .await
        .expect("submit again");
    let third = store
        .submit(run, &cancel, None, 2_003)
        .await
        .expect("submit");
    assert!(matches!(first, Submitted::New(_)));
    assert!(second.id() > first.id() && third.id() > second.id());
    assert_eq!(again, Submitted::Duplicate(second.id()));
    let items = store.inbox(run, 0).await.expect("inbox");
    assert_eq!(
        items.iter().map(|i| (i.id, &i.message)).collect::<Vec<_>>(),
        [
            (first.id(), &decision),
            (second.id(), &event),
            (third.id(), &cancel)
        ]
    );
    assert!(items.iter().all(|item| item.run == run));
    assert_eq!(items[0].at, 2_000);
    let later = store.inbox(run, first.id()).await.expect("inbox");
    assert_eq!(later.len(), 2);
    let missing = RunId(run.0 + 1000);
    assert_eq!(
        store.submit(missing, &cancel, None, 2_004).await,
        Err(StoreError::UnknownRun(missing))
    );
    store
        .commit(with_status(run, 1, RunStatus::Completed, None))
        .await
        .expect("finish");
    assert_eq!(
        store.submit(run, &cancel, None, 2_005).await,
        Err(StoreError::Finished(run))
    );
}

pub(super) async fn pending_inbox(store: Arc<dyn Store>) {
    let a = create(&*store, "onboard", None).await.id();
    let b = create(&*store, "onboard", None).await.id();
    let cancel = Message::Cancel {
        by: "ops".to_owned(),
    };
    let (none, start) = store.pending_inbox(0).await.expect("pending");
    assert!(none.is_empty());
    let on_a = store.submit(a, &cancel, None, 2_000).await.expect("a").id();
    let on_b = store.submit(b, &cancel, None, 2_001).await.expect("b").id();
    let (runs, last) = store.pending_inbox(start).await.expect("pending");
    assert_eq!(runs, [a, b]);
    assert!(last >= on_b);
    let taken = [Event::Cancelled {
        by: "ops".to_owned(),
        inbox: Some(on_a),
        at: 2_010,
    }];
    store
        .commit(Commit {
            inbox_cursor: Some(on_a),
            ..Commit::events(a, 1, &taken, 2_010)
        })
        .await
        .expect("take in");
    let (runs, _) = store.pending_inbox(start).await.expect("pending");
    assert_eq!(runs, [b], "a's message was taken in");
    assert!(store.inbox(a, on_a).await.expect("inbox").is_empty());
}

pub(super) async fn specs_and_registrations(store: Arc<dyn Store>) {
    store
        .put_spec("fp1", "onboard", "{\"v\":1}", 1_000)
        .await
        .expect("put");
    store
        .put_spec("fp2", "onboard", "{\"v\":2}", 2_000)
        .await
        .expect("put");
    store
        .put_spec("fp1", "onboard", "{\"changed\":true}", 3_000)
        .await
        .expect("register again");
    store
        .put_spec("fp3", "offboard", "{}", 1_500)
        .await
        .expect("put");
    assert_eq!(
        store.spec("fp1").await.expect("spec").as_deref(),
        Some("{\"v\":1}"),
        "written once per fingerprint"
    );
    assert_eq!(store.spec("nope").await, Ok(None));
    let specs = store.specs("onboard").await.expect("specs");
    assert_eq!(
        specs
            .iter()
            .map(|s| (
                s.fingerprint.as_str(),
                s.first_registered,
                s.last_registered
            ))
            .collect::<Vec<_>>(),
        [("fp1", 1_000, 3_000), ("fp2", 2_000, 2_000)],
        "most recently registered first"
    );
    assert_eq!(specs[1].spec, "{\"v\":2}");
    assert_eq!(specs[1].workflow, "onboard");
    assert_eq!(store.specs("offboard").await.expect("specs").len(), 1);
}

pub(super) async fn a_written_store_verifies_clean(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", Some("evt-1")).await.id();
    let letter = letter(run);
    let failed = [attempt(0, 1_100)];
    store
        .commit(Commit {
            status: Some((RunStatus::Failed, Some("boom"))),
            dead_letter: DeadLetterChange::Put(&letter),
            ..Commit::events(run, 1, &failed, 1_100)
        })
        .await
        .expect("fail");
    let other = create(&*store, "onboard", None).await.id();
    let cancel = Message::Cancel {
        by: "ops".to_owned(),
    };
    store
        .submit(other, &cancel, Some("k"), 1_200)
        .await
        .expect("submit");
    store
        .put_spec("fp1", "onboard", "{}", 1_300)
        .await
        .expect("spec");
    let verification = store.verify().await.expect("verify");
    assert!(verification.is_clean(), "{verification:?}");
}

pub(super) async fn commit_peeks_at_the_inbox(store: Arc<dyn Store>) {
    let events = [started("onboard", 1_000)];
    let Created::New { run, token } = store
        .create_run(NewRun {
            owner: Some(claimant("a", 60_000)),
            ..new_run("onboard", None, &events)
        })
        .await
        .expect("create")
    else {
        panic!("a new run was expected");
    };
    let fenced = |seq: u64, events: &'static [Event]| Commit {
        fence: Some(Fence { owner: "a", token }),
        ..Commit::events(run, seq, events, 2_000)
    };
    static FIRST: [Event; 1] = [Event::AttemptStarted {
        step: 0,
        attempt: 1,
        at: 2_000,
    }];
    static SECOND: [Event; 1] = [Event::AttemptStarted {
        step: 1,
        attempt: 1,
        at: 2_001,
    }];
    static THIRD: [Event; 1] = [Event::AttemptStarted {
        step: 2,
        attempt: 1,
        at: 2_002,
    }];
    assert_eq!(
        store.commit_peeking(fenced(1, &FIRST), 0).await,
        Ok(false),
        "an empty inbox"
    );
    let cancel = Message::Cancel {
        by: "ops".to_owned(),
    };
    let sent = store
        .submit(run, &cancel, None, 2_005)
        .await
        .expect("submit");
    assert_eq!(
        store.commit_peeking(fenced(2, &SECOND), 0).await,
        Ok(true),
        "a message above the cursor"
    );
    assert_eq!(
        store.commit_peeking(fenced(2, &THIRD), 0).await,
        Err(StoreError::Conflict { run, seq: 2 }),
        "a refused commit answers as `commit` does"
    );
    assert_eq!(
        store.commit_peeking(fenced(3, &THIRD), sent.id()).await,
        Ok(false),
        "no message above the one named"
    );
    assert_eq!(
        events_of(&*store, run).await[1..],
        [FIRST[0].clone(), SECOND[0].clone(), THIRD[0].clone()],
        "each commit that peeked was written once"
    );
    let stale = Commit {
        fence: Some(Fence {
            owner: "a",
            token: token + 1,
        }),
        ..Commit::events(run, 4, &FIRST, 2_010)
    };
    assert!(
        matches!(
            store.commit_peeking(stale, 0).await,
            Err(StoreError::Fenced { .. })
        ),
        "a stale token is refused"
    );
    assert_eq!(events_of(&*store, run).await.len(), 4);
}

//! The [`Store`] conformance suite: every promise of the trait's documentation, written
//! once and run against every store.
//!
//! ```no_run
//! # async fn demo() {
//! use std::sync::Arc;
//! use workflow_core::store::{conformance, MemoryStore, Store};
//!
//! conformance::run(|| async { Arc::new(MemoryStore::new()) as Arc<dyn Store> }).await;
//! # }
//! ```
//!
//! Each check gets a fresh, empty store from the factory. Checks that need a lease to
//! lapse wait a few milliseconds of real time, so stores that keep time by their own clock
//! (a database server) pass the same checks as stores that use the caller's.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::{
    Claim, Claimant, Commit, Created, DeadLetter, DeadLetterChange, Fence, Message, NewRun,
    RunFilter, RunStatus, Store, StoreError, Submitted,
};
use crate::error::{ErrorKind, RunId};
use crate::journal::{Event, Timestamp};
use crate::workflow::BoxFuture;

/// One check: it panics when the store breaks a promise.
pub type Check = fn(Arc<dyn Store>) -> BoxFuture<'static, ()>;

/// Every check, by name.
pub const CHECKS: &[(&str, Check)] = &[
    ("a created run loads back", |s| {
        Box::pin(created_runs_load_back(s))
    }),
    ("idempotency keys name one run per workflow", |s| {
        Box::pin(idempotency_keys(s))
    }),
    ("commits append at the expected length only", |s| {
        Box::pin(commits_append_in_order(s))
    }),
    ("a refused commit writes nothing", |s| {
        Box::pin(refused_commits_write_nothing(s))
    }),
    ("statuses, notes and dead letters", |s| {
        Box::pin(statuses_and_dead_letters(s))
    }),
    ("runs are filtered and paged newest first", |s| {
        Box::pin(runs_are_filtered_and_paged(s))
    }),
    ("claims honour owners", |s| {
        Box::pin(claims_honour_owners(s))
    }),
    ("a lapsed lease is taken over and its owner fenced", |s| {
        Box::pin(lapsed_leases_are_taken_over(s))
    }),
    ("renewed leases hold and released runs are free", |s| {
        Box::pin(renew_and_release(s))
    }),
    ("a run created claimed is its creator's", |s| {
        Box::pin(created_claimed(s))
    }),
    ("finishing releases the owner", |s| {
        Box::pin(finishing_releases(s))
    }),
    ("the inbox keeps messages in order, once per key", |s| {
        Box::pin(inbox_in_order(s))
    }),
    ("taken-in messages are no longer pending", |s| {
        Box::pin(pending_inbox(s))
    }),
    ("specs are written once, registrations noted", |s| {
        Box::pin(specs_and_registrations(s))
    }),
    ("a restart supersedes a parked run atomically", |s| {
        Box::pin(supersede_parked(s))
    }),
    ("every journal event round-trips", |s| {
        Box::pin(events_round_trip(s))
    }),
];

/// Runs every check, each on a fresh store from `make`, and panics naming every check
/// that failed.
pub async fn run<F, Fut>(mut make: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let mut failed = Vec::new();
    for (name, check) in CHECKS {
        let store = make().await;
        if let Err(error) = tokio::spawn(check(store)).await {
            let message = if error.is_panic() {
                let panic = error.into_panic();
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default()
            } else {
                error.to_string()
            };
            failed.push(format!("{name}: {message}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} conformance checks failed:\n{}",
        failed.len(),
        CHECKS.len(),
        failed.join("\n")
    );
}

fn wall_clock() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn started(workflow: &str, at: Timestamp) -> Event {
    Event::RunStarted {
        workflow: workflow.to_owned(),
        fingerprint: "fp1".to_owned(),
        input: json!({ "user": "ada", "tags": ["a", "b"] }),
        seed: 42,
        trace_id: "trace-1".to_owned(),
        dry_run: false,
        deadline: Some(at + 60_000),
        at,
    }
}

fn attempt(step: usize, at: Timestamp) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at,
    }
}

fn new_run<'a>(workflow: &'a str, key: Option<&'a str>, events: &'a [Event]) -> NewRun<'a> {
    NewRun {
        workflow,
        fingerprint: "fp1",
        idempotency_key: key,
        events,
        parent: None,
        owner: None,
        supersedes: None,
        at: events.first().map_or(0, Event::at),
    }
}

async fn create(store: &dyn Store, workflow: &str, key: Option<&str>) -> Created {
    let events = [started(workflow, 1_000)];
    store
        .create_run(new_run(workflow, key, &events))
        .await
        .expect("create a run")
}

async fn events_of(store: &dyn Store, run: RunId) -> Vec<Event> {
    store
        .load(run)
        .await
        .expect("load")
        .expect("the run exists")
        .events
}

fn claimant(owner: &str, lease_ms: u64) -> Claimant<'_> {
    Claimant {
        owner,
        lease_ms,
        now: wall_clock(),
    }
}

fn claim<'a>(claimant: Claimant<'a>, workflows: &'a [&'a str]) -> Claim<'a> {
    Claim {
        claimant,
        workflows,
        run: None,
        reclaim_own: false,
        limit: None,
    }
}

fn letter(run: RunId) -> DeadLetter {
    DeadLetter {
        run,
        workflow: "onboard".to_owned(),
        step: "send_welcome_email".to_owned(),
        attempts: 3,
        kind: ErrorKind::Unavailable,
        message: "smtp down".to_owned(),
        trace_id: format!("trace-{}", run.0),
        at: 5_000,
    }
}

fn with_status(run: RunId, seq: u64, status: RunStatus, note: Option<&str>) -> Commit<'_> {
    Commit {
        status: Some((status, note)),
        ..Commit::events(run, seq, &[], 2_000)
    }
}

async fn created_runs_load_back(store: Arc<dyn Store>) {
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

async fn idempotency_keys(store: Arc<dyn Store>) {
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

async fn commits_append_in_order(store: Arc<dyn Store>) {
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

async fn refused_commits_write_nothing(store: Arc<dyn Store>) {
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

async fn statuses_and_dead_letters(store: Arc<dyn Store>) {
    let a = create(&*store, "onboard", None).await.id();
    let b = create(&*store, "onboard", None).await.id();
    let letter_a = letter(a);
    let failed = [Event::AttemptFailed {
        step: 0,
        attempt: 3,
        kind: ErrorKind::Unavailable,
        message: "smtp down".to_owned(),
        retry_after: None,
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

async fn runs_are_filtered_and_paged(store: Arc<dyn Store>) {
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

async fn claims_honour_owners(store: Arc<dyn Store>) {
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

async fn lapsed_leases_are_taken_over(store: Arc<dyn Store>) {
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

async fn renew_and_release(store: Arc<dyn Store>) {
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
    store.release("a", None).await.expect("release all");
    let record = store.load(mine).await.expect("load").expect("run").record;
    assert_eq!(record.owner, None);
    assert_eq!(
        store.renew(claimant("a", 60_000)).await.expect("renew"),
        Vec::<RunId>::new()
    );
}

async fn created_claimed(store: Arc<dyn Store>) {
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

async fn finishing_releases(store: Arc<dyn Store>) {
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

async fn inbox_in_order(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let decision = Message::Decision {
        step: "review".to_owned(),
        by: "ana@ops".to_owned(),
        decision: json!({ "approved": true, "comment": "ok" }),
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

async fn pending_inbox(store: Arc<dyn Store>) {
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

async fn specs_and_registrations(store: Arc<dyn Store>) {
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

async fn supersede_parked(store: Arc<dyn Store>) {
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

async fn events_round_trip(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    let events = [
        attempt(0, 1),
        Event::AttemptFailed {
            step: 0,
            attempt: 1,
            kind: ErrorKind::RateLimited,
            message: "slow down".to_owned(),
            retry_after: Some(1_500),
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
            at: 9,
        },
        Event::TaskExpired { step: 4, at: 10 },
        Event::DeadlinePassed { at: 11 },
        Event::CompensationStarted { step: 0, at: 12 },
        Event::Compensated {
            step: 0,
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
    ];
    store
        .commit(Commit::events(run, 1, &events, 15))
        .await
        .expect("append every kind");
    assert_eq!(events_of(&*store, run).await[1..], events);
}

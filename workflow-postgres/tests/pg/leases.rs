//! Leases by the server's clock, fencing, `SKIP LOCKED` claims under concurrency, and
//! uniqueness under racing writers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use sqlx::{Connection, Executor};
use workflow_core::journal::Event;
use workflow_core::store::{Claim, Commit, Created, Fence, Message, Store, StoreError, Submitted};
use workflow_postgres::testing::{self as pg_testing, Schema};

use super::{claim_all, claimant, create, wall_clock};

fn attempt(step: usize) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at: 2_000,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_end_by_the_servers_clock_not_the_callers() {
    let Some(url) = pg_testing::server("leases_end_by_the_servers_clock_not_the_callers").await
    else {
        return;
    };
    let schema = Schema::new(&url, "clock");
    let store = schema.store().await;
    let run = create(&store, None).await.id();
    // `a` says it is 1970: by its own clock its 60 s lease ended long ago.
    let a = store
        .claim(claim_all(claimant("a", 60_000, 0), None))
        .await
        .unwrap();
    assert_eq!(a.len(), 1);
    // `b` says it is the year 3000: by its clock the lease lapsed too.
    let far_future = wall_clock() + 1_000 * 86_400 * 365 * 1_000;
    let taken = store
        .claim(claim_all(claimant("b", 60_000, far_future), None))
        .await
        .unwrap();
    assert!(taken.is_empty(), "the server's clock says the lease holds");

    // A short lease lapses by the server's clock, whatever the callers say.
    store
        .claim(Claim {
            reclaim_own: true,
            ..claim_all(claimant("a", 200, far_future), Some(run))
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let taken = store
        .claim(claim_all(claimant("b", 60_000, 0), None))
        .await
        .unwrap();
    assert_eq!(taken.iter().map(|l| l.run).collect::<Vec<_>>(), [run]);
    schema.drop().await;
}

/// A lapsed lease nobody took over still fences every other writer, and its owner keeps
/// the run (its next heartbeat revives the lease). Once another worker claims the run, the
/// lapsed owner's writes are refused, and its heartbeat no longer lists the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_owner_is_fenced_by_the_next_claim() {
    let Some(url) = pg_testing::server("a_lapsed_owner_is_fenced_by_the_next_claim").await else {
        return;
    };
    let schema = Schema::new(&url, "fence");
    let store = schema.store().await;
    let run = create(&store, None).await.id();
    let a = store
        .claim(claim_all(claimant("a", 100, 0), None))
        .await
        .unwrap()[0];
    tokio::time::sleep(Duration::from_millis(250)).await;
    let fence_a = Fence {
        owner: "a",
        token: a.token,
    };
    let forged = Fence {
        owner: "b",
        token: a.token,
    };
    let events = [attempt(0)];
    assert_eq!(
        store
            .commit(Commit {
                fence: Some(forged),
                ..Commit::events(run, 1, &events, 2_000)
            })
            .await,
        Err(StoreError::Fenced {
            run,
            owner: "b".into()
        }),
        "a lapsed lease is no one else's to write under"
    );
    store
        .commit(Commit {
            fence: Some(fence_a),
            ..Commit::events(run, 1, &events, 2_000)
        })
        .await
        .expect("nobody took the run over: its owner still writes");
    assert_eq!(store.renew(claimant("a", 100, 0)).await.unwrap(), [run]);
    tokio::time::sleep(Duration::from_millis(250)).await;

    let b = store
        .claim(claim_all(claimant("b", 60_000, 0), None))
        .await
        .unwrap();
    assert_eq!(b.len(), 1, "the lapsed lease is taken over");
    let late = [attempt(1)];
    assert_eq!(
        store
            .commit(Commit {
                fence: Some(fence_a),
                ..Commit::events(run, 2, &late, 2_001)
            })
            .await,
        Err(StoreError::Fenced {
            run,
            owner: "a".into()
        })
    );
    assert_eq!(store.fenced_writes(), 2);
    assert!(store.renew(claimant("a", 100, 0)).await.unwrap().is_empty());
    let stored = store.load(run).await.unwrap().unwrap();
    assert_eq!(
        stored.events.len(),
        2,
        "nothing from `a` after the takeover"
    );
    assert_eq!(stored.record.owner.as_deref(), Some("b"));
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_claims_split_runs_and_skip_locked_rows() {
    let Some(url) = pg_testing::server("concurrent_claims_split_runs_and_skip_locked_rows").await
    else {
        return;
    };
    let schema = Schema::new(&url, "skip");
    let store = Arc::new(schema.store().await);
    let mut runs = Vec::new();
    for _ in 0..120 {
        runs.push(create(&*store, None).await.id());
    }
    // Another transaction holds the first run's row: claims pass it by instead of waiting.
    let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
    holder.execute("BEGIN").await.unwrap();
    holder
        .execute(
            format!(
                "SELECT 1 FROM \"{}\".runs WHERE id = {} FOR UPDATE",
                schema.name(),
                runs[0].0
            )
            .as_str(),
        )
        .await
        .unwrap();

    let mut workers = Vec::new();
    for worker in 0..6 {
        let store = Arc::clone(&store);
        workers.push(tokio::spawn(async move {
            let owner = format!("w{worker}");
            let mut mine = Vec::new();
            loop {
                let leases = store
                    .claim(Claim {
                        limit: Some(7),
                        claimable: workflow_core::store::Claimable::Any,
                        versions: None,
                        ..claim_all(claimant(&owner, 60_000, 0), None)
                    })
                    .await
                    .unwrap();
                if leases.is_empty() {
                    return mine;
                }
                mine.extend(leases);
            }
        }));
    }
    let claimed = tokio::time::timeout(Duration::from_secs(60), async {
        let mut all = Vec::new();
        for worker in workers {
            all.extend(worker.await.unwrap());
        }
        all
    })
    .await
    .expect("claims never wait for a locked row");
    let mut count: HashMap<_, usize> = HashMap::new();
    for lease in &claimed {
        *count.entry(lease.run).or_default() += 1;
        // The low 32 bits count claims; above them, the server's timeline (the epoch).
        assert_eq!(lease.token & 0xffff_ffff, 1, "each run was claimed once");
        assert!(lease.token >> 32 >= 1, "the token carries the timeline");
    }
    assert_eq!(count.len(), runs.len() - 1, "every run but the locked one");
    assert!(count.values().all(|n| *n == 1));
    assert!(!count.contains_key(&runs[0]));
    holder.execute("ROLLBACK").await.unwrap();
    let late = store
        .claim(claim_all(claimant("late", 60_000, 0), None))
        .await
        .unwrap();
    assert_eq!(late.iter().map(|l| l.run).collect::<Vec<_>>(), [runs[0]]);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_given_one_webhook_create_one_run() {
    let Some(url) = pg_testing::server("two_workers_given_one_webhook_create_one_run").await else {
        return;
    };
    let schema = Schema::new(&url, "unique");
    // Two processes' stores, each trying the same start (and the same event) ten times at once.
    let stores = [
        Arc::new(schema.store().await),
        Arc::new(schema.store().await),
    ];
    let mut tries = Vec::new();
    for i in 0..20 {
        let store = Arc::clone(&stores[i % 2]);
        tries.push(tokio::spawn(async move {
            create(&*store, Some("evt-42")).await
        }));
    }
    let mut created = Vec::new();
    for attempt in tries {
        created.push(attempt.await.unwrap());
    }
    let new: Vec<_> = created
        .iter()
        .filter(|c| matches!(c, Created::New { .. }))
        .collect();
    assert_eq!(new.len(), 1, "{created:?}");
    let run = new[0].id();
    assert!(created.iter().all(|c| c.id() == run));

    let event = Message::Event {
        step: "payment".into(),
        event_id: "pay-1".into(),
        payload: json!({ "amount": 5 }),
    };
    let mut sends = Vec::new();
    for i in 0..20 {
        let store = Arc::clone(&stores[i % 2]);
        let event = event.clone();
        sends.push(tokio::spawn(async move {
            store
                .submit(run, &event, Some("event:payment:pay-1"), 3_000)
                .await
                .unwrap()
        }));
    }
    let mut submitted = Vec::new();
    for send in sends {
        submitted.push(send.await.unwrap());
    }
    let stored: Vec<_> = submitted
        .iter()
        .filter(|s| matches!(s, Submitted::New(_)))
        .collect();
    assert_eq!(stored.len(), 1, "{submitted:?}");
    assert_eq!(stores[0].inbox(run, 0).await.unwrap().len(), 1);

    // A message is taken in once: a second entry taking in the same one is refused.
    let cancel = Message::Cancel { by: "ops".into() };
    let id = stores[0]
        .submit(run, &cancel, None, 3_001)
        .await
        .unwrap()
        .id();
    let take = |seq: u64| Event::Cancelled {
        by: "ops".into(),
        inbox: Some(id),
        at: 3_002 + seq,
    };
    let first = [take(0)];
    stores[0]
        .commit(Commit::events(run, 1, &first, 3_002))
        .await
        .unwrap();
    let again = [take(1)];
    assert_eq!(
        stores[1]
            .commit(Commit::events(run, 2, &again, 3_003))
            .await,
        Err(StoreError::Conflict { run, seq: 2 })
    );
    schema.drop().await;
}

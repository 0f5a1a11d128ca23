//! Worker rows: heartbeats renew leases and record their worker, a release of all of an
//! owner's runs marks its row stopped.

use workflow_core::store::{Heartbeat, WorkerRow};

use super::*;

fn beat(
    owner: &str,
    lease_ms: u64,
    started: Timestamp,
    draining: Option<Timestamp>,
) -> Heartbeat<'_> {
    Heartbeat {
        claimant: claimant(owner, lease_ms),
        started,
        draining,
    }
}

async fn row(store: &dyn Store, name: &str) -> WorkerRow {
    let rows = store.workers().await.expect("workers");
    rows.into_iter()
        .find(|row| row.name == name)
        .unwrap_or_else(|| panic!("no worker row for {name}"))
}

pub(super) async fn heartbeats_record_their_worker(store: Arc<dyn Store>) {
    let run = create(&*store, "onboard", None).await.id();
    store
        .claim(claim(claimant("a", 60_000), &["onboard"]))
        .await
        .expect("claim");
    // A plain renewal records no worker.
    store.renew(claimant("a", 60_000)).await.expect("renew");
    assert_eq!(store.workers().await.expect("workers"), Vec::new());

    let started = wall_clock() - 5_000;
    let held = store
        .heartbeat(beat("a", 60_000, started, None))
        .await
        .expect("heartbeat");
    assert_eq!(held, [run], "a heartbeat renews as a renewal does");
    let a = row(&*store, "a").await;
    assert_eq!(a.started_at, started);
    assert_eq!(a.lease_until - a.renewed_at, 60_000, "{a:?}");
    assert_eq!((a.draining_since, a.stopped), (None, false));
    assert!(!a.lapsed(a.renewed_at));
    // The heartbeat renewed the run's lease: another claimant cannot take it.
    let taken = store
        .claim(claim(claimant("b", 60_000), &["onboard"]))
        .await
        .expect("claim");
    assert!(taken.is_empty(), "{taken:?}");

    // Draining is recorded.
    let draining = wall_clock();
    store
        .heartbeat(beat("a", 60_000, started, Some(draining)))
        .await
        .expect("heartbeat");
    let a = row(&*store, "a").await;
    assert_eq!(a.draining_since, Some(draining));
    assert_eq!(a.started_at, started);

    // A worker that stops renewing lapses, on the store's clock.
    store
        .heartbeat(beat("b", 1, started, None))
        .await
        .expect("heartbeat");
    tokio::time::sleep(Duration::from_millis(30)).await;
    store
        .heartbeat(beat("a", 60_000, started, Some(draining)))
        .await
        .expect("heartbeat");
    let (a, b) = (row(&*store, "a").await, row(&*store, "b").await);
    assert!(b.lapsed(a.renewed_at), "{b:?} at {}", a.renewed_at);
    assert!(!a.lapsed(a.renewed_at));
    let names: Vec<String> = store
        .workers()
        .await
        .expect("workers")
        .into_iter()
        .map(|row| row.name)
        .collect();
    assert_eq!(names, ["a", "b"], "by name");

    // Releasing some runs leaves the worker; releasing all of them stops it.
    store.release("a", Some(&[run])).await.expect("release one");
    assert!(!row(&*store, "a").await.stopped);
    store.release("a", None).await.expect("release all");
    let a = row(&*store, "a").await;
    assert!(a.stopped, "{a:?}");
    assert!(
        !a.lapsed(a.lease_until + 1),
        "a stopped worker has not lapsed"
    );
    assert!(!row(&*store, "b").await.stopped);
    // A draining engine's beat that lands after its release leaves it stopped.
    store
        .heartbeat(beat("a", 60_000, started, Some(draining)))
        .await
        .expect("heartbeat");
    assert!(row(&*store, "a").await.stopped);

    // The same name beating again (a new process under it) is what its beat says.
    let restarted = wall_clock();
    store
        .heartbeat(beat("a", 60_000, restarted, None))
        .await
        .expect("heartbeat");
    let a = row(&*store, "a").await;
    assert_eq!(
        (a.started_at, a.draining_since, a.stopped),
        (restarted, None, false)
    );
}

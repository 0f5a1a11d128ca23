//! Batches of runs created in one transaction (`Store::create_runs`): each run as
//! `create_run` would create it, keys deduplicated inside and across batches, and a batch
//! that fails leaves nothing of itself.

use workflow_core::store::tasks::TaskFilter;
use workflow_core::store::{RunRecord, StoredRun};

use super::*;

fn opened(step: usize, at: Timestamp) -> Event {
    Event::TaskOpened {
        step,
        assignee: "ana@finance".to_owned(),
        prompt: Some("approve".to_owned()),
        deadline: at + 60_000,
        at,
    }
}

/// A run as loaded, without what differs between two creations of the same run: its id
/// and its key.
fn shape(stored: &StoredRun) -> (RunRecord, Vec<Event>) {
    let record = RunRecord {
        id: RunId(0),
        idempotency_key: None,
        ..stored.record.clone()
    };
    (record, stored.events.clone())
}

async fn loaded(store: &dyn Store, run: RunId) -> StoredRun {
    store
        .load(run)
        .await
        .expect("load")
        .expect("the run exists")
}

async fn found(store: &dyn Store, name: &str, value: &str) -> Vec<RunId> {
    let filter = RunFilter {
        search: vec![(name.to_owned(), value.to_owned())],
        ..RunFilter::default()
    };
    let mut runs: Vec<RunId> = store
        .runs(filter)
        .await
        .expect("runs")
        .iter()
        .map(|r| r.id)
        .collect();
    runs.sort_unstable();
    runs
}

pub(super) async fn a_batch_creates_each_run_as_one_by_one(store: Arc<dyn Store>) {
    let plain = [started("onboard", 1_000), attempt(0, 1_000)];
    let child = [started("report", 1_100)];
    let task = [started("approve", 1_200), opened(0, 1_200)];
    let search = vec![("customer".to_owned(), "c-42".to_owned())];
    let owner = claimant("engine-a", 60_000);
    let runs = |keys: [&'static str; 2]| {
        [
            NewRun {
                search: &search,
                ..new_run("onboard", Some(keys[0]), &plain)
            },
            NewRun {
                parent: Some(RunId(77)),
                owner: Some(owner),
                ..new_run("report", Some(keys[1]), &child)
            },
            NewRun {
                owner: Some(owner),
                ..new_run("approve", None, &task)
            },
        ]
    };
    let mut one_by_one = Vec::new();
    for run in runs(["a1", "b1"]) {
        one_by_one.push(store.create_run(run).await.expect("create one"));
    }
    let batch = runs(["a", "b"]);
    let batched = store.create_runs(&batch).await.expect("create a batch");
    assert_eq!(batched.len(), 3, "one answer per run, in order");
    for (alone, together) in one_by_one.iter().zip(&batched) {
        let (Created::New { token: a, .. }, Created::New { token: b, .. }) = (alone, together)
        else {
            panic!("new runs were expected: {alone:?}, {together:?}");
        };
        assert_eq!(a == &0, b == &0, "owned runs get a token, unowned none");
        let (alone, together) = (
            loaded(&*store, alone.id()).await,
            loaded(&*store, together.id()).await,
        );
        assert_eq!(shape(&alone), shape(&together));
    }
    let ids: Vec<RunId> = batched.iter().map(|c| c.id()).collect();
    assert_eq!(
        loaded(&*store, ids[0])
            .await
            .record
            .idempotency_key
            .as_deref(),
        Some("a")
    );
    assert_eq!(
        found(&*store, "customer", "c-42").await,
        vec![one_by_one[0].id(), ids[0]],
        "search values are stored with the batch"
    );
    let tasks = store
        .open_tasks(TaskFilter::default())
        .await
        .expect("open tasks");
    let mut task_runs: Vec<RunId> = tasks.iter().map(|t| t.run).collect();
    task_runs.sort_unstable();
    assert_eq!(
        task_runs,
        vec![one_by_one[2].id(), ids[2]],
        "tasks indexed too"
    );
    // A batch's owned run is its creator's, like one created alone.
    let fence = match batched[1] {
        Created::New { run, token } => (run, token),
        Created::Existing(_) => unreachable!(),
    };
    store
        .commit(Commit {
            fence: Some(Fence {
                owner: "engine-a",
                token: fence.1,
            }),
            ..Commit::events(fence.0, 1, &[attempt(0, 1_300)], 1_300)
        })
        .await
        .expect("the creator writes under the batch's token");
    assert_eq!(store.create_runs(&[]).await, Ok(Vec::new()));
}

pub(super) async fn keys_name_one_run_inside_and_across_batches(store: Arc<dyn Store>) {
    let before = create(&*store, "onboard", Some("k0")).await.id();
    let events = [started("onboard", 2_000)];
    let first = store
        .create_runs(&[
            new_run("onboard", Some("k1"), &events),
            new_run("onboard", Some("k0"), &events),
            new_run("onboard", Some("k1"), &events),
            new_run("offboard", Some("k1"), &events),
            new_run("onboard", None, &events),
        ])
        .await
        .expect("a batch");
    let Created::New { run: k1, .. } = first[0] else {
        panic!("k1 is new: {first:?}");
    };
    assert_eq!(
        first[1],
        Created::Existing(before),
        "a key used before the batch"
    );
    assert_eq!(
        first[2],
        Created::Existing(k1),
        "a key used earlier in the batch"
    );
    assert!(
        matches!(first[3], Created::New { .. }) && first[3].id() != k1,
        "keys are per workflow: {first:?}"
    );
    assert!(matches!(first[4], Created::New { .. }));
    let second = store
        .create_runs(&[
            new_run("onboard", Some("k1"), &events),
            new_run("onboard", Some("k2"), &events),
        ])
        .await
        .expect("another batch");
    assert_eq!(
        second[0],
        Created::Existing(k1),
        "a key of an earlier batch"
    );
    let k2 = second[1];
    assert!(matches!(k2, Created::New { .. }));
    assert_eq!(
        create(&*store, "onboard", Some("k2")).await,
        Created::Existing(k2.id()),
        "create_run finds a batch's key"
    );
    for run in [before, k1, k2.id()] {
        assert_eq!(events_of(&*store, run).await.len(), 1, "nothing added");
    }
    assert_eq!(
        store.runs(RunFilter::default()).await.expect("runs").len(),
        5,
        "one run per key and workflow, and the keyless one"
    );
}

pub(super) async fn a_failing_batch_creates_nothing(store: Arc<dyn Store>) {
    let parked = create(&*store, "onboard", None).await.id();
    let running = create(&*store, "onboard", None).await.id();
    store
        .commit(with_status(
            parked,
            1,
            RunStatus::Parked,
            Some("spec changed"),
        ))
        .await
        .expect("park");
    let missing = RunId(parked.0.max(running.0) + 1_000);
    let events = [started("onboard", 3_000)];
    let task = [started("approve", 3_000), opened(0, 3_000)];
    let search = vec![("customer".to_owned(), "c-9".to_owned())];
    let good = || {
        [
            NewRun {
                search: &search,
                ..new_run("onboard", Some("kept-out"), &events)
            },
            new_run("approve", None, &task),
            NewRun {
                supersedes: Some((parked, "restarted")),
                ..new_run("onboard", None, &events)
            },
        ]
    };
    let refusals = [
        (Some((missing, "nope")), StoreError::UnknownRun(missing)),
        (
            Some((running, "nope")),
            StoreError::Conflict {
                run: running,
                seq: 1,
            },
        ),
        (
            // Superseded a second time, by the same batch.
            Some((parked, "again")),
            StoreError::Conflict {
                run: parked,
                seq: 1,
            },
        ),
    ];
    for (supersedes, error) in refusals {
        let mut batch = good().to_vec();
        batch.push(NewRun {
            supersedes,
            ..new_run("onboard", None, &events)
        });
        let refused = store.create_runs(&batch).await;
        let same = match (&refused, &error) {
            (Err(StoreError::UnknownRun(a)), StoreError::UnknownRun(b)) => a == b,
            (Err(StoreError::Conflict { run: a, .. }), StoreError::Conflict { run: b, .. }) => {
                a == b
            }
            _ => false,
        };
        assert!(same, "expected {error:?}, got {refused:?}");
        let runs = store.runs(RunFilter::default()).await.expect("runs");
        assert_eq!(runs.len(), 2, "no run of the batch was created");
        assert_eq!(
            loaded(&*store, parked).await.record.status,
            RunStatus::Parked,
            "the supersede of the batch was undone"
        );
        assert_eq!(found(&*store, "customer", "c-9").await, Vec::new());
        let tasks = store.open_tasks(TaskFilter::default()).await;
        assert_eq!(tasks.map(|t| t.len()), Ok(0), "no task row of the batch");
    }
    let created = store.create_runs(&good()).await.expect("the good batch");
    assert!(
        created.iter().all(|c| matches!(c, Created::New { .. })),
        "the refused batches left their key free: {created:?}"
    );
    assert_eq!(
        loaded(&*store, parked).await.record.status,
        RunStatus::Cancelled
    );
}

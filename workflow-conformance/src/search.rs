//! Search values and purges.

use super::*;
use workflow_core::store::PurgeFilter;

/// Creates a run of `workflow` with search values.
async fn searched(store: &dyn Store, workflow: &str, values: &[(&str, &str)]) -> RunId {
    let events = [started(workflow, 1_000)];
    let search: Vec<(String, String)> = values
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    store
        .create_run(NewRun {
            search: &search,
            ..new_run(workflow, None, &events)
        })
        .await
        .expect("create a run")
        .id()
}

async fn found(store: &dyn Store, search: &[(&str, &str)], before: Option<RunId>) -> Vec<RunId> {
    store
        .runs(RunFilter {
            search: search
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            before,
            limit: Some(2),
            ..RunFilter::default()
        })
        .await
        .expect("runs")
        .into_iter()
        .map(|r| r.id)
        .collect()
}

pub(super) async fn runs_are_found_by_search_values(store: Arc<dyn Store>) {
    let a = searched(&*store, "charge", &[("customer_id", "c-42"), ("id", "1")]).await;
    let b = searched(&*store, "charge", &[("customer_id", "c-7"), ("id", "2")]).await;
    let c = searched(&*store, "charge", &[("customer_id", "c-42"), ("id", "3")]).await;
    let d = searched(&*store, "refund", &[("customer_id", "c-42")]).await;
    let plain = create(&*store, "charge", None).await.id();
    let store = &*store;
    assert_eq!(found(store, &[("customer_id", "c-42")], None).await, [d, c]);
    assert_eq!(found(store, &[("customer_id", "c-42")], Some(c)).await, [a]);
    assert_eq!(found(store, &[("customer_id", "c-7")], None).await, [b]);
    assert_eq!(
        found(store, &[("customer_id", "c-42"), ("id", "3")], None).await,
        [c]
    );
    assert!(found(store, &[("customer_id", "c-42"), ("id", "2")], None)
        .await
        .is_empty());
    // A value is found under its own name only.
    assert!(found(store, &[("id", "c-42")], None).await.is_empty());
    assert!(found(store, &[("customer_id", "c-4")], None)
        .await
        .is_empty());
    let charges = store
        .runs(RunFilter {
            workflow: Some("charge".into()),
            search: vec![("customer_id".into(), "c-42".into())],
            ..RunFilter::default()
        })
        .await
        .expect("runs");
    assert_eq!(charges.iter().map(|r| r.id).collect::<Vec<_>>(), [c, a]);
    assert!(found(store, &[], None).await.contains(&plain));
}

/// Finishes `run` (journal length 1) with `status` at `at`.
async fn finish(store: &dyn Store, run: RunId, status: RunStatus, at: Timestamp) {
    let letter = letter(run);
    store
        .commit(Commit {
            status: Some((status, None)),
            dead_letter: if status == RunStatus::Failed {
                DeadLetterChange::Put(&letter)
            } else {
                DeadLetterChange::Keep
            },
            ..Commit::events(run, 1, &[], at)
        })
        .await
        .expect("finish");
}

pub(super) async fn purges_take_finished_runs_whole(store: Arc<dyn Store>) {
    let s = &*store;
    let completed = searched(s, "charge", &[("customer_id", "c-1")]).await;
    let failed = searched(s, "charge", &[("customer_id", "c-1")]).await;
    let cancelled = create(s, "charge", Some("evt-1")).await.id();
    let running = searched(s, "charge", &[("customer_id", "c-1")]).await;
    let parked = create(s, "charge", None).await.id();
    let recent = create(s, "charge", None).await.id();
    let other = create(s, "refund", None).await.id();
    let parent = create(s, "charge", None).await.id();
    let events = [started("shipping", 1_000)];
    let child = s
        .create_run(NewRun {
            parent: Some(parent),
            ..new_run("shipping", None, &events)
        })
        .await
        .expect("child")
        .id();
    let cancel = Message::Cancel { by: "ops".into() };
    s.submit(failed, &cancel, Some("k"), 1_500)
        .await
        .expect("submit");
    finish(s, completed, RunStatus::Completed, 2_000).await;
    finish(s, failed, RunStatus::Failed, 2_000).await;
    finish(s, cancelled, RunStatus::Cancelled, 2_000).await;
    finish(s, parked, RunStatus::Parked, 2_000).await;
    finish(s, recent, RunStatus::Completed, 9_000).await;
    finish(s, other, RunStatus::Completed, 2_000).await;
    finish(s, child, RunStatus::Completed, 2_000).await;

    let filter = |limit, dry_run| PurgeFilter {
        before: 5_000,
        workflow: Some("charge".into()),
        limit,
        dry_run,
        ..PurgeFilter::default()
    };
    let dry = s.purge(filter(10, true)).await.expect("dry run");
    assert_eq!(dry, [completed, failed, cancelled]);
    assert!(
        s.load(completed).await.expect("load").is_some(),
        "a dry run deletes nothing"
    );
    let paged = s
        .purge(PurgeFilter {
            after: Some(completed),
            ..filter(10, true)
        })
        .await
        .expect("dry page");
    assert_eq!(paged, [failed, cancelled]);

    assert_eq!(
        s.purge(filter(2, false)).await.expect("purge"),
        [completed, failed]
    );
    assert_eq!(s.purge(filter(2, false)).await.expect("purge"), [cancelled]);
    assert!(s.purge(filter(2, false)).await.expect("purge").is_empty());
    for run in [completed, failed, cancelled] {
        assert!(s.load(run).await.expect("load").is_none(), "{run} is gone");
        assert!(
            matches!(s.inbox(run, 0).await, Err(StoreError::UnknownRun(_))),
            "{run}'s inbox is gone"
        );
    }
    let letters = s.dead_letters().await.expect("dead letters");
    assert!(letters.iter().all(|l| l.run != failed), "{letters:?}");
    assert_eq!(found(s, &[("customer_id", "c-1")], None).await, [running]);
    for run in [running, parked, recent, other, parent, child] {
        assert!(s.load(run).await.expect("load").is_some(), "{run} is kept");
    }
    // The child of a running parent is kept; every workflow's finished runs go without
    // a workflow named, except those named in `except`.
    let all = PurgeFilter {
        before: 5_000,
        except: vec!["refund".into()],
        limit: 10,
        ..PurgeFilter::default()
    };
    assert!(s.purge(all.clone()).await.expect("purge").is_empty());
    finish(s, parent, RunStatus::Cancelled, 3_000).await;
    assert_eq!(s.purge(all).await.expect("purge"), [parent, child]);
    assert!(s.load(other).await.expect("load").is_some());
    // A purged run's idempotency key names no run any more.
    let again = create(s, "charge", Some("evt-1")).await;
    assert!(matches!(again, Created::New { .. }), "{again:?}");
    assert_ne!(again.id(), cancelled);
    let verification = s.verify().await.expect("verify");
    assert!(verification.is_clean(), "{verification:?}");
}

/// What a run of [`every_filter_combination_lists_what_it_names`] is.
struct Listed {
    id: RunId,
    workflow: &'static str,
    status: RunStatus,
    search: Vec<(String, String)>,
}

pub(super) async fn every_filter_combination_lists_what_it_names(store: Arc<dyn Store>) {
    let statuses = [
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];
    let mut runs = Vec::new();
    for i in 0..12 {
        let workflow = if i % 5 < 2 { "a" } else { "b" };
        let status = statuses[i % statuses.len()];
        let customer = format!("c-{}", i % 3);
        let region = format!("r-{}", i % 2);
        let id = searched(
            &*store,
            workflow,
            &[("customer", &customer), ("region", &region)],
        )
        .await;
        if status != RunStatus::Running {
            store
                .commit(with_status(id, 1, status, None))
                .await
                .expect("finish");
        }
        let search = vec![("customer".into(), customer), ("region".into(), region)];
        runs.push(Listed {
            id,
            workflow,
            status,
            search,
        });
    }
    let pair = |name: &str, value: &str| (name.to_owned(), value.to_owned());
    let searches = [
        vec![],
        vec![pair("customer", "c-0")],
        vec![pair("customer", "c-1"), pair("region", "r-1")],
        vec![pair("customer", "c-9")],
    ];
    let mut asked = 0;
    for workflow in [None, Some("a"), Some("b"), Some("c")] {
        for status in [None, Some(RunStatus::Parked)]
            .into_iter()
            .chain(statuses.map(Some))
        {
            for search in &searches {
                for before in [None, Some(runs[7].id)] {
                    for limit in [None, Some(2)] {
                        let filter = RunFilter {
                            workflow: workflow.map(str::to_owned),
                            status,
                            before,
                            limit,
                            search: search.clone(),
                        };
                        let expected: Vec<RunId> = runs
                            .iter()
                            .rev()
                            .filter(|r| workflow.is_none_or(|w| r.workflow == w))
                            .filter(|r| status.is_none_or(|s| r.status == s))
                            .filter(|r| before.is_none_or(|b| r.id < b))
                            .filter(|r| search.iter().all(|p| r.search.contains(p)))
                            .take(limit.unwrap_or(usize::MAX))
                            .map(|r| r.id)
                            .collect();
                        let listed: Vec<RunId> = store
                            .runs(filter.clone())
                            .await
                            .expect("runs")
                            .into_iter()
                            .map(|r| r.id)
                            .collect();
                        assert_eq!(listed, expected, "{filter:?}");
                        asked += usize::from(!expected.is_empty());
                    }
                }
            }
        }
    }
    // The combinations above find runs often enough to tell a store that finds none.
    assert!(asked > 100, "only {asked} listings found runs");
}

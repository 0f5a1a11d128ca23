//! The open-task index: a row per open task, written and removed with the entries (and
//! statuses) that open and close it, paged soonest deadline first.

use std::sync::Arc;

use serde_json::json;

use super::{new_run, started, with_status};
use workflow_core::journal::{Event, Timestamp};
use workflow_core::store::tasks::{check_index, OpenTask, TaskCount, TaskFilter};
use workflow_core::store::{Commit, RunStatus, Store, StoreError};
use workflow_core::RunId;

fn opened(step: usize, assignee: &str, deadline: Timestamp, at: Timestamp) -> Event {
    Event::TaskOpened {
        step,
        assignee: assignee.to_owned(),
        prompt: Some(format!("decide step {step}")),
        deadline,
        at,
    }
}

fn decided(step: usize, at: Timestamp) -> Event {
    Event::TaskDecided {
        step,
        by: "ana@finance".to_owned(),
        decision: json!({ "approved": true, "comment": null }),
        inbox: None,
        via: None,
        at,
    }
}

async fn open(store: &dyn Store, filter: TaskFilter) -> Vec<OpenTask> {
    store.open_tasks(filter).await.expect("list open tasks")
}

fn keys(tasks: &[OpenTask]) -> Vec<(u64, usize)> {
    tasks.iter().map(|t| (t.run.0, t.step)).collect()
}

async fn append(store: &dyn Store, run: RunId, events: &[Event]) {
    let seq = journal_len(store, run).await;
    store
        .commit(Commit::events(run, seq, events, 3_000))
        .await
        .expect("append");
}

async fn journal_len(store: &dyn Store, run: RunId) -> u64 {
    let stored = store
        .load(run)
        .await
        .expect("load")
        .expect("the run exists");
    stored.events.len() as u64
}

async fn agrees(store: &dyn Store) {
    let mismatch = check_index(store).await.expect("check the index");
    assert!(
        mismatch.is_empty(),
        "the index disagrees with the journals: {mismatch:?}"
    );
}

/// Tasks opened at creation and by commits are listed, moved by escalations, filtered,
/// paged and counted, and gone once decided or expired.
pub(super) async fn tasks_are_indexed(store: Arc<dyn Store>) {
    let store = &*store;
    // A run whose first entries open a task, and two runs that open theirs later.
    let first = [started("refund", 1_000), opened(1, "finance", 9_000, 1_000)];
    let a = store
        .create_run(new_run("refund", None, &first))
        .await
        .expect("create")
        .id();
    let b_events = [started("refund", 1_100)];
    let b = store
        .create_run(new_run("refund", None, &b_events))
        .await
        .expect("create")
        .id();
    let c_events = [started("vendor", 1_200)];
    let c = store
        .create_run(new_run("vendor", None, &c_events))
        .await
        .expect("create")
        .id();
    append(
        store,
        b,
        &[
            opened(1, "finance", 5_000, 2_000),
            opened(2, "legal", 9_000, 2_000),
        ],
    )
    .await;
    append(store, c, &[opened(3, "finance", 7_000, 2_500)]).await;

    let all = open(store, TaskFilter::default()).await;
    assert_eq!(
        keys(&all),
        [(b.0, 1), (c.0, 3), (a.0, 1), (b.0, 2)],
        "soonest deadline first, then run, then step"
    );
    let task = &all[0];
    assert_eq!(task.workflow, "refund");
    assert_eq!(task.assignee, "finance");
    assert_eq!((task.deadline, task.opened_at), (5_000, 2_000));
    assert_eq!(task.prompt.as_deref(), Some("decide step 1"));
    assert!(!task.escalated);

    let finance = open(
        store,
        TaskFilter {
            assignees: Some(vec!["finance".to_owned()]),
            workflows: Some(vec!["refund".to_owned()]),
            ..TaskFilter::default()
        },
    )
    .await;
    assert_eq!(keys(&finance), [(b.0, 1), (a.0, 1)]);
    let page = open(
        store,
        TaskFilter {
            after: Some(all[1].key()),
            limit: Some(1),
            ..TaskFilter::default()
        },
    )
    .await;
    assert_eq!(keys(&page), [(a.0, 1)], "the page after the second task");
    let skipped = open(
        store,
        TaskFilter {
            offset: 3,
            limit: Some(10),
            ..TaskFilter::default()
        },
    )
    .await;
    assert_eq!(keys(&skipped), [(b.0, 2)]);
    let of_a = open(
        store,
        TaskFilter {
            runs: Some(vec![a, RunId(a.0 + 1_000)]),
            ..TaskFilter::default()
        },
    )
    .await;
    assert_eq!(keys(&of_a), [(a.0, 1)], "only the tasks of the runs named");
    let of_none = open(
        store,
        TaskFilter {
            runs: Some(Vec::new()),
            ..TaskFilter::default()
        },
    )
    .await;
    assert!(of_none.is_empty(), "no run named, no task: {of_none:?}");

    // An escalation moves the task (new assignee and deadline, first opening kept).
    append(
        store,
        b,
        &[Event::TaskEscalated {
            step: 1,
            to: "finance_leads".to_owned(),
            deadline: 9_500,
            at: 5_000,
        }],
    )
    .await;
    let leads = open(
        store,
        TaskFilter {
            assignees: Some(vec!["finance_leads".to_owned()]),
            ..TaskFilter::default()
        },
    )
    .await;
    assert_eq!(keys(&leads), [(b.0, 1)]);
    assert_eq!((leads[0].deadline, leads[0].opened_at), (9_500, 2_000));
    assert!(leads[0].escalated);

    let mut counts = store.task_counts().await.expect("count open tasks");
    counts.sort_by(|x, y| (&x.workflow, &x.assignee).cmp(&(&y.workflow, &y.assignee)));
    let count = |workflow: &str, assignee: &str, count: u64, oldest: Timestamp| TaskCount {
        workflow: workflow.to_owned(),
        assignee: assignee.to_owned(),
        count,
        oldest_opened_at: oldest,
    };
    assert_eq!(
        counts,
        [
            count("refund", "finance", 1, 1_000),
            count("refund", "finance_leads", 1, 2_000),
            count("refund", "legal", 1, 2_000),
            count("vendor", "finance", 1, 2_500),
        ]
    );
    agrees(store).await;

    // A delegation hands the task over, deadline and first opening kept.
    let before = open(store, TaskFilter::default())
        .await
        .into_iter()
        .find(|t| (t.run, t.step) == (b, 2))
        .expect("task 2 of b is open");
    append(
        store,
        b,
        &[Event::TaskDelegated {
            step: 2,
            by: before.assignee.clone(),
            to: "alice".to_owned(),
            inbox: None,
            at: 5_500,
        }],
    )
    .await;
    let alice = open(
        store,
        TaskFilter {
            assignees: Some(vec!["alice".to_owned()]),
            ..TaskFilter::default()
        },
    )
    .await;
    assert_eq!(keys(&alice), [(b.0, 2)]);
    assert_eq!(
        (alice[0].deadline, alice[0].opened_at, alice[0].escalated),
        (before.deadline, before.opened_at, false)
    );
    agrees(store).await;

    // Decided, expired: gone, in the same commit.
    append(store, b, &[decided(1, 6_000)]).await;
    append(store, c, &[Event::TaskExpired { step: 3, at: 7_000 }]).await;
    assert_eq!(
        keys(&open(store, TaskFilter::default()).await),
        [(a.0, 1), (b.0, 2)]
    );
    agrees(store).await;
}

/// A run that stops (finishes, parks, is cancelled) takes its tasks with it in the same
/// commit; a failed run put back to work gets them back; a refused commit changes nothing.
pub(super) async fn stopped_runs_drop_their_tasks(store: Arc<dyn Store>) {
    let store = &*store;
    let mut runs = Vec::new();
    for n in 0..4u64 {
        let events = [
            started("refund", 1_000 + n),
            opened(1, "finance", 9_000 + n, 1_000),
        ];
        let run = store
            .create_run(new_run("refund", None, &events))
            .await
            .expect("create")
            .id();
        runs.push(run);
    }
    assert_eq!(open(store, TaskFilter::default()).await.len(), 4);

    // A refused commit (wrong length) writes no index change either.
    let refused = store
        .commit(Commit::events(runs[0], 0, &[decided(1, 2_000)], 2_000))
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict { .. })));
    assert_eq!(open(store, TaskFilter::default()).await.len(), 4);

    store
        .commit(with_status(runs[0], 2, RunStatus::Failed, Some("boom")))
        .await
        .expect("fail");
    store
        .commit(with_status(
            runs[1],
            2,
            RunStatus::Parked,
            Some("spec changed"),
        ))
        .await
        .expect("park");
    store
        .commit(Commit {
            status: Some((RunStatus::Cancelled, None)),
            ..Commit::events(
                runs[2],
                2,
                &[Event::Cancelled {
                    by: "ops".to_owned(),
                    inbox: None,
                    at: 3_000,
                }],
                3_000,
            )
        })
        .await
        .expect("cancel");
    assert_eq!(
        keys(&open(store, TaskFilter::default()).await),
        [(runs[3].0, 1)]
    );
    // Entries written to a run that is not running open nothing.
    append(store, runs[1], &[opened(2, "legal", 9_000, 3_000)]).await;
    assert_eq!(open(store, TaskFilter::default()).await.len(), 1);
    agrees(store).await;

    // The failed run goes back to work: its task, still undecided, is open again.
    store
        .commit(Commit {
            status: Some((RunStatus::Running, Some("retried by ops"))),
            ..Commit::events(
                runs[0],
                2,
                &[Event::Retried {
                    by: "ops".to_owned(),
                    at: 4_000,
                }],
                4_000,
            )
        })
        .await
        .expect("retry");
    assert_eq!(
        keys(&open(store, TaskFilter::default()).await),
        [(runs[0].0, 1), (runs[3].0, 1)]
    );
    agrees(store).await;

    store
        .commit(with_status(runs[3], 2, RunStatus::Completed, None))
        .await
        .expect("complete");
    assert_eq!(
        keys(&open(store, TaskFilter::default()).await),
        [(runs[0].0, 1)]
    );
    assert_eq!(store.task_counts().await.expect("count").len(), 1);
    agrees(store).await;
}

//! Due schedule rows: a pass takes only the rows due by now, decides a batch of them in
//! one transaction, and two workers never decide the same row.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::*;
use workflow_core::store::{
    Decider, DueDecision, DueSchedules, ScheduleChange, ScheduleRow, ScheduleState, ScheduleUpdate,
};
use workflow_spec::Schedule;

const MINUTE: u64 = 60_000;

fn due(now: Timestamp, limit: usize) -> DueSchedules {
    DueSchedules {
        now,
        workflows: vec!["W".to_owned()],
        limit,
    }
}

/// A decider that moves each row past `now` (its next tick a minute on) and notes it.
fn advancing(now: Timestamp, seen: Arc<Mutex<Vec<String>>>) -> Decider {
    Arc::new(move |row: &ScheduleRow| {
        seen.lock().expect("lock").push(row.id.clone());
        DueDecision::Change {
            change: ScheduleChange {
                state: Some(ScheduleState {
                    after: now,
                    ..row.state.clone()
                }),
                paused: None,
                missed: None,
            },
            next_fire: Some((now / MINUTE + 1) * MINUTE),
        }
    })
}

fn ids(rows: &[workflow_core::store::DueRow]) -> Vec<&str> {
    rows.iter().map(|due| due.row.id.as_str()).collect()
}

pub(super) async fn only_due_rows_are_taken(store: Arc<dyn Store>) {
    let every_minute = Schedule::new("* * * * *");
    store
        .put_schedule("due", "W", &every_minute, 0)
        .await
        .expect("create");
    store
        .put_schedule("hourly", "W", &Schedule::new("0 * * * *"), 0)
        .await
        .expect("create");
    let paused = store
        .put_schedule("paused", "W", &every_minute, 0)
        .await
        .expect("create");
    assert!(store
        .update_schedule(
            "paused",
            paused.version,
            ScheduleChange {
                paused: Some(true),
                ..ScheduleChange::default()
            }
        )
        .await
        .expect("pause"));
    store
        .put_schedule("other", "Other", &every_minute, 0)
        .await
        .expect("create");

    // Before the first tick nothing is due; the next fire time is the first tick.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let batch = store
        .decide_schedules(
            due(MINUTE - 1, 10),
            advancing(MINUTE - 1, Arc::clone(&seen)),
        )
        .await
        .expect("decide");
    assert!(
        batch.rows.is_empty(),
        "nothing is due: {:?}",
        ids(&batch.rows)
    );
    assert!(seen.lock().expect("lock").is_empty());
    assert_eq!(batch.next, Some(MINUTE));

    // At the tick: only the due row of the asked workflows, not paused, is decided, under
    // its version, and the next fire time is its next tick.
    let batch = store
        .decide_schedules(due(MINUTE, 10), advancing(MINUTE, Arc::clone(&seen)))
        .await
        .expect("decide");
    assert_eq!(ids(&batch.rows), ["due"]);
    assert_eq!(*seen.lock().expect("lock"), ["due"]);
    let decided = &batch.rows[0];
    assert!(decided.decided);
    assert_eq!(decided.row.state.after, MINUTE);
    assert_eq!(decided.row.version, 2);
    assert_eq!(batch.next, Some(2 * MINUTE));
    let stored: BTreeMap<String, ScheduleRow> = store
        .schedules()
        .await
        .expect("list")
        .into_iter()
        .map(|row| (row.id.clone(), row))
        .collect();
    assert_eq!(stored["due"], decided.row, "the decision is what is stored");

    // Decided rows are not due again until their next tick.
    let batch = store
        .decide_schedules(
            due(MINUTE + 10, 10),
            advancing(MINUTE + 10, Arc::clone(&seen)),
        )
        .await
        .expect("decide");
    assert!(batch.rows.is_empty(), "{:?}", ids(&batch.rows));

    // A limited batch takes the earliest due rows first.
    store
        .put_schedule("late", "W", &every_minute, 150_000)
        .await
        .expect("create");
    let batch = store
        .decide_schedules(due(3 * MINUTE, 1), advancing(3 * MINUTE, Arc::clone(&seen)))
        .await
        .expect("decide");
    assert_eq!(
        ids(&batch.rows),
        ["due"],
        "due at 2 min, before `late` at 3 min"
    );

    // `Later` changes nothing.
    let before = store.schedules().await.expect("list");
    let batch = store
        .decide_schedules(
            due(3 * MINUTE, 10),
            Arc::new(|_: &ScheduleRow| DueDecision::Later(10 * MINUTE)),
        )
        .await
        .expect("decide");
    assert_eq!(ids(&batch.rows), ["late"]);
    assert!(!batch.rows[0].decided);
    assert_eq!(store.schedules().await.expect("list"), before);
}

pub(super) async fn two_workers_never_decide_the_same_row(store: Arc<dyn Store>) {
    let every_minute = Schedule::new("* * * * *");
    for i in 0..32 {
        store
            .put_schedule(&format!("s{i:02}"), "W", &every_minute, 0)
            .await
            .expect("create");
    }
    let workers = (0..2).map(|_| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let mut decided = Vec::new();
            loop {
                let batch = store
                    .decide_schedules(due(MINUTE, 4), advancing(MINUTE, Arc::clone(&seen)))
                    .await
                    .expect("decide");
                if batch.rows.is_empty() {
                    return decided;
                }
                for row in batch.rows {
                    if row.decided {
                        decided.push(row.row.id);
                    }
                }
                tokio::task::yield_now().await;
            }
        })
    });
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await.expect("joined"));
    }
    all.sort();
    let expected: Vec<String> = (0..32).map(|i| format!("s{i:02}")).collect();
    assert_eq!(all, expected, "each row is decided once, by one worker");
    for row in store.schedules().await.expect("list") {
        assert_eq!(row.version, 2, "{} was written once", row.id);
        assert_eq!(row.state.after, MINUTE);
    }
}

pub(super) async fn a_batch_of_changes_applies_each_under_its_version(store: Arc<dyn Store>) {
    let every_minute = Schedule::new("* * * * *");
    let a = store
        .put_schedule("a", "W", &every_minute, 0)
        .await
        .expect("create");
    store
        .put_schedule("b", "W", &every_minute, 0)
        .await
        .expect("create");
    let moved = |after: Timestamp| ScheduleChange {
        state: Some(ScheduleState {
            after,
            ..ScheduleState::default()
        }),
        ..ScheduleChange::default()
    };
    let update = |id: &str, version: u64, after: Timestamp| ScheduleUpdate {
        id: id.to_owned(),
        version,
        change: moved(after),
        next_fire: Some((after / MINUTE + 1) * MINUTE),
    };
    let applied = store
        .update_schedules(vec![
            update("a", a.version, 5 * MINUTE),
            update("b", 99, 5 * MINUTE),
            update("a", a.version + 1, 6 * MINUTE),
            update("gone", 1, 5 * MINUTE),
        ])
        .await
        .expect("update");
    assert_eq!(applied, [true, false, true, false]);
    let rows: BTreeMap<String, ScheduleRow> = store
        .schedules()
        .await
        .expect("list")
        .into_iter()
        .map(|row| (row.id.clone(), row))
        .collect();
    assert_eq!(rows["a"].version, a.version + 2);
    assert_eq!(rows["a"].state.after, 6 * MINUTE);
    assert_eq!(rows["b"].state.after, 0, "a stale version changes nothing");
    // The next fire times follow: `a` is not due before 7 min, `b` is.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let batch = store
        .decide_schedules(due(6 * MINUTE, 10), advancing(6 * MINUTE, seen))
        .await
        .expect("decide");
    assert_eq!(ids(&batch.rows), ["b"]);
}

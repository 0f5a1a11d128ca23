//! Schedule rows: a definition apart from its state, compare-and-set on the version.

use super::*;
use workflow_core::store::{MissedTicks, ScheduleChange, ScheduleState};
use workflow_spec::{Catchup, Schedule};

pub(super) async fn schedule_rows(store: Arc<dyn Store>) {
    assert!(store.schedules().await.expect("list").is_empty());
    let daily = Schedule::new("0 9 * * *").in_zone("Europe/Berlin");
    let created = store
        .put_schedule("report", "DailyReport", &daily, 1_000)
        .await
        .expect("create");
    assert_eq!(created.id, "report");
    assert_eq!(created.workflow, "DailyReport");
    assert_eq!(created.schedule, daily);
    assert!(!created.paused);
    assert_eq!(
        created.state.after, 1_000,
        "a new schedule's ticks start at its creation"
    );
    assert_eq!(created.created_at, 1_000);

    // State moves only under the version it was read at.
    let state = ScheduleState {
        after: 5_000,
        last_run: Some(RunId(7)),
        last_tick: Some(5_000),
        last_fired: Some(5_010),
        missed: 3,
        last_missed: Some(4_000),
        ..ScheduleState::default()
    };
    let change = ScheduleChange {
        state: Some(state.clone()),
        paused: None,
        missed: None,
    };
    assert!(store
        .update_schedule("report", created.version, change.clone())
        .await
        .expect("update"));
    assert!(
        !store
            .update_schedule("report", created.version, change)
            .await
            .expect("update"),
        "a second change under the same version is refused"
    );
    let rows = store.schedules().await.expect("list");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].state, state);
    assert!(rows[0].version > created.version);

    // A new definition keeps the state and the paused flag.
    assert!(store
        .update_schedule(
            "report",
            rows[0].version,
            ScheduleChange {
                state: None,
                paused: Some(true),
                missed: None,
            },
        )
        .await
        .expect("pause"));
    let mut hourly = Schedule::new("0 * * * *");
    hourly.catchup = Catchup::All { max: 3 };
    let replaced = store
        .put_schedule("report", "DailyReport", &hourly, 9_000)
        .await
        .expect("replace");
    assert_eq!(replaced.schedule, hourly);
    assert_eq!(replaced.state, state);
    assert!(replaced.paused);
    assert_eq!(replaced.created_at, 1_000);
    let listed = store.schedules().await.expect("list");
    assert_eq!(listed, vec![replaced.clone()]);

    // Several schedules, listed by id; deleting one leaves the others.
    store
        .put_schedule("alpha", "Other", &daily, 2_000)
        .await
        .expect("create");
    let ids: Vec<String> = store
        .schedules()
        .await
        .expect("list")
        .into_iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(ids, ["alpha", "report"]);
    assert!(store.delete_schedule("report").await.expect("delete"));
    assert!(!store.delete_schedule("report").await.expect("delete"));
    assert!(
        !store
            .update_schedule("report", replaced.version, ScheduleChange::default())
            .await
            .expect("update"),
        "a deleted schedule takes no change"
    );
    let ids: Vec<String> = store
        .schedules()
        .await
        .expect("list")
        .into_iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(ids, ["alpha"]);
}

pub(super) async fn one_compare_and_set_wins(store: Arc<dyn Store>) {
    let row = store
        .put_schedule("tick", "W", &Schedule::new("* * * * * *"), 0)
        .await
        .expect("create");
    let attempts = (0..8u64).map(|worker| {
        let store = Arc::clone(&store);
        let version = row.version;
        tokio::spawn(async move {
            let state = ScheduleState {
                after: 1_000 + worker,
                ..ScheduleState::default()
            };
            store
                .update_schedule(
                    "tick",
                    version,
                    ScheduleChange {
                        state: Some(state),
                        paused: None,
                        missed: Some(MissedTicks {
                            first: 10 + worker,
                            last: 20 + worker,
                            count: 2,
                            recorded_at: 1_000,
                        }),
                    },
                )
                .await
                .expect("update")
        })
    });
    let mut won = 0;
    for attempt in attempts {
        if attempt.await.expect("joined") {
            won += 1;
        }
    }
    assert_eq!(won, 1, "exactly one of eight workers records the tick");
    let missed = store.missed_ticks("tick", 100).await.expect("missed");
    assert_eq!(
        missed.len(),
        1,
        "only the winning change's missed ticks are recorded: {missed:?}"
    );
}

pub(super) async fn missed_ticks_go_with_the_winning_change(store: Arc<dyn Store>) {
    let row = store
        .put_schedule("nightly", "W", &Schedule::new("0 2 * * *"), 0)
        .await
        .expect("create");
    assert!(store
        .missed_ticks("nightly", 10)
        .await
        .expect("missed")
        .is_empty());
    let record = |first: u64, last: u64, count: u64| MissedTicks {
        first,
        last,
        count,
        recorded_at: last + 5,
    };
    let decide = |missed: MissedTicks, after: u64| ScheduleChange {
        state: Some(ScheduleState {
            after,
            missed: missed.count,
            last_missed: Some(missed.last),
            ..ScheduleState::default()
        }),
        paused: None,
        missed: Some(missed),
    };
    let three_days = record(86_400_000, 259_200_000, 3);
    assert!(store
        .update_schedule(
            "nightly",
            row.version,
            decide(three_days.clone(), 259_200_000)
        )
        .await
        .expect("update"));
    // A change under a stale version records nothing.
    assert!(!store
        .update_schedule("nightly", row.version, decide(record(1, 2, 2), 2))
        .await
        .expect("update"));
    let later = record(345_600_000, 432_000_000, 2);
    assert!(store
        .update_schedule(
            "nightly",
            row.version + 1,
            decide(later.clone(), 432_000_000)
        )
        .await
        .expect("update"));
    assert_eq!(
        store.missed_ticks("nightly", 10).await.expect("missed"),
        vec![later.clone(), three_days],
        "newest first"
    );
    assert_eq!(
        store.missed_ticks("nightly", 1).await.expect("missed"),
        vec![later]
    );
    // Another schedule's records are its own; deleting a schedule deletes its records.
    let other = store
        .put_schedule("other", "W", &Schedule::new("0 2 * * *"), 0)
        .await
        .expect("create");
    assert!(store
        .update_schedule("other", other.version, decide(record(7, 7, 1), 7))
        .await
        .expect("update"));
    assert!(store.delete_schedule("nightly").await.expect("delete"));
    assert!(store
        .missed_ticks("nightly", 10)
        .await
        .expect("missed")
        .is_empty());
    assert_eq!(
        store.missed_ticks("other", 10).await.expect("missed"),
        vec![record(7, 7, 1)]
    );
}

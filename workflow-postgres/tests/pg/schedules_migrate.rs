//! Schedule rows' next fire times on PostgreSQL: a database from before them migrates
//! with each existing row's next fire time computed from its definition and state.

use workflow_core::schedule::Schedule;
use workflow_core::store::checksum::{self, ScheduleText};
use workflow_core::store::{DueDecision, DueSchedules, ScheduleRow, Store};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_next_fire_times_migrates_with_them() {
    let Some(url) = pg_testing::server("a_database_from_before_next_fire_times").await else {
        return;
    };
    let schema = Schema::new(&url, "next_fire");
    schema.create_before_next_fire().await;
    let mut sql = String::new();
    for (id, paused) in [("minutely", false), ("paused", true)] {
        let definition = serde_json::to_string(&Schedule::new("* * * * *")).unwrap();
        let state = r#"{"after":0,"last_run":null,"last_tick":null,"last_fired":null,"missed":0,"skipped":0,"last_missed":null,"buffered":null,"active":[]}"#;
        let crc = checksum::schedule(&ScheduleText {
            id,
            workflow: "W",
            definition: &definition,
            paused,
            state,
            version: 1,
            created_at: 0,
        });
        sql.push_str(&format!(
            "INSERT INTO schedules (id, workflow, definition, paused, state, version, created_at, crc)
             VALUES ('{id}', 'W', '{definition}', {paused}, '{state}', 1, 0, {crc});\n"
        ));
    }
    schema.execute(&sql).await.expect("the older rows");

    let store: PgStore = schema.store().await;
    let due = |now| DueSchedules {
        now,
        workflows: vec!["W".to_owned()],
        limit: 10,
    };
    let taken = |batch: workflow_core::store::DueBatch| -> Vec<String> {
        batch.rows.into_iter().map(|due| due.row.id).collect()
    };
    let later = std::sync::Arc::new(|_: &ScheduleRow| DueDecision::Later(u64::MAX / 2));
    let batch = store
        .decide_schedules(due(59_999), later.clone())
        .await
        .expect("decide");
    assert_eq!(
        batch.next,
        Some(60_000),
        "the first tick after the state's `after`"
    );
    assert!(taken(batch).is_empty());
    let batch = store
        .decide_schedules(due(60_000), later)
        .await
        .expect("decide");
    assert_eq!(
        taken(batch),
        ["minutely"],
        "due at its tick; a paused row never is"
    );
    drop(store);
    schema.drop().await;
}

//! The open-task index on PostgreSQL: a database from before the index migrates with the
//! open tasks of its running runs indexed from their journals.

use workflow_core::journal::Event;
use workflow_core::store::{Store, TaskFilter};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

fn sql_text(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn opened(step: usize, assignee: &str, at: u64) -> Event {
    Event::TaskOpened {
        step,
        assignee: assignee.to_owned(),
        prompt: None,
        deadline: at + 1_000,
        at,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_the_index_migrates_with_its_open_tasks() {
    let Some(url) = pg_testing::server("a_database_from_before_the_index_migrates").await else {
        return;
    };
    let schema = Schema::new(&url, "tasks");
    schema.create_before_open_tasks().await;
    let decided = Event::TaskDecided {
        step: 1,
        by: "ana@finance".to_owned(),
        decision: serde_json::json!(true),
        inbox: None,
        via: None,
        at: 20,
    };
    let runs = [
        (
            "running",
            vec![opened(1, "finance", 10), opened(2, "legal", 11)],
        ),
        ("running", vec![opened(1, "finance", 10), decided]),
        ("completed", vec![opened(1, "finance", 10)]),
    ];
    let mut sql = String::new();
    for (n, (status, events)) in runs.iter().enumerate() {
        sql.push_str(&format!(
            "INSERT INTO runs (workflow, fingerprint, status, created_at, updated_at,
                               journal_len, crc)
             VALUES ('refund', 'fp1', '{status}', 1, 1, {}, 0);\n",
            events.len()
        ));
        for (seq, event) in events.iter().enumerate() {
            let text = sql_text(&serde_json::to_string(event).unwrap());
            sql.push_str(&format!(
                "INSERT INTO journal (run_id, seq, event, crc) VALUES ({}, {seq}, {text}, 0);\n",
                n + 1
            ));
        }
    }
    schema.execute(&sql).await.expect("the older rows");

    let store: PgStore = schema.store().await;
    let tasks = store
        .open_tasks(TaskFilter::default())
        .await
        .expect("open tasks");
    let found: Vec<(u64, usize, &str, &str)> = tasks
        .iter()
        .map(|t| (t.run.0, t.step, t.workflow.as_str(), t.assignee.as_str()))
        .collect();
    assert_eq!(
        found,
        [(1, 1, "refund", "finance"), (1, 2, "refund", "legal")]
    );
    drop(store);
    schema.drop().await;
}

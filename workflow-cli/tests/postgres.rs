//! `--store postgres://…`: the CLI on the database a running engine shares with others.
//! An engine drives a run to its human task; the CLI lists the task and approves it; the
//! engine, still running, takes the decision in and finishes the run; the CLI shows it
//! completed. An unreachable server is one line naming the host, never the password.
//!
//! Needs a PostgreSQL server (`WORKFLOW_TEST_DATABASE_URL`); without one the test prints a
//! line saying it was skipped (under `CI=true` it fails).

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use workflow_core::prelude::*;
use workflow_core::store::pg_testing::{self, Schema};

async fn draft(item: String) -> Result<String, StepError> {
    Ok(format!("draft of {item}"))
}

async fn publish(draft: String) -> Result<String, StepError> {
    Ok(format!("published {draft}"))
}

workflow! {
    /// Publish a draft once a moderator approved it.
    workflow Moderation(item: String) {
        step draft -> String { action: draft(item) }
        human review -> Approval {
            assignee: "mods",
            depends_on: [draft],
            timeout: 1h,
            on_timeout: abort,
        }
        step publish -> String { action: publish(draft), depends_on: [review] }
    }
}

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .args(args)
        .env_remove("WORKFLOW_STORE")
        .output()
        .expect("run the CLI");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_decides_a_task_on_a_postgres_store() {
    let Some(url) = pg_testing::server("the_cli_decides_a_task_on_a_postgres_store").await else {
        return;
    };
    let schema = Schema::new(&url, "cli");
    let engine = Engine::builder().store(schema.store().await).build();
    engine.register::<Moderation>(()).unwrap();
    let run = engine
        .start::<Moderation>(ModerationInput {
            item: "post 7".into(),
        })
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while engine.open_tasks().await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the review opens");

    let store = schema.url();
    let (code, stdout, stderr) = cli(&["tasks", "list", "--json", "--store", &store]);
    assert_eq!(code, 0, "{stderr}");
    let tasks: Value = serde_json::from_str(&stdout).unwrap();
    let tasks = tasks.as_array().expect("a list of tasks");
    assert_eq!(tasks.len(), 1, "{stdout}");
    assert_eq!(tasks[0]["step"], "review");

    let task = format!("{}/review", run.id());
    let (code, _, stderr) = cli(&[
        "tasks", "approve", &task, "--as", "ana@mods", "--store", &store,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let outputs = tokio::time::timeout(Duration::from_secs(30), run.outputs())
        .await
        .expect("the running engine takes the decision in")
        .unwrap();
    assert_eq!(outputs.publish, "published draft of post 7");
    assert_eq!(outputs.review.by, "ana@mods");

    let (code, stdout, stderr) = cli(&["runs", "list", "--json", "--store", &store]);
    assert_eq!(code, 0, "{stderr}");
    let runs: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(runs[0]["status"], "completed", "{stdout}");
    schema.drop().await;
}

#[test]
fn an_unreachable_database_is_named_without_its_password() {
    let (code, stdout, stderr) = cli(&[
        "runs",
        "list",
        "--store",
        "postgres://ana:s3cret@127.0.0.1:1/orders",
    ]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty());
    assert!(stderr.contains("127.0.0.1:1/orders"), "{stderr}");
    assert!(stderr.contains("cannot reach"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

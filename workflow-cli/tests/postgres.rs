//! `--store postgres://…`: the CLI on the database a running engine shares with others.
//! An engine drives a run to its human task; the CLI lists the task and approves it; the
//! engine, still running, takes the decision in and finishes the run; the CLI shows it
//! completed. `workflow check` verifies every checksum of the database and names a run
//! whose journal was changed behind the store's back. An unreachable server is one line
//! naming the host, never the password.
//!
//! Needs a PostgreSQL server (`WORKFLOW_TEST_DATABASE_URL`); without one the test prints a
//! line saying it was skipped (under `CI=true` it fails).

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use workflow_core::prelude::*;
use workflow_postgres::testing::{self as pg_testing, Schema};

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
    assert_eq!(runs["runs"][0]["status"], "completed", "{stdout}");
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_names_a_run_damaged_in_the_database() {
    let Some(url) = pg_testing::server("check_names_a_run_damaged_in_the_database").await else {
        return;
    };
    let schema = Schema::new(&url, "cli_check");
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
    let id = run.id().to_string();
    let store = schema.url();

    let (code, stdout, stderr) = cli(&["check", "--json", "--store", &store]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["ok"], true, "{stdout}");
    assert!(report["rows"].as_u64().unwrap() >= 5, "{stdout}");
    let (code, stdout, _) = cli(&["check", "--store", &store]);
    assert_eq!(code, 0);
    assert!(stdout.contains("ok: every checksum matches"), "{stdout}");
    // A URL naming several hosts, as libpq writes it: the one that answers is used.
    let several = match store.find('@') {
        Some(at) => format!("{}127.0.0.1:1,{}", &store[..=at], &store[at + 1..]),
        None => store.replacen("://", "://127.0.0.1:1,", 1),
    };
    let (code, stdout, stderr) = cli(&["check", "--store", &several]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("ok: every checksum matches"), "{stdout}");

    // The item the run was started on, changed in the database behind the store's back.
    schema
        .execute(&format!(
            "UPDATE journal SET event = replace(event, 'post 7', 'post 8')
             WHERE run_id = {} AND seq = 0",
            run.id().0
        ))
        .await
        .unwrap();
    let (code, stdout, stderr) = cli(&["check", "--store", &store]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "damaged: journal {id}/0: its checksum does not match"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("damaged runs (engines do not drive them): {id}")),
        "{stdout}"
    );
    assert!(
        stderr.contains("is damaged: 1 damaged row(s) in 1 run(s)"),
        "{stderr}"
    );
    let (code, _, stderr) = cli(&["runs", "show", &id, "--store", &store]);
    assert_eq!(code, 1);
    assert!(stderr.contains("journal entry 0 is damaged"), "{stderr}");

    let (code, stdout, _) = cli(&["check", "--json", "--store", &store]);
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["ok"], false, "{stdout}");
    assert_eq!(report["damaged_runs"], serde_json::json!([id]), "{stdout}");
    assert_eq!(report["damaged"][0]["table"], "journal", "{stdout}");
    assert_eq!(report["damaged"][0]["key"], format!("{id}/0"), "{stdout}");
    drop(engine);
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

/// Set when the long step's future is dropped unfinished.
static LONG_DROPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// Set when the external step saw `ctx.cancelled()`.
static EFFECT_TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

struct Dropped;

impl Drop for Dropped {
    fn drop(&mut self) {
        LONG_DROPPED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

async fn long(item: String) -> Result<String, StepError> {
    let guard = Dropped;
    tokio::time::sleep(Duration::from_secs(120)).await;
    std::mem::forget(guard);
    Ok(item)
}

async fn notify(ctx: &StepContext, item: String) -> Result<String, StepError> {
    tokio::select! {
        () = ctx.cancelled() => {
            EFFECT_TOLD.store(true, std::sync::atomic::Ordering::SeqCst);
            Err(StepError::permanent("withdrawn: the run was cancelled"))
        }
        () = tokio::time::sleep(Duration::from_secs(120)) => Ok(item),
    }
}

workflow! {
    /// Two steps that would take two minutes: one internal, one an external effect.
    workflow Slow(item: String) {
        step long -> String { action: long(item) }
        step notify -> String { action: notify(ctx, item), effect: external }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_from_the_cli_stops_the_steps_another_worker_runs() {
    let Some(url) =
        pg_testing::server("a_cancel_from_the_cli_stops_the_steps_another_worker_runs").await
    else {
        return;
    };
    let schema = Schema::new(&url, "cli_cancel");
    let engine = Engine::builder().store(schema.store().await).build();
    engine.register::<Slow>(()).unwrap();
    let run = engine
        .start::<Slow>(SlowInput {
            item: "report".into(),
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let id = run.id().to_string();
    let (code, stdout, stderr) = cli(&["runs", "cancel", &id, "--store", &schema.url()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // The worker takes the cancel in from the store and stops both steps long before
    // their two minutes.
    let outcome = tokio::time::timeout(Duration::from_secs(30), run.outputs())
        .await
        .expect("the cancelled run settles within the grace period");
    let error = outcome.err();
    assert!(matches!(error, Some(RunError::Cancelled(_))), "{error:?}");
    assert!(LONG_DROPPED.load(std::sync::atomic::Ordering::SeqCst));
    assert!(EFFECT_TOLD.load(std::sync::atomic::Ordering::SeqCst));
    let view = run.inspect().await.unwrap();
    let states: Vec<&str> = view.steps.iter().map(|s| s.state.name()).collect();
    assert_eq!(states, ["cancelled", "failed"], "{view:?}");
    let (code, stdout, stderr) = cli(&["runs", "show", &id, "--store", &schema.url()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("cancelled"), "{stdout}");
    engine.shutdown();
    schema.drop().await;
}

//! `workflow runs list --where` and `workflow runs purge` on a SQLite store.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use workflow_core::journal::Event;
use workflow_core::store::{Commit, NewRun, RunStatus, Store};
use workflow_core::RunId;
use workflow_sqlite::SqliteStore;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn workflow(db: &Path, args: &[&str]) -> Out {
    let output = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .arg("--store")
        .arg(db)
        .args(args)
        .env_remove("WORKFLOW_STORE")
        .output()
        .expect("run the workflow binary");
    Out {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn json_of(out: Out) -> Value {
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    serde_json::from_str(&out.stdout).expect("JSON")
}

fn listed(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["run"].as_str().expect("id").to_owned())
        .collect()
}

fn temp_db(name: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "workflow-cli-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join("runs.db")
}

/// Three runs of `Charge` with search values, created at `at`: the first two finished
/// at `at`, the third still running.
fn populate(db: &Path, at: u64) -> Vec<RunId> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let store = SqliteStore::open(db).expect("open");
        store
            .put_spec("fp", "Charge", "{}", at)
            .await
            .expect("spec");
        let mut runs = Vec::new();
        for (n, customer) in [(1, "c-42"), (2, "c-42"), (3, "c-42")] {
            let events = [Event::RunStarted {
                workflow: "Charge".into(),
                fingerprint: "fp".into(),
                input: json!({ "order": { "id": n, "customer_id": customer } }),
                seed: n,
                trace_id: format!("{n:016x}"),
                parent_span: None,
                dry_run: false,
                deadline: None,
                at,
            }];
            let search = vec![
                ("customer_id".to_owned(), customer.to_owned()),
                ("id".to_owned(), n.to_string()),
            ];
            let run = store
                .create_run(NewRun {
                    workflow: "Charge",
                    fingerprint: "fp",
                    idempotency_key: None,
                    events: &events,
                    parent: None,
                    owner: None,
                    supersedes: None,
                    at,
                    search: &search,
                })
                .await
                .expect("create")
                .id();
            if n < 3 {
                store
                    .commit(Commit {
                        status: Some((RunStatus::Completed, None)),
                        ..Commit::events(run, 1, &[], at)
                    })
                    .await
                    .expect("finish");
            }
            runs.push(run);
        }
        runs
    })
}

#[test]
fn runs_are_listed_by_search_values_and_finished_ones_purged() {
    let db = temp_db("purge");
    // Ten days ago.
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        - 10 * 86_400_000;
    let runs = populate(&db, at);
    let ids: Vec<String> = runs.iter().map(ToString::to_string).collect();

    let page = json_of(workflow(
        &db,
        &["--json", "runs", "list", "--where", "customer_id=c-42"],
    ));
    assert_eq!(
        listed(&page),
        [ids[2].clone(), ids[1].clone(), ids[0].clone()]
    );
    let page = json_of(workflow(
        &db,
        &[
            "--json",
            "runs",
            "list",
            "--where",
            "customer_id=c-42",
            "--where",
            "id=2",
        ],
    ));
    assert_eq!(listed(&page), [ids[1].clone()]);
    let page = json_of(workflow(
        &db,
        &["--json", "runs", "list", "--where", "id=9"],
    ));
    assert!(listed(&page).is_empty());
    let bad = workflow(&db, &["runs", "list", "--where", "customer_id"]);
    assert_eq!(bad.code, 2, "a usage error: {}", bad.stderr);
    assert!(bad.stderr.contains("name=value"), "{}", bad.stderr);

    // Nothing finished more than 30 days ago.
    let dry = json_of(workflow(
        &db,
        &["--json", "runs", "purge", "--before", "30d", "--dry-run"],
    ));
    assert_eq!(dry["count"], 0);
    let dry = json_of(workflow(
        &db,
        &["--json", "runs", "purge", "--before", "7d", "--dry-run"],
    ));
    assert_eq!(dry["count"], 2, "{dry}");
    assert_eq!(dry["runs"], json!([&ids[0], &ids[1]]));
    let page = json_of(workflow(&db, &["--json", "runs", "list"]));
    assert_eq!(listed(&page).len(), 3, "a dry run deletes nothing");

    let purged = workflow(&db, &["runs", "purge", "--before", "7d", "--batch", "1"]);
    assert_eq!(purged.code, 0, "{}", purged.stderr);
    assert!(
        purged.stdout.starts_with("purged 2 finished run(s)"),
        "{}",
        purged.stdout
    );
    assert_eq!(
        purged
            .stderr
            .lines()
            .filter(|l| l.starts_with("purged 1 run(s)"))
            .count(),
        2,
        "one line per batch: {}",
        purged.stderr
    );
    let page = json_of(workflow(
        &db,
        &["--json", "runs", "list", "--where", "customer_id=c-42"],
    ));
    assert_eq!(listed(&page), [ids[2].clone()], "the running run is kept");
    let checked = workflow(&db, &["check"]);
    assert_eq!(checked.code, 0, "{}\n{}", checked.stdout, checked.stderr);

    let bad = workflow(&db, &["runs", "purge", "--before", "someday"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("is not a time"), "{}", bad.stderr);
    let _ = std::fs::remove_dir_all(db.parent().expect("dir"));
}

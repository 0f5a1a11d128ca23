//! `workflow runs show` says what a run waits for under flow control: a run whose key is
//! at its limit names the key, the slots in use and the run holding them.

use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use workflow_core::prelude::*;
use workflow_sqlite::SqliteStore;

workflow_core::workflow! {
    workflow Review(customer: String) {
        concurrency: { key: customer, limit: 1 },
        human review -> Approval { assignee: "ops", timeout: 48h, on_timeout: abort }
    }
}

fn show(db: &std::path::Path, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .arg("--store")
        .arg(db)
        .args(args)
        .env_remove("WORKFLOW_STORE")
        .output()
        .expect("run the workflow binary");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn runs_show_names_the_key_and_who_holds_its_slot() {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let db = std::env::temp_dir().join(format!(
        "workflow-cli-flow-{}-{nanos}.db",
        std::process::id()
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let (first, second) = runtime.block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(&db).expect("a store"))
            .build();
        engine.register::<Review>(()).expect("register");
        engine.resume_all().await.expect("resume");
        let input = |customer: &str| ReviewInput {
            customer: customer.to_owned(),
        };
        let first = engine
            .start::<Review>(input("customer-42"))
            .await
            .expect("start");
        let second = engine
            .start::<Review>(input("customer-42"))
            .await
            .expect("start");
        // The first is admitted and waits for its review; the second waits for the slot.
        let until = Instant::now() + Duration::from_secs(30);
        while engine
            .store()
            .load(first.id())
            .await
            .unwrap()
            .unwrap()
            .events
            .len()
            < 2
        {
            assert!(Instant::now() < until, "the first run was never admitted");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (first.id(), second.id())
    });
    let shown = show(&db, &["runs", "show", &second.to_string()]);
    assert!(
        shown.contains(&format!(
            "waits:    waiting for a slot of key customer-42 (Review): 1 of 1 in use by {first}"
        )),
        "{shown}"
    );
    let json: Value =
        serde_json::from_str(&show(&db, &["--json", "runs", "show", &second.to_string()]))
            .expect("JSON");
    assert_eq!(
        json["waits_for"][1], "queued: priority 0, 0 queued ahead of it",
        "{json}"
    );
    let holder = show(&db, &["runs", "show", &first.to_string()]);
    assert!(!holder.contains("waits:"), "{holder}");
    drop(runtime);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}

#[test]
fn runs_show_of_a_run_queued_before_any_worker_says_it_waits_for_a_worker() {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let db = std::env::temp_dir().join(format!(
        "workflow-cli-flow-queued-{}-{nanos}.db",
        std::process::id()
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // An intake-only engine queues the run; no worker has `Review` registered, so nothing
    // admits it and no run holds a slot of its key.
    let queued = runtime.block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(&db).expect("a store"))
            .intake_only()
            .build();
        let run = engine
            .enqueue::<Review>(
                ReviewInput {
                    customer: "customer-7".to_owned(),
                },
                StartOptions::default(),
            )
            .await
            .expect("queued");
        run.id()
    });
    let shown = show(&db, &["runs", "show", &queued.to_string()]);
    assert!(
        shown.contains(
            "waits:    queued for key customer-7 (Review): its slots are free (0 of 1 in use), so it waits for a worker that registers this version of Review to admit it\n"
        ),
        "{shown}"
    );
    assert!(!shown.contains("queued for a slot"), "{shown}");
    drop(runtime);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}

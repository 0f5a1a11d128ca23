//! The `workflow` binary end to end.
//!
//! `diagram` runs on fixture files written here. The store commands run on SQLite stores
//! populated by the real engine with real time (the SQLite store's writer thread does not
//! mix with tokio's paused clock): a run waits on a human task, the engine is dropped, the
//! task is decided from the command line, and a new engine resumes the run to the end; a
//! run that fails is listed as a dead letter, retried from the command line and resumed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use workflow_core::prelude::*;
use workflow_core::testing;
use workflow_sqlite::SqliteStore;

// ---------------------------------------------------------------- workflows

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
            prompt: "Publish this draft?",
        }
        step publish -> String { action: publish(draft), depends_on: [review] }
    }
}

/// Calls of `check`: the first fails for good, the next succeed.
static CHECKS: AtomicUsize = AtomicUsize::new(0);

async fn fetch(item: String) -> Result<String, StepError> {
    Ok(format!("fetched {item}"))
}

async fn check(fetched: String) -> Result<String, StepError> {
    if CHECKS.fetch_add(1, Ordering::SeqCst) == 0 {
        Err(StepError::permanent("the item is malformed"))
    } else {
        Ok(format!("checked {fetched}"))
    }
}

workflow! {
    /// Fetch an item and check it; the first check fails for good.
    workflow Screening(item: String) {
        step fetch -> String { action: fetch(item) }
        step check -> String { action: check(fetch) }
    }
}

/// A decision type of its own: a triage level.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tier {
    level: u8,
    by: String,
}

impl From<Approval> for Tier {
    fn from(approval: Approval) -> Self {
        Tier {
            level: 0,
            by: approval.by,
        }
    }
}

async fn route(tier: Tier) -> Result<String, StepError> {
    Ok(format!("level {} by {}", tier.level, tier.by))
}

workflow! {
    /// On-call picks a level; the ticket is routed by it.
    workflow Triage() {
        human triage -> Tier { assignee: "oncall", timeout: 1h, on_timeout: abort }
        step route -> String { action: route(triage) }
    }
}

// ---------------------------------------------------------------- helpers

/// A fresh directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!(
            "workflow-cli-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create the temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.file(name);
        std::fs::write(&path, text).expect("write a fixture");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one run of the binary did.
#[derive(Debug)]
struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn ok(self) -> String {
        assert_eq!(self.code, 0, "expected success, got {self:#?}");
        assert!(!self.stderr.contains("panicked"), "{self:#?}");
        self.stdout
    }

    /// Asserts a failure with exit code 1 and one of its stderr lines containing `text`.
    fn fails_with(self, text: &str) -> String {
        assert_eq!(self.code, 1, "expected exit code 1, got {self:#?}");
        assert!(self.stderr.contains(text), "expected {text:?} in {self:#?}");
        assert!(!self.stderr.contains("panicked"), "{self:#?}");
        assert!(self.stdout.is_empty(), "{self:#?}");
        self.stderr
    }

    fn json(self) -> Value {
        let stdout = self.ok();
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
    }
}

/// Runs `workflow ARGS`, without `WORKFLOW_STORE` from the environment.
fn workflow<I, S>(args: I) -> Out
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let output = Command::new(env!("CARGO_BIN_EXE_workflow"))
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

/// Runs `workflow --store DB ARGS`.
fn with_store(db: &Path, args: &[&str]) -> Out {
    let mut all = vec!["--store".to_owned(), db.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    workflow(all)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

const WAIT: Duration = Duration::from_secs(30);

/// A new engine on the store at `db` resumes the one unfinished run `id` of `W` and drives
/// it to the end; its outputs.
fn resume_to_end<W: Workflow<Env = ()>>(db: &Path, id: RunId) -> W::Outputs {
    resume_to_end_of::<W>(db, id, 1)
}

/// [`resume_to_end`] on a store with `unfinished` unfinished runs of `W` (all resumed).
fn resume_to_end_of<W: Workflow<Env = ()>>(db: &Path, id: RunId, unfinished: usize) -> W::Outputs {
    runtime().block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(db).expect("reopen"))
            .build();
        engine.register::<W>(()).expect("register");
        assert_eq!(engine.resume_all().await.expect("resume"), unfinished);
        let run = engine.handle::<W>(id).await.expect("handle");
        tokio::time::timeout(WAIT, run.outputs())
            .await
            .expect("in time")
            .expect("outputs")
    })
}

/// Starts a `Moderation` run on the store at `db` and waits until its review is open.
/// Dropping the returned runtime stops the engine.
fn start_moderation(db: &Path) -> (tokio::runtime::Runtime, Engine, RunHandle<Moderation>) {
    let rt = runtime();
    let (engine, run) = rt.block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(db).expect("open the store"))
            .build();
        engine.register::<Moderation>(()).expect("register");
        let run = engine
            .start::<Moderation>(ModerationInput {
                item: "post-1".into(),
            })
            .await
            .expect("start");
        testing::wait_for_task(&engine, run.id(), "review", WAIT)
            .await
            .expect("the review opens");
        (engine, run)
    });
    (rt, engine, run)
}

/// A store with one Moderation run waiting for its review, and no engine left running.
fn moderation_waiting(db: &Path) -> RunId {
    let (rt, engine, run) = start_moderation(db);
    let id = run.id();
    drop((run, engine));
    drop(rt);
    id
}

// ---------------------------------------------------------------- diagram

const FIXTURE: &str = r#"//! Two workflows: one in a module, one in a function body.
use workflow_core::prelude::*;

mod moderation {
    use super::*;

    workflow! {
        /// Publish after review.
        pub workflow Moderation(item: String) {
            step draft -> String { action: drafts::make(item) }
            human review -> Approval {
                assignee: "mods",
                depends_on: [draft],
                timeout: 1h,
                on_timeout: abort,
            }
            step publish -> () {
                action: drafts::publish(draft),
                depends_on: [review],
                condition: review.approved,
            }
        }
    }
}

fn main() {
    workflow_core::workflow! {
        workflow Cleanup() {
            step sweep -> u32 { action: sweep() }
        }
    }
}
"#;

const BROKEN: &str = r#"use workflow_core::prelude::*;

workflow! {
    workflow Broken(item: String) {
        step a -> String { action: make(item) }
        step b -> () { action: use_it(a), depends_on: [c] }
    }
}
"#;

#[test]
fn diagram_draws_each_format_from_a_source_file() {
    let temp = TempDir::new("diagram");
    let file = temp.write("fixture.rs", FIXTURE);
    let file = file.to_str().expect("a UTF-8 path");

    let mermaid = workflow(["diagram", file, "--workflow", "Moderation"]).ok();
    assert!(mermaid.starts_with("flowchart TD\n"), "{mermaid}");
    assert!(mermaid.contains("review{{\"review: Approval"), "{mermaid}");
    assert!(
        mermaid.contains("|\"if review.approved\"| publish"),
        "{mermaid}"
    );

    let dot = workflow([
        "diagram",
        file,
        "--workflow",
        "Moderation",
        "--format",
        "dot",
    ])
    .ok();
    assert!(dot.starts_with("digraph"), "{dot}");
    assert!(dot.contains("review"), "{dot}");

    let svg = workflow(["diagram", file, "--workflow", "Cleanup", "--format", "svg"]).ok();
    assert!(
        svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{svg}"
    );
    assert!(svg.contains("sweep: u32"), "{svg}");
    assert!(svg.ends_with("</svg>\n"));

    // -o writes the file and nothing to stdout.
    let out = temp.file("moderation.mmd");
    let printed = workflow([
        "diagram",
        file,
        "--workflow",
        "Moderation",
        "-o",
        out.to_str().expect("UTF-8"),
    ])
    .ok();
    assert_eq!(printed, "");
    assert_eq!(std::fs::read_to_string(&out).expect("written"), mermaid);

    // --json wraps the diagram.
    let json = workflow(["--json", "diagram", file, "--workflow", "Cleanup"]).json();
    assert_eq!(json["workflow"], "Cleanup");
    assert_eq!(json["format"], "mermaid");
    assert!(json["diagram"]
        .as_str()
        .is_some_and(|d| d.starts_with("flowchart TD")));

    // Two workflows: one must be chosen; a typo gets a suggestion.
    workflow(["diagram", file]).fails_with("declares 2 workflows (`Moderation`, `Cleanup`)");
    workflow(["diagram", file, "--workflow", "Moderatoin"])
        .fails_with("did you mean `Moderation`?");
}

#[test]
fn diagram_of_this_file_matches_the_macros_constants() {
    let this = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cli.rs");
    let mermaid = workflow(["diagram", this, "--workflow", "Moderation"]).ok();
    assert_eq!(mermaid, Moderation::MERMAID);
    let dot = workflow([
        "diagram",
        this,
        "--workflow",
        "Screening",
        "--format",
        "dot",
    ])
    .ok();
    assert_eq!(dot, Screening::DOT);
}

#[test]
fn diagram_without_a_file_draws_the_workflow_the_store_holds() {
    let temp = TempDir::new("diagram-store");
    let db = temp.file("runs.db");
    // An engine registers the workflow, which records its spec in the store.
    runtime().block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(&db).expect("a store"))
            .build();
        engine.register::<Moderation>(()).expect("register");
        engine.resume_all().await.expect("resume");
    });
    let mermaid = with_store(&db, &["diagram", "--workflow", "Moderation"]).ok();
    assert_eq!(mermaid, Moderation::MERMAID);
    let json = with_store(&db, &["--json", "diagram", "--workflow", "Moderation"]).json();
    assert_eq!(json["fingerprint"], Moderation::FINGERPRINT, "{json}");
    assert_eq!(json["diagram"], Moderation::MERMAID, "{json}");
    with_store(&db, &["diagram", "--workflow", "Nope"])
        .fails_with("the store holds no spec of workflow `Nope`");
    // Neither a file nor a name: a usage error.
    let usage = workflow(["diagram"]);
    assert_eq!(usage.code, 2, "{usage:?}");
    // The help says what the command reads, and that `--store` serves the file-less form.
    let help = workflow(["diagram", "--help"]).ok();
    assert!(help.contains("spec file"), "{help}");
    assert!(
        help.contains("Without FILE, `--workflow NAME` draws"),
        "{help}"
    );
    assert!(help.contains("--store"), "{help}");
}

#[test]
fn serve_help_says_it_starts_runs_as_it_does() {
    let help = workflow(["serve", "--help"]).ok();
    assert!(help.contains("`POST /api/runs` queues a run"), "{help}");
    assert!(!help.contains("starting runs need"), "{help}");
}

#[test]
fn diagram_errors_are_one_line_each_with_a_location() {
    let temp = TempDir::new("diagram-errors");
    let broken = temp.write("broken.rs", BROKEN);
    let broken = broken.to_str().expect("UTF-8");

    // The unknown dependency `c`, located by line and column (both from 1).
    let (line, text) = BROKEN
        .lines()
        .enumerate()
        .find(|(_, text)| text.contains("[c]"))
        .expect("the fixture's mistake");
    let column = text.find("[c]").expect("found") + 2;
    let stderr = workflow(["diagram", broken]).fails_with("unknown step `c`");
    assert!(
        stderr.contains(&format!("{broken}:{}:{column}: ", line + 1)),
        "{stderr}"
    );
    assert!(stderr.contains("workflow `Broken`"), "{stderr}");

    // As JSON, on stderr.
    let out = workflow(["--json", "diagram", broken]);
    assert_eq!(out.code, 1);
    let error: Value = serde_json::from_str(out.stderr.trim()).expect("a JSON error");
    assert_eq!(error["errors"][0]["line"], line + 1);
    assert_eq!(error["errors"][0]["column"], column);

    let none = temp.write("none.rs", "fn main() { println!(\"no workflow here\"); }\n");
    workflow(["diagram", none.to_str().expect("UTF-8")]).fails_with("no `workflow!` invocation in");

    let missing = temp.file("missing.rs");
    workflow(["diagram", missing.to_str().expect("UTF-8")]).fails_with("no file");

    let invalid = temp.write("invalid.rs", "fn main( {\n");
    workflow(["diagram", invalid.to_str().expect("UTF-8")]).fails_with("is not valid Rust");

    // Usage errors are clap's: exit code 2.
    let usage = workflow(["diagram", broken, "--format", "png"]);
    assert_eq!(usage.code, 2, "{usage:#?}");
    let usage = workflow(["diagram"]);
    assert_eq!(usage.code, 2, "{usage:#?}");
}

// ---------------------------------------------------------------- store commands

#[test]
fn a_missing_store_is_an_error_and_is_not_created() {
    let temp = TempDir::new("missing-store");
    let db = temp.file("nothing.db");
    for args in [
        &["runs", "list"][..],
        &["tasks", "list"],
        &["dead", "list"],
        &["runs", "show", "1"],
    ] {
        with_store(&db, args).fails_with(&format!("no store at {}", db.display()));
    }
    assert!(!db.exists());

    // The store path also comes from WORKFLOW_STORE.
    let out = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .args(["runs", "list"])
        .env("WORKFLOW_STORE", &db)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no store at"));
    assert!(!db.exists());
}

#[test]
fn a_human_task_is_decided_from_the_command_line_and_the_run_resumes() {
    let temp = TempDir::new("approve");
    let db = temp.file("runs.db");
    let (rt, engine, run) = start_moderation(&db);
    let id = run.id();
    drop((run, engine));
    drop(rt); // the engine stops with its runtime

    let task = format!("{id}/review");
    let listed = with_store(&db, &["tasks", "list"]).ok();
    assert!(listed.contains(&task), "{listed}");
    assert!(listed.contains("mods"), "{listed}");
    assert!(listed.contains("Publish this draft?"), "{listed}");
    let tasks = with_store(&db, &["--json", "tasks", "list"]).json();
    assert_eq!(tasks.as_array().map(Vec::len), Some(1), "{tasks}");
    assert_eq!(tasks[0]["task"], task.as_str());
    assert_eq!(tasks[0]["assignee"], "mods");
    assert_eq!(tasks[0]["overdue"], false);

    // Decisions are checked by the run's machine here, and left in the run's inbox: the
    // engine that drives the run admits the approver with its authorizer, and checks the
    // decision's type, when it takes them in.
    let submitted = with_store(&db, &["tasks", "approve", &task, "--as", "eve@other"]).ok();
    assert!(
        submitted.contains("submitted (inbox message"),
        "{submitted}"
    );
    with_store(
        &db,
        &[
            "tasks",
            "decide",
            &task,
            "--as",
            "ana@mods",
            "--decision",
            "{\"tier\": 2}",
        ],
    )
    .ok();
    // `7/review` works as well as `run-7/review`.
    let short = format!("{}/review", id.0);
    let approved = with_store(
        &db,
        &[
            "tasks",
            "approve",
            &short,
            "--as",
            "ana@mods",
            "--comment",
            "fine",
        ],
    )
    .ok();
    assert!(approved.contains("approved"), "{approved}");
    assert!(approved.contains("ana@mods"), "{approved}");
    // Nothing is decided until the engine takes the messages in.
    assert!(with_store(&db, &["tasks", "list"]).ok().contains(&task));

    // A new engine on the same file takes the decision in and finishes the run.
    let outputs = resume_to_end::<Moderation>(&db, id);
    assert!(outputs.review.approved);
    assert_eq!(outputs.review.by, "ana@mods");
    assert_eq!(outputs.review.comment.as_deref(), Some("fine"));
    assert_eq!(outputs.publish, "published draft of post-1");

    let shown = with_store(&db, &["runs", "show", &id.to_string()]).ok();
    assert!(
        shown.starts_with(&format!("{id}  Moderation  completed\n")),
        "{shown}"
    );
    assert!(shown.contains("review: task opened for mods"), "{shown}");
    assert!(
        shown.contains("review: decided by ana@mods: approved (\"fine\")"),
        "{shown}"
    );
    assert!(
        shown.contains("review: message from eve@other refused (unauthorized)"),
        "{shown}"
    );
    assert!(
        shown.contains("review: message from ana@mods refused (wrong_type)"),
        "{shown}"
    );
    assert!(shown.contains("publish: succeeded"), "{shown}");
    assert!(
        shown.contains("decisions:\n  review: approved (\"fine\") by ana@mods"),
        "{shown}"
    );

    let json = with_store(&db, &["--json", "runs", "show", &id.0.to_string()]).json();
    assert_eq!(json["status"], "completed");
    assert_eq!(json["machine_status"], "completed");
    assert_eq!(json["decisions"][0]["by"], "ana@mods");
    assert_eq!(json["decisions"][0]["decision"]["approved"], true);
    assert_eq!(json["timeline"].as_array().map(Vec::len), Some(9), "{json}");

    let drawn = with_store(&db, &["runs", "show", &id.to_string(), "--diagram"]).ok();
    assert!(drawn.starts_with(Moderation::MERMAID), "{drawn}");
    assert!(drawn.contains("class draft,review,publish done"), "{drawn}");

    let listed = with_store(&db, &["runs", "list"]).ok();
    assert!(listed.contains(&format!("{id}  ")), "{listed}");
    assert!(listed.contains("Moderation  completed"), "{listed}");
    let page = with_store(&db, &["--json", "runs", "list", "--status", "completed"]).json();
    assert_eq!(page["runs"][0]["run"], id.to_string().as_str());
    assert_eq!(page["more"], false);
    assert!(page["next"].is_null(), "{page}");
    assert_eq!(
        with_store(&db, &["runs", "list", "--status", "failed"]).ok(),
        "no runs\n"
    );

    // Only once; then deciding a finished run's task, or retrying a run that did not fail.
    with_store(&db, &["tasks", "reject", &task, "--as", "bob@mods"])
        .fails_with("already decided by ana@mods");
    assert_eq!(with_store(&db, &["tasks", "list"]).ok(), "no open tasks\n");
    with_store(&db, &["dead", "retry", &id.to_string()]).fails_with("not failed");
}

#[test]
fn unknown_runs_tasks_and_steps_are_errors() {
    let temp = TempDir::new("unknown");
    let db = temp.file("runs.db");
    let id = moderation_waiting(&db);

    with_store(&db, &["runs", "show", "run-999"]).fails_with("unknown run run-999");
    with_store(&db, &["runs", "show", "999", "--diagram"]).fails_with("unknown run run-999");
    with_store(&db, &["tasks", "approve", "999/review", "--as", "ana@mods"])
        .fails_with("unknown run run-999");
    with_store(&db, &["dead", "retry", "999"]).fails_with("unknown run run-999");
    with_store(
        &db,
        &[
            "tasks",
            "approve",
            &format!("{id}/nope"),
            "--as",
            "ana@mods",
        ],
    )
    .fails_with("has no step `nope`; its human steps: `review`");
    with_store(
        &db,
        &[
            "tasks",
            "approve",
            &format!("{id}/draft"),
            "--as",
            "ana@mods",
        ],
    )
    .fails_with("is an action step, not a human task");
    with_store(
        &db,
        &["tasks", "approve", &format!("{id}/publish"), "--as", "mods"],
    )
    .fails_with("is an action step");

    // As JSON, the error is one JSON line on stderr.
    let out = with_store(&db, &["--json", "runs", "show", "999"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1, "{out:#?}");
    let error: Value = serde_json::from_str(&out.stderr).expect("JSON");
    assert_eq!(error["error"], "unknown run run-999");

    // Malformed ids are usage errors.
    for args in [
        &["runs", "show", "seven"][..],
        &["tasks", "approve", "review", "--as", "ana@mods"],
        &["tasks", "approve", &format!("{id}/review")],
        &[
            "tasks",
            "decide",
            &format!("{id}/review"),
            "--as",
            "a",
            "--decision",
            "{",
        ],
    ] {
        let out = with_store(&db, args);
        assert_eq!(out.code, 2, "{args:?}: {out:#?}");
    }

    // The task is still open and undecided after all that.
    let tasks = with_store(&db, &["--json", "tasks", "list"]).json();
    assert_eq!(tasks.as_array().map(Vec::len), Some(1), "{tasks}");
}

#[test]
fn a_running_engine_takes_in_a_decision_made_from_the_command_line() {
    let temp = TempDir::new("live");
    let db = temp.file("runs.db");
    let (rt, engine, run) = start_moderation(&db);
    let task = format!("{}/review", run.id());

    // The assignee itself is admitted too.
    let decided = with_store(&db, &["--json", "tasks", "approve", &task, "--as", "mods"]).json();
    assert_eq!(decided["by"], "mods");
    assert_eq!(decided["decision"]["approved"], true);

    let outputs = rt
        .block_on(async { tokio::time::timeout(WAIT, run.outputs()).await })
        .expect("the engine takes the decision in")
        .expect("outputs");
    assert_eq!(outputs.review.by, "mods");
    assert_eq!(outputs.publish, "published draft of post-1");
    drop((run, engine));
    drop(rt);

    let shown = with_store(
        &db,
        &["runs", "show", &task[..task.len() - "/review".len()]],
    )
    .ok();
    assert!(shown.contains("completed"), "{shown}");
    // One decision only: the engine did not journal a second one.
    assert_eq!(shown.matches("decided by").count(), 2, "{shown}"); // steps + timeline
}

#[test]
fn the_engines_authorizer_governs_decisions_made_from_the_command_line() {
    let temp = TempDir::new("authorizer");
    let db = temp.file("runs.db");
    let rt = runtime();
    let (engine, run) = rt.block_on(async {
        // Only leads decide, whatever the task's assignee.
        let engine = Engine::builder()
            .store(SqliteStore::open(&db).expect("open"))
            .authorizer(|_assignee, by| by.ends_with("@leads"))
            .build();
        engine.register::<Moderation>(()).expect("register");
        let run = engine
            .start::<Moderation>(ModerationInput {
                item: "post-9".into(),
            })
            .await
            .expect("start");
        testing::wait_for_task(&engine, run.id(), "review", WAIT)
            .await
            .expect("the review opens");
        (engine, run)
    });
    let task = format!("{}/review", run.id());
    // The default rule would admit a member of `mods`; this engine's does not.
    let refused = rt.block_on(async {
        let db = db.clone();
        let task = task.clone();
        tokio::task::spawn_blocking(move || {
            with_store(
                &db,
                &[
                    "tasks", "approve", &task, "--as", "ana@mods", "--wait", "20",
                ],
            )
        })
        .await
        .expect("the command ran")
    });
    refused.fails_with("the engine refused the decision");
    let open = with_store(&db, &["--json", "tasks", "list"]).json();
    assert_eq!(
        open.as_array().map(Vec::len),
        Some(1),
        "the task stays open: {open}"
    );
    let admitted = rt.block_on(async {
        let db = db.clone();
        let task = task.clone();
        tokio::task::spawn_blocking(move || {
            with_store(
                &db,
                &[
                    "--json", "tasks", "approve", &task, "--as", "bo@leads", "--wait", "20",
                ],
            )
        })
        .await
        .expect("the command ran")
    });
    let admitted = admitted.json();
    assert_eq!(admitted["status"], "decided", "{admitted}");
    let outputs = rt
        .block_on(async { tokio::time::timeout(WAIT, run.outputs()).await })
        .expect("the run finishes")
        .expect("outputs");
    assert_eq!(outputs.review.by, "bo@leads");
    drop((run, engine));
    drop(rt);
    let shown = with_store(&db, &["--json", "runs", "show", &task[..task.len() - 7]]).json();
    let timeline = shown["timeline"].to_string();
    assert!(timeline.contains("refused (unauthorized)"), "{timeline}");
}

/// A dead letter as `dead list --json` prints it.
#[derive(Debug, Deserialize)]
struct Letter {
    run: String,
    workflow: String,
    step: String,
    attempts: u32,
    kind: String,
    message: String,
}

#[test]
fn a_failed_run_is_listed_shown_retried_and_resumed() {
    let temp = TempDir::new("dead");
    let db = temp.file("runs.db");
    let rt = runtime();
    let id = rt.block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(&db).expect("open"))
            .build();
        engine.register::<Screening>(()).expect("register");
        let run = engine
            .start::<Screening>(ScreeningInput {
                item: "doc-9".into(),
            })
            .await
            .expect("start");
        let failed = tokio::time::timeout(WAIT, run.outputs())
            .await
            .expect("in time");
        let error = failed.err();
        assert!(matches!(error, Some(RunError::Failed { .. })), "{error:?}");
        run.id()
    });
    drop(rt);

    let listed = with_store(&db, &["dead", "list"]).ok();
    assert!(listed.contains(&id.to_string()), "{listed}");
    assert!(listed.contains("Screening"), "{listed}");
    assert!(
        listed.contains("internal: the item is malformed"),
        "{listed}"
    );
    let letters: Vec<Letter> =
        serde_json::from_value(with_store(&db, &["--json", "dead", "list"]).json())
            .expect("dead letters");
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        (
            letter.run.as_str(),
            letter.workflow.as_str(),
            letter.step.as_str()
        ),
        (id.to_string().as_str(), "Screening", "check")
    );
    assert_eq!((letter.attempts, letter.kind.as_str()), (1, "internal"));
    assert_eq!(letter.message, "the item is malformed");

    let shown = with_store(&db, &["runs", "show", &id.to_string()]).ok();
    assert!(
        shown.starts_with(&format!("{id}  Screening  failed\n")),
        "{shown}"
    );
    assert!(shown.contains("note:     failed at `check`"), "{shown}");
    assert!(
        shown.contains("check: attempt 1 failed: internal: the item is malformed"),
        "{shown}"
    );
    assert!(
        shown.contains("errors:\n") && shown.contains("check attempt 1: internal"),
        "{shown}"
    );
    let drawn = with_store(&db, &["runs", "show", &id.to_string(), "--diagram"]).ok();
    assert!(drawn.contains("class fetch done"), "{drawn}");
    assert!(drawn.contains("class check failed"), "{drawn}");
    let failed = with_store(&db, &["--json", "runs", "list", "--status", "failed"]).json();
    assert_eq!(failed["runs"][0]["run"], id.to_string().as_str());

    let retried = with_store(&db, &["dead", "retry", &id.to_string(), "--as", "ops@team"]).ok();
    assert!(
        retried.contains("marked for retry by ops@team"),
        "{retried}"
    );
    assert!(retried.contains("engine.resume_all()"), "{retried}");
    assert_eq!(with_store(&db, &["dead", "list"]).ok(), "no dead letters\n");
    with_store(&db, &["dead", "retry", &id.to_string()]).fails_with("is running, not failed");
    let shown = with_store(&db, &["--json", "runs", "show", &id.to_string()]).json();
    assert_eq!(shown["status"], "running");
    assert_eq!(shown["note"], "retried by ops@team");

    // An engine with the workflow registered resumes it from the failed step.
    let outputs = resume_to_end::<Screening>(&db, id);
    assert_eq!(outputs.check, "checked fetched doc-9");

    let shown = with_store(&db, &["runs", "show", &id.to_string()]).ok();
    assert!(
        shown.starts_with(&format!("{id}  Screening  completed\n")),
        "{shown}"
    );
    assert!(shown.contains("retried by ops@team"), "{shown}");
    assert!(shown.contains("check: attempt 1 started"), "{shown}");
    assert_eq!(shown.matches("fetch: succeeded").count(), 1, "{shown}");
}

#[test]
fn a_decision_of_another_type_is_given_as_json() {
    let temp = TempDir::new("decide");
    let db = temp.file("runs.db");
    let rt = runtime();
    let id = rt.block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(&db).expect("open"))
            .build();
        engine.register::<Triage>(()).expect("register");
        let run = engine.start::<Triage>(TriageInput {}).await.expect("start");
        testing::wait_for_task(&engine, run.id(), "triage", WAIT)
            .await
            .expect("the triage opens");
        run.id()
    });
    drop(rt);

    let task = format!("{id}/triage");
    with_store(&db, &["tasks", "approve", &task, "--as", "ana@oncall"])
        .fails_with("is decided with a `Tier`, not an Approval; use `workflow tasks decide");
    // `by` is who decides, whatever the JSON says.
    let decided = with_store(
        &db,
        &[
            "tasks",
            "decide",
            &task,
            "--as",
            "ana@oncall",
            "--decision",
            r#"{"level": 2, "by": "someone else"}"#,
        ],
    )
    .ok();
    assert!(
        decided.contains("{\"by\":\"someone else\",\"level\":2} by ana@oncall submitted"),
        "{decided}"
    );

    let outputs = resume_to_end::<Triage>(&db, id);
    assert_eq!(outputs.route, "level 2 by ana@oncall");
}

// ---------------------------------------------------------------- serve

/// One HTTP/1.1 request to `workflow serve`, over a plain socket: status and body.
fn http(addr: &str, method: &str, path: &str, who: Option<&str>, body: &str) -> (u16, String) {
    let user = who.map_or(String::new(), |who| format!("X-Forwarded-User: {who}\r\n"));
    let headers = format!("{user}Content-Type: application/json\r\n");
    http_with(addr, method, path, &headers, body)
}

/// One HTTP/1.1 request with the given header lines (each ending in `\r\n`).
fn http_with(addr: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to workflow serve");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, body)| body.to_owned());
    (status, body)
}

/// Kills `workflow serve` when the test ends, passed or not.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `workflow serve` on `db` with `args`: the process and its address.
fn serve_store(db: &Path, args: &[&str]) -> (Serving, String) {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .args([
            "--store",
            &db.display().to_string(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .env_remove("WORKFLOW_STORE")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start workflow serve");
    let stderr = child.stderr.take().expect("stderr");
    let serving = Serving(child);
    let mut line = String::new();
    let mut reader = std::io::BufReader::new(stderr);
    reader.read_line(&mut line).expect("the serving line");
    // Keep reading what it writes later, so its stderr never closes under it.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    (serving, addr)
}

#[test]
fn serve_shows_tasks_and_takes_decisions_for_a_store_without_the_workflows_code() {
    let temp = TempDir::new("serve");
    let db = temp.file("runs.db");
    let id = moderation_waiting(&db);

    let roles = temp.file("roles.txt");
    std::fs::write(&roles, "# who may operate\nana@mods operator:Moderation\n").unwrap();
    let (serving, addr) = serve_store(&db, &["--roles", &roles.display().to_string()]);

    assert_eq!(http(&addr, "GET", "/api/tasks", None, "").0, 401);
    let (status, tasks) = http(&addr, "GET", "/api/tasks", Some("ana@mods"), "");
    assert_eq!(status, 200, "{tasks}");
    assert!(tasks.contains("\"step\":\"review\""), "{tasks}");
    let (status, inbox) = http(&addr, "GET", "/inbox", Some("ana@mods"), "");
    assert_eq!(status, 200);
    assert!(inbox.contains("Publish this draft?"), "{inbox}");
    let (status, page) = http(
        &addr,
        "GET",
        &format!("/inbox/runs/{id}"),
        Some("ana@mods"),
        "",
    );
    assert_eq!(status, 200);
    assert!(page.contains("<svg"), "{page}");

    let path = format!("/api/runs/{id}/tasks/review");
    // Eve may not see the run: it does not exist for her.
    let refused = http(
        &addr,
        "POST",
        &path,
        Some("eve@other"),
        r#"{"approved": true}"#,
    );
    assert_eq!(refused.0, 404, "{}", refused.1);
    assert!(refused.1.contains("unknown_run"), "{}", refused.1);
    let decided = http(
        &addr,
        "POST",
        &path,
        Some("ana@mods"),
        r#"{"approved": true, "comment": "fine"}"#,
    );
    assert_eq!(decided.0, 200, "{}", decided.1);
    let starts = http(
        &addr,
        "POST",
        "/api/runs",
        Some("ana@mods"),
        r#"{"workflow": "Moderation", "input": {"item": "x"}}"#,
    );
    // Queued for a worker (the spec an engine recorded), its inputs checked by name.
    assert_eq!(starts.0, 201, "{}", starts.1);
    assert!(starts.1.contains(r#""created":true"#), "{}", starts.1);
    let queued: Value = serde_json::from_str(&starts.1).expect("JSON");
    let queued = queued["run"].as_str().expect("a run").to_owned();
    let shown = with_store(&db, &["runs", "show", &queued]).ok();
    assert!(shown.contains("queued:   waiting for a worker"), "{shown}");
    let json = with_store(&db, &["--json", "runs", "show", &queued]).json();
    assert_eq!(json["queued"], true, "{json}");
    let running = with_store(&db, &["--json", "runs", "show", &id.to_string()]).json();
    assert_eq!(running["queued"], false, "{running}");
    let misnamed = http(
        &addr,
        "POST",
        "/api/runs",
        Some("ana@mods"),
        r#"{"workflow": "Moderation", "input": {"items": "x"}}"#,
    );
    assert_eq!(misnamed.0, 422, "{}", misnamed.1);
    assert!(misnamed.1.contains("invalid_input"), "{}", misnamed.1);
    let not_operator = http(
        &addr,
        "POST",
        "/api/runs",
        Some("lee@mods"),
        r#"{"workflow": "Moderation", "input": {"item": "x"}}"#,
    );
    assert_eq!(not_operator.0, 403, "{}", not_operator.1);
    assert!(not_operator.1.contains("forbidden"), "{}", not_operator.1);
    drop(serving);

    // The decision waited in the run's inbox; the engine with the workflow takes it in
    // (and admits the queued run).
    let outputs = resume_to_end_of::<Moderation>(&db, id, 2);
    assert_eq!(outputs.review.by, "ana@mods");
    assert_eq!(outputs.review.comment.as_deref(), Some("fine"));
}

#[test]
fn runs_list_pages_with_a_cursor_and_says_when_more_exist() {
    let temp = TempDir::new("paging");
    let db = temp.file("runs.db");
    let rt = runtime();
    let started: Vec<String> = rt.block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(&db).expect("open the store"))
            .build();
        engine.register::<Moderation>(()).expect("register");
        let mut started = Vec::new();
        for n in 0..5 {
            let run = engine
                .start::<Moderation>(ModerationInput {
                    item: format!("post-{n}"),
                })
                .await
                .expect("start");
            started.push(run.id().to_string());
        }
        started
    });
    drop(rt);

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = vec!["--json", "runs", "list", "--limit", "2"];
        if let Some(cursor) = &after {
            args.extend(["--after", cursor.as_str()]);
        }
        let page = with_store(&db, &args).json();
        pages += 1;
        for run in page["runs"].as_array().expect("an array of runs") {
            seen.push(run["run"].as_str().expect("a run id").to_owned());
        }
        if page["more"] == false {
            assert!(page["next"].is_null(), "{page}");
            break;
        }
        after = Some(page["next"].as_str().expect("a cursor").to_owned());
        assert!(pages < 10, "paging never ends");
    }
    assert_eq!(pages, 3);
    let mut newest_first = started.clone();
    newest_first.reverse();
    assert_eq!(seen, newest_first, "every run once, newest first");

    let text = with_store(&db, &["runs", "list", "--limit", "2"]).ok();
    assert!(
        text.contains(&format!("--after {}", newest_first[1])),
        "{text}"
    );
}

#[test]
fn serve_tokens_name_each_persons_roles() {
    let temp = TempDir::new("serve-tokens");
    let db = temp.file("runs.db");
    let id = moderation_waiting(&db);
    let tokens = temp.file("tokens.txt");
    std::fs::write(
        &tokens,
        "# token identity roles\n\
         op-token ana@ops operator:Moderation\n\
         view-token vic@audit viewer:*\n\
         none-token eve@else\n",
    )
    .unwrap();
    let (serving, addr) = serve_store(&db, &["--tokens", &tokens.display().to_string()]);
    let bearer = |token: &str| format!("Authorization: Bearer {token}\r\n");
    let run_path = format!("/api/runs/{id}");
    for (token, status) in [("op-token", 200), ("view-token", 200), ("none-token", 404)] {
        let (got, body) = http_with(&addr, "GET", &run_path, &bearer(token), "");
        assert_eq!(got, status, "{token}: {body}");
    }
    let (status, runs) = http_with(&addr, "GET", "/api/runs", &bearer("none-token"), "");
    assert_eq!(status, 200);
    assert!(runs.contains("\"runs\":[]"), "{runs}");
    let cancel = format!("/api/runs/{id}/cancel");
    let (status, body) = http_with(&addr, "POST", &cancel, &bearer("view-token"), "");
    assert_eq!(status, 403, "a viewer may not cancel: {body}");
    // A bearer token needs no JSON body: no browser sends one by itself.
    let (status, body) = http_with(&addr, "POST", &cancel, &bearer("op-token"), "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ana@ops"), "{body}");
    drop(serving);

    let bad = temp.file("bad.txt");
    std::fs::write(&bad, "t ana admin:Moderation\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .args([
            "--store",
            &db.display().to_string(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--tokens", &bad.display().to_string()])
        .env_remove("WORKFLOW_STORE")
        .output()
        .expect("run workflow serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad.txt: line 1"), "{stderr}");
    assert!(stderr.contains("admin:Moderation"), "{stderr}");
}

#[test]
fn serve_metrics_exports_the_stores_figures_to_a_viewer_of_every_workflow() {
    let temp = TempDir::new("serve-metrics");
    let db = temp.file("runs.db");
    moderation_waiting(&db);
    let tokens = temp.file("tokens.txt");
    std::fs::write(
        &tokens,
        "ops-token ana@ops viewer:*\nmod-token mo@mods viewer:Moderation\n",
    )
    .unwrap();
    let (serving, addr) = serve_store(
        &db,
        &["--tokens", &tokens.display().to_string(), "--metrics"],
    );
    let bearer = |token: &str| format!("Authorization: Bearer {token}\r\n");
    let (status, body) = http_with(&addr, "GET", "/metrics", &bearer("mod-token"), "");
    assert_eq!(status, 403, "a role on one workflow is not enough: {body}");
    let (status, body) = http_with(&addr, "GET", "/metrics", &bearer("ops-token"), "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("workflow_runs{workflow=\"Moderation\",status=\"running\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("workflow_open_tasks{workflow=\"Moderation\"} 1"),
        "{body}"
    );
    drop(serving);
}

#[test]
fn serve_refuses_a_trusted_header_beyond_loopback_without_a_trusted_proxy() {
    let temp = TempDir::new("serve-remote");
    let db = temp.file("runs.db");
    moderation_waiting(&db);
    let output = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .args([
            "--store",
            &db.display().to_string(),
            "serve",
            "--listen",
            "0.0.0.0:0",
        ])
        .env_remove("WORKFLOW_STORE")
        .output()
        .expect("run workflow serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to listen on 0.0.0.0:0"),
        "{stderr}"
    );
    assert!(stderr.contains("--trusted-proxy"), "{stderr}");
}

#[test]
fn serve_honours_the_trusted_header_from_its_proxy_only_and_takes_a_public_origin() {
    let temp = TempDir::new("serve-proxy");
    let db = temp.file("runs.db");
    let id = moderation_waiting(&db);
    let roles = temp.file("roles.txt");
    std::fs::write(&roles, "ana@mods operator:Moderation\n").unwrap();
    // The "proxy" is another address than the tests' client: nobody is trusted.
    let (far, far_addr) = serve_store(
        &db,
        &[
            "--roles",
            &roles.display().to_string(),
            "--trusted-proxy",
            "10.9.9.9",
        ],
    );
    assert_eq!(
        http(&far_addr, "GET", "/api/tasks", Some("ana@mods"), "").0,
        401
    );
    drop(far);
    let (_near, addr) = serve_store(
        &db,
        &[
            "--roles",
            &roles.display().to_string(),
            "--trusted-proxy",
            "127.0.0.1",
            "--public-origin",
            "https://ops.example.com",
        ],
    );
    assert_eq!(
        http(&addr, "GET", "/api/tasks", Some("ana@mods"), "").0,
        200
    );
    // A state change from the public origin (the proxy rewrote `Host`) is not cross-site.
    let (status, body) = http_with(
        &addr,
        "POST",
        &format!("/api/runs/{id}/cancel"),
        "X-Forwarded-User: ana@mods\r\nOrigin: https://ops.example.com\r\n\
         Content-Type: application/json\r\n",
        "{}",
    );
    assert_ne!(status, 403, "{body}");
    let (status, body) = http_with(
        &addr,
        "POST",
        &format!("/api/runs/{id}/cancel"),
        "X-Forwarded-User: ana@mods\r\nOrigin: https://evil.example.com\r\n\
         Content-Type: application/json\r\n",
        "{}",
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("cross_site"), "{body}");
}

#[test]
fn serve_stops_gracefully_on_sigterm_and_is_not_ready_while_it_drains() {
    let temp = TempDir::new("serve_sigterm");
    let db = temp.file("runs.db");
    moderation_waiting(&db);
    let (mut serving, addr) = serve_store(&db, &[]);
    assert_eq!(http(&addr, "GET", "/readyz", None, "").0, 200);
    let pid = serving.0.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
    // It drains (nothing of its own to hand over: it drives no run), then exits cleanly.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = serving.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < until,
            "still serving 30 s after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

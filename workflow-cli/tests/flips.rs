//! Damage to the store file is reported, never read back as a different truth.
//!
//! A store is written by the real engine (a run with a retried step, a skipped step and a
//! human decision, plus a dead letter), closed, and then, for each of many single-bit flips
//! at random offsets of the file, a fresh copy is flipped and `workflow runs show run-1
//! --json` is run on it, as a user would. Every answer must be either exactly the answer of
//! the undamaged file (the flip hit free space or something the command does not read) or
//! an error: never a silently different answer. `workflow check` must report every flip
//! that changed a checksummed row.
//!
//! `cargo test -p workflow-cli --test flips` makes 1,000 flips; the long mode makes more:
//! `FLIPS=20000 cargo test -p workflow-cli --release --test flips -- --nocapture`. The seed
//! is printed; `FLIPS_SEED=<seed>` repeats a sequence of offsets.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use workflow_core::prelude::*;
use workflow_core::testing;
use workflow_sqlite::SqliteStore;

async fn draft(item: String) -> Result<String, StepError> {
    Ok(format!("draft of {item}"))
}

static FLAKY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

async fn enrich(draft: String) -> Result<String, StepError> {
    if FLAKY.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
        return Err(StepError::unavailable("the enrichment service is down"));
    }
    Ok(format!("{draft}, enriched"))
}

async fn publish(draft: String) -> Result<String, StepError> {
    Ok(format!("published {draft}"))
}

async fn translate(draft: String) -> Result<String, StepError> {
    Ok(format!("translated {draft}"))
}

async fn fail() -> Result<u32, StepError> {
    Err(StepError::validation("this one always fails"))
}

workflow! {
    /// Publish a draft once a moderator approved it.
    workflow Publication(item: String, wanted: bool) {
        step draft -> String { action: draft(item) }
        step enrich -> String {
            action: enrich(draft),
            retry: { max_attempts: 3, backoff: fixed, initial: 10ms, max: 10ms, jitter: none },
        }
        step translate -> String { action: translate(draft), condition: *wanted }
        human review -> Approval {
            assignee: "mods",
            depends_on: [enrich],
            timeout: 1h,
            on_timeout: abort,
            prompt: "Publish this draft?",
        }
        step publish -> String { action: publish(enrich), depends_on: [review] }
    }
}

workflow! {
    /// Fails at once: a dead letter in the store.
    workflow Doomed() {
        step fail -> u32 { action: fail() }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn temp_dir() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("workflow-flips-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the store the flips damage.
fn write_store(path: &Path) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let engine = Engine::builder()
            .store(SqliteStore::open(path).unwrap())
            .build();
        engine.register::<Publication>(()).unwrap();
        engine.register::<Doomed>(()).unwrap();
        let run = engine
            .start::<Publication>(PublicationInput {
                item: "post-1".into(),
                wanted: false,
            })
            .await
            .unwrap();
        testing::wait_for_task(&engine, run.id(), "review", Duration::from_secs(30))
            .await
            .unwrap();
        run.review()
            .approve("ana@mods", Some("fine, ship it"))
            .await
            .unwrap();
        run.outputs().await.unwrap();
        let doomed = engine.start::<Doomed>(DoomedInput {}).await.unwrap();
        assert!(doomed.outputs().await.is_err());
    });
}

struct Answer {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn workflow(store: &Path, args: &[&str]) -> Answer {
    let out = Command::new(env!("CARGO_BIN_EXE_workflow"))
        .args(args)
        .arg("--store")
        .arg(store)
        .output()
        .unwrap();
    Answer {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn every_flip_is_invisible_or_reported_never_a_different_answer() {
    let flips: usize = std::env::var("FLIPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let dir = temp_dir();
    let original = dir.join("store.db");
    write_store(&original);
    assert!(
        !dir.join("store.db-wal").exists()
            || std::fs::metadata(dir.join("store.db-wal")).unwrap().len() == 0,
        "the store was checkpointed on close"
    );
    let clean = workflow(&original, &["--json", "runs", "show", "run-1"]);
    assert_eq!(clean.code, Some(0), "{}", clean.stderr);
    assert!(
        clean.stdout.contains("\"status\": \"completed\""),
        "{}",
        clean.stdout
    );
    let checked = workflow(&original, &["check"]);
    assert_eq!(
        checked.code,
        Some(0),
        "{}{}",
        checked.stdout,
        checked.stderr
    );

    let bytes = std::fs::read(&original).unwrap();
    let seed = std::env::var("FLIPS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
        | 1;
    let mut rng = Rng(seed);
    let copy = dir.join("flipped.db");
    let (mut invisible, mut reported, mut silent) = (0, 0, Vec::new());
    for _ in 0..flips {
        let offset = (rng.next() % bytes.len() as u64) as usize;
        let bit = (rng.next() % 8) as u8;
        let mut damaged = bytes.clone();
        damaged[offset] ^= 1 << bit;
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(dir.join(format!("flipped.db{suffix}")));
        }
        std::fs::write(&copy, &damaged).unwrap();
        let answer = workflow(&copy, &["--json", "runs", "show", "run-1"]);
        assert!(
            !answer.stderr.contains("panicked"),
            "a flip at {offset} bit {bit} made the command panic: {}",
            answer.stderr
        );
        match answer.code {
            Some(0) if answer.stdout == clean.stdout => invisible += 1,
            Some(0) => silent.push((offset, bit, answer.stdout)),
            Some(_) => {
                assert!(
                    answer.stderr.starts_with("{\"error\":"),
                    "one JSON error line: {}",
                    answer.stderr
                );
                reported += 1;
            }
            None => panic!("killed by a signal at offset {offset} bit {bit}"),
        }
    }
    println!(
        "{flips} flips of {} bytes (seed {seed}): {invisible} invisible, {reported} reported as errors, {} silently different",
        bytes.len(),
        silent.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        silent.is_empty(),
        "flips that gave a different answer without an error (seed {seed}): {:?}",
        silent
            .iter()
            .map(|(offset, bit, _)| (offset, bit))
            .collect::<Vec<_>>()
    );
}

#[test]
fn check_reports_a_damaged_row_and_its_run() {
    let dir = temp_dir();
    let path = dir.join("store.db");
    write_store(&path);
    let clean = workflow(&path, &["--json", "check"]);
    assert_eq!(clean.code, Some(0), "{}", clean.stderr);
    let report: serde_json::Value = serde_json::from_str(&clean.stdout).unwrap();
    assert_eq!(report["ok"], true);
    assert!(report["rows"].as_u64().unwrap() > 10, "{report}");

    // Damage one journal entry's payload without touching SQLite's structure.
    {
        let conn = workflow_sqlite::rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE journal SET event = replace(event, 'ana@mods', 'eve@mods') WHERE run_id = 1",
            [],
        )
        .unwrap();
    }
    let damaged = workflow(&path, &["check"]);
    assert_eq!(damaged.code, Some(1));
    assert!(
        damaged.stdout.contains("damaged: journal run-1/"),
        "{}",
        damaged.stdout
    );
    assert!(
        damaged
            .stdout
            .contains("damaged runs (engines do not drive them): run-1"),
        "{}",
        damaged.stdout
    );
    assert!(damaged.stderr.contains("is damaged"), "{}", damaged.stderr);
    let shown = workflow(&path, &["runs", "show", "run-1"]);
    assert_eq!(shown.code, Some(1));
    assert!(shown.stderr.contains("is damaged"), "{}", shown.stderr);
    let json = workflow(&path, &["--json", "check"]);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["damaged_runs"][0], "run-1");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A spec row whose key is damaged is not found at all, so its checksum never gets a say:
/// the runs started under it must be reported, not explained without their step names.
#[test]
fn a_spec_whose_key_is_damaged_is_reported_not_read_as_missing() {
    let dir = temp_dir();
    let path = dir.join("store.db");
    write_store(&path);
    let fingerprint = {
        let conn = workflow_sqlite::rusqlite::Connection::open(&path).unwrap();
        let fingerprint: String = conn
            .query_row("SELECT fingerprint FROM runs WHERE id = 1", [], |row| {
                row.get(0)
            })
            .unwrap();
        fingerprint
    };
    let mut bytes = std::fs::read(&path).unwrap();
    let needle = format!("{fingerprint}{{\"name\":\"Publication\"");
    let at = bytes
        .windows(needle.len())
        .position(|window| window == needle.as_bytes())
        .expect("the spec row's key is stored next to its JSON");
    bytes[at] ^= 1;
    std::fs::write(&path, &bytes).unwrap();

    let shown = workflow(&path, &["--json", "runs", "show", "run-1"]);
    assert_eq!(shown.code, Some(1), "{}", shown.stdout);
    assert!(
        shown.stderr.contains("which the store does not hold"),
        "{}",
        shown.stderr
    );
    let checked = workflow(&path, &["--json", "check"]);
    assert_eq!(checked.code, Some(1), "{}", checked.stdout);
    let report: serde_json::Value = serde_json::from_str(&checked.stdout).unwrap();
    assert_eq!(report["damaged_runs"][0], "run-1", "{report}");
    let missing = format!("the spec it was started under ({fingerprint}) is missing");
    assert!(
        report["damaged"]
            .as_array()
            .unwrap()
            .iter()
            .any(|damage| damage["run"] == "run-1" && damage["reason"] == missing.as_str()),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! B3, B4 and B6: the engine on its durable default store (`SqliteStore`: one SQLite file,
//! WAL, `synchronous = FULL`, group commit on a writer thread), against baselines measured
//! in the same run on the same disk.
//!
//! - B3 (one run at a time): 10-step chains of no-op steps, run one after the other, as
//!   durable steps per second. Baselines: this disk's sync rate (`write` + `fdatasync` of
//!   a 4 KiB block, overwritten in place and appended; a one-row SQLite commit; an empty
//!   SQLite transaction) and raw rusqlite with the store's schema and pragmas, committing
//!   one commit per step (`raw steps`: a step's StepSucceeded and the next step's
//!   AttemptStarted in one transaction; `raw runs`: the engine's whole transaction
//!   pattern, the run's creation with its first start and its status with its last
//!   result, with the store's statements and checksums). The engine and `raw runs` are also run with
//!   `synchronous = OFF`, to show the cost per commit that is not the disk's.
//! - B4 (1000 concurrent runs of the same chain): runs/s and steps/s. Baselines: raw
//!   rusqlite inserting the same rows in transactions of 256 (plain inserts, and the
//!   store's statements), and the engine on the in-memory store (its CPU ceiling).
//! - B6 (recovery): a child process starts 10 000 runs of a 10-step chain whose fifth step
//!   blocks, waits until all of them are parked there (10 journal rows each: 100 000
//!   rows), and is killed with SIGKILL. Copies of that crash image are then recovered:
//!   `SqliteStore::open` + `Engine::resume_all()` until every run is re-launched, and
//!   until every run is completed.
//!
//! Not a criterion benchmark: it prints Markdown tables. The contenders of B3 and of B4
//! take turns in rounds (in B3, one run or 20 syncs each, in rotated order), and ratios
//! are taken per round and their median reported: this shared disk's sync rate swings by
//! an order of magnitude within seconds when other processes write. The files live under
//! `CARGO_TARGET_TMPDIR` (the target directory, on the workspace's disk). About 45 s.
//!
//! Run with `cargo bench -p benches --bench durable`; add `b3`, `b4` or `b6` after `--`
//! to run only those. Environment: `B3_SECS` (default 30), `B4_ROUNDS` (5), `B4_RUNS`
//! (1000), `B6_ROUNDS` (3), `B6_RUNS` (10 000), `DURABLE_DIR` (where the files go).

use std::fmt::Display;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command as Process, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, TransactionBehavior};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;
use workflow_core::journal::Event;
use workflow_core::store::{checksum, Claim, Claimant, Store};
use workflow_core::{Engine, RunId, Workflow};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

/// The workflows: a 10-step chain, and the same chain with a gate at its fifth step.
mod flows {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use workflow_core::{workflow, StepError};

    /// While set, `gate` parks forever (the B6 child process sets it).
    pub static GATE_CLOSED: AtomicBool = AtomicBool::new(false);
    /// How many attempts reached a closed gate.
    pub static AT_GATE: AtomicUsize = AtomicUsize::new(0);

    pub async fn first() -> Result<u32, StepError> {
        Ok(1)
    }

    pub async fn next(x: u32) -> Result<u32, StepError> {
        Ok(x.wrapping_add(1))
    }

    pub async fn gate(x: u32) -> Result<u32, StepError> {
        if GATE_CLOSED.load(Ordering::Acquire) {
            AT_GATE.fetch_add(1, Ordering::AcqRel);
            std::future::pending::<()>().await;
        }
        Ok(x.wrapping_add(1))
    }

    workflow! {
        /// Ten no-op steps, each reading the previous one.
        pub workflow Chain10() {
            step s0 -> u32 { action: first(), }
            step s1 -> u32 { action: next(s0), }
            step s2 -> u32 { action: next(s1), }
            step s3 -> u32 { action: next(s2), }
            step s4 -> u32 { action: next(s3), }
            step s5 -> u32 { action: next(s4), }
            step s6 -> u32 { action: next(s5), }
            step s7 -> u32 { action: next(s6), }
            step s8 -> u32 { action: next(s7), }
            step s9 -> u32 { action: next(s8), }
        }
    }

    workflow! {
        /// `Chain10` with a gate at `s4`: parked there, a run has 10 journal rows.
        pub workflow Gated10() {
            step s0 -> u32 { action: first(), }
            step s1 -> u32 { action: next(s0), }
            step s2 -> u32 { action: next(s1), }
            step s3 -> u32 { action: next(s2), }
            step s4 -> u32 { action: gate(s3), }
            step s5 -> u32 { action: next(s4), }
            step s6 -> u32 { action: next(s5), }
            step s7 -> u32 { action: next(s6), }
            step s8 -> u32 { action: next(s7), }
            step s9 -> u32 { action: next(s8), }
        }
    }
}

use flows::{Chain10, Chain10Input, Gated10, Gated10Input};

/// Steps in `Chain10` and `Gated10`.
const STEPS: usize = 10;
/// Rows per transaction in the raw batched baseline (B4).
const RAW_BATCH: usize = 256;

fn ok<T, E: Display>(result: Result<T, E>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("cannot {what}: {error}"),
    }
}

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .filter(|value| *value > 0)
        .unwrap_or(default)
}

fn multi_thread() -> Runtime {
    ok(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build(),
        "build a tokio runtime",
    )
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn spread(values: &[f64]) -> String {
    let (min, max) = min_max(values);
    format!("{min:.0}–{max:.0}")
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// A path for a new database: the file and its `-wal` and `-shm` companions removed.
fn fresh(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    remove_db(&path);
    path
}

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn remove_db(path: &Path) {
    for file in [
        path.to_path_buf(),
        companion(path, "-wal"),
        companion(path, "-shm"),
    ] {
        let _ = fs::remove_file(file);
    }
}

fn file_size(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

fn sqlite_options() -> SqliteOptions {
    SqliteOptions {
        synchronous: Synchronous::Full,
        ..SqliteOptions::default()
    }
}

// ---------------------------------------------------------------------------------------
// Journal rows as the engine writes them.

fn json(event: &Event) -> String {
    ok(serde_json::to_string(event), "serialize an event")
}

fn run_started<W: Workflow>(seed: u64) -> String {
    json(&Event::RunStarted {
        workflow: W::NAME.to_owned(),
        fingerprint: W::FINGERPRINT.to_owned(),
        input: serde_json::json!({}),
        seed,
        trace_id: format!("{seed:016x}"),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at: now_ms(),
    })
}

/// Journal entry `seq` (from 1) of a chain: AttemptStarted and StepSucceeded alternate.
fn step_row(seq: u64) -> String {
    let step = ((seq - 1) / 2) as usize % STEPS;
    if seq % 2 == 1 {
        json(&Event::AttemptStarted {
            step,
            attempt: 1,
            at: now_ms(),
        })
    } else {
        json(&Event::StepSucceeded {
            step,
            output: serde_json::Value::from(step as u32 + 1),
            at: now_ms(),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Raw rusqlite: the store's schema and pragmas.

fn raw_open(path: &Path, sync: Synchronous) -> Connection {
    let conn = ok(Connection::open(path), "open a raw SQLite connection");
    let mode: String = ok(
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)),
        "switch to WAL",
    );
    assert!(mode.eq_ignore_ascii_case("wal"), "journal mode is {mode}");
    let sync = match sync {
        Synchronous::Full => "FULL",
        Synchronous::Normal => "NORMAL",
        Synchronous::Off => "OFF",
    };
    ok(
        conn.pragma_update(None, "synchronous", sync),
        "set synchronous",
    );
    ok(
        conn.pragma_update(None, "foreign_keys", true),
        "set foreign_keys",
    );
    ok(
        conn.busy_timeout(Duration::from_secs(5)),
        "set busy_timeout",
    );
    conn
}

fn raw_store(path: &Path, sync: Synchronous) -> Connection {
    let conn = raw_open(path, sync);
    for migration in SqliteStore::MIGRATIONS {
        ok(conn.execute_batch(migration), "create the store's schema");
    }
    conn
}

/// One write transaction (`BEGIN IMMEDIATE`, as the store's writer).
fn txn<T>(conn: &mut Connection, work: impl FnOnce(&Connection) -> T) -> T {
    let tx = ok(
        conn.transaction_with_behavior(TransactionBehavior::Immediate),
        "begin",
    );
    let value = work(&tx);
    ok(tx.commit(), "commit");
    value
}

/// The store's `create`: the run's row and journal entry 0.
fn raw_create(conn: &Connection, started: &str) -> u64 {
    let at = now_ms();
    let id: u64 = ok(
        conn.prepare_cached(
            "INSERT INTO runs (workflow, fingerprint, status, idempotency_key, created_at, updated_at)
             VALUES (?1, ?2, 'running', NULL, ?3, ?3) RETURNING id",
        )
        .and_then(|mut s| {
            s.query_row(params![Chain10::NAME, Chain10::FINGERPRINT, at], |row| {
                row.get(0)
            })
        }),
        "insert a run",
    );
    ok(
        conn.prepare_cached("INSERT INTO journal (run_id, seq, event) VALUES (?1, 0, ?2)")
            .and_then(|mut s| s.execute(params![id, started])),
        "insert entry 0",
    );
    id
}

/// The journal inserts of one commit, from entry `seq`. With `mirror`, the store's
/// `commit` statement for statement: the owner, token and sequence read, and each row
/// with its checksum.
fn raw_commit(conn: &Connection, run: u64, seq: u64, events: &[String], mirror: bool) {
    if mirror {
        let (_owner, _token, next): (Option<String>, u64, u64) = ok(
            conn.prepare_cached(
                "SELECT owner, lease_token,
                        (SELECT COALESCE(MAX(seq) + 1, 0) FROM journal WHERE run_id = ?1)
                 FROM runs WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.query_row(params![run], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
            }),
            "read the next seq",
        );
        assert_eq!(next, seq, "raw baseline out of sequence");
    }
    for (offset, event) in events.iter().enumerate() {
        let seq = seq + offset as u64;
        if mirror {
            let crc = checksum::entry(RunId(run), seq, event);
            ok(
                conn.prepare_cached(
                    "INSERT INTO journal (run_id, seq, event, crc) VALUES (?1, ?2, ?3, ?4)",
                )
                .and_then(|mut s| s.execute(params![run, seq, event, crc])),
                "insert a journal row",
            );
        } else {
            ok(
                conn.prepare_cached("INSERT INTO journal (run_id, seq, event) VALUES (?1, ?2, ?3)")
                    .and_then(|mut s| s.execute(params![run, seq, event])),
                "insert a journal row",
            );
        }
    }
}

/// The store's `set_status` for a completed run.
fn raw_finish(conn: &Connection, run: u64) {
    ok(
        conn.prepare_cached("UPDATE runs SET status = 'completed', note = NULL WHERE id = ?1")
            .and_then(|mut s| s.execute(params![run])),
        "update the status",
    );
}

// ---------------------------------------------------------------------------------------
// B3: one run at a time, against the disk's sync rate. This shared disk's sync rate swings
// by an order of magnitude within seconds, so the contenders take turns at a fine grain:
// a round gives each of them one unit of work (about 20 commits or syncs), in rotated
// order. Ratios are taken per round (the same conditions) and their median reported.

/// One B3 contender: does one unit of work and returns how many units of its kind (syncs,
/// commits or steps) it did.
type Contender<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// Syncs (or commits) per unit of the probes: about as many as a run makes.
const SYNCS_PER_UNIT: usize = 20;

/// `write` of a 4 KiB block + `fdatasync`: overwriting offset 0, or appending (the file
/// is cut back to empty every 64 MiB).
fn fdatasync_probe<'a>(path: &Path, append: bool) -> Contender<'a> {
    let file = ok(
        OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(path),
        "create the fsync probe file",
    );
    let block = [0x5au8; 4096];
    ok(file.write_all_at(&block, 0), "write");
    ok(file.sync_all(), "fsync");
    let mut offset = 0u64;
    Box::new(move || {
        for _ in 0..SYNCS_PER_UNIT {
            if append {
                offset += 4096;
                if offset >= 64 << 20 {
                    ok(file.set_len(0), "truncate");
                    offset = 0;
                }
            }
            ok(file.write_all_at(&block, offset), "write");
            ok(file.sync_data(), "fdatasync");
        }
        SYNCS_PER_UNIT as f64
    })
}

/// SQLite commits (WAL, `synchronous = FULL`): a one-row update each, or
/// `BEGIN IMMEDIATE; COMMIT` with nothing written.
fn sqlite_commit_probe<'a>(path: &Path, empty: bool) -> Contender<'a> {
    let conn = raw_open(path, Synchronous::Full);
    ok(
        conn.execute_batch(
            "CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL);
             INSERT INTO t VALUES (1, 0);",
        ),
        "create the probe table",
    );
    Box::new(move || {
        for _ in 0..SYNCS_PER_UNIT {
            if empty {
                ok(conn.execute_batch("BEGIN IMMEDIATE; COMMIT"), "commit");
            } else {
                ok(
                    conn.execute("UPDATE t SET v = v + 1 WHERE k = 1", []),
                    "commit",
                );
            }
        }
        SYNCS_PER_UNIT as f64
    })
}

/// Raw: one long run, one commit per step (its result and the next step's start); a unit
/// is 10 steps.
fn raw_steps<'a>(path: &Path) -> Contender<'a> {
    let mut conn = raw_store(path, Synchronous::Full);
    let started_row = run_started::<Chain10>(1);
    let run = txn(&mut conn, |c| raw_create(c, &started_row));
    txn(&mut conn, |c| raw_commit(c, run, 1, &[step_row(1)], false));
    let mut seq = 2u64;
    Box::new(move || {
        for _ in 0..STEPS {
            let rows = [step_row(seq), step_row(seq + 1)];
            txn(&mut conn, |c| raw_commit(c, run, seq, &rows, false));
            seq += 2;
        }
        STEPS as f64
    })
}

/// Raw: one run of 10 steps with the engine's commits (the run's creation with the first
/// start, one per step boundary, the last result with the run's status) and the store's
/// statements.
fn raw_runs<'a>(path: &Path, sync: Synchronous) -> Contender<'a> {
    let mut conn = raw_store(path, sync);
    let mut seed = 0u64;
    let last = 2 * STEPS as u64;
    Box::new(move || {
        seed += 1;
        let started_row = run_started::<Chain10>(seed);
        let first = step_row(1);
        let run = txn(&mut conn, |c| {
            let run = raw_create(c, &started_row);
            raw_commit(c, run, 1, std::slice::from_ref(&first), true);
            run
        });
        for seq in (2..last).step_by(2) {
            let rows = [step_row(seq), step_row(seq + 1)];
            txn(&mut conn, |c| raw_commit(c, run, seq, &rows, true));
        }
        let result = step_row(last);
        txn(&mut conn, |c| {
            raw_commit(c, run, last, std::slice::from_ref(&result), true);
            raw_finish(c, run);
        });
        STEPS as f64
    })
}

async fn run_chain(engine: &Engine) {
    let run = ok(
        engine.start::<Chain10>(Chain10Input {}).await,
        "start a run",
    );
    let _outputs = ok(run.outputs().await, "finish a run");
}

fn open_store(path: &Path, synchronous: Synchronous) -> Arc<SqliteStore> {
    Arc::new(ok(
        SqliteStore::open_with(
            path,
            SqliteOptions {
                synchronous,
                ..SqliteOptions::default()
            },
        ),
        "open the SQLite store",
    ))
}

/// The engine: one run of `Chain10` (`start` + `outputs`).
fn engine_chains<'a>(rt: &'a Runtime, store: &Arc<SqliteStore>) -> Contender<'a> {
    let shared: Arc<SqliteStore> = Arc::clone(store);
    let engine = rt.block_on(async move {
        let engine = Engine::builder().shared_store(shared).build();
        ok(engine.register::<Chain10>(()), "register Chain10");
        engine
    });
    Box::new(move || {
        rt.block_on(run_chain(&engine));
        STEPS as f64
    })
}

/// A contender's results: (units, seconds) per round.
struct Series {
    name: &'static str,
    unit: &'static str,
    rounds: Vec<(f64, f64)>,
}

impl Series {
    fn rates(&self) -> Vec<f64> {
        self.rounds
            .iter()
            .map(|(units, secs)| units / secs)
            .collect()
    }

    /// Units over seconds, all rounds together.
    fn overall(&self) -> f64 {
        self.units() / self.rounds.iter().map(|r| r.1).sum::<f64>()
    }

    fn units(&self) -> f64 {
        self.rounds.iter().map(|r| r.0).sum()
    }
}

/// The median and the quartiles.
fn quartiles(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if sorted.is_empty() {
            f64::NAN
        } else {
            sorted[((sorted.len() - 1) as f64 * q).round() as usize]
        }
    };
    (at(0.5), at(0.25), at(0.75))
}

/// Bytes this process passed to `write`-like system calls so far (`wchar` in
/// `/proc/self/io`; zero where unavailable).
fn bytes_written() -> f64 {
    fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|line| line.strip_prefix("wchar:"))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

fn min_max(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

const OVERWRITE: usize = 0;
const APPEND: usize = 1;
const COMMIT: usize = 2;
const RAW_STEPS: usize = 3;
const RAW_RUNS: usize = 4;
const ENGINE: usize = 5;
const RAW_RUNS_OFF: usize = 6;
const ENGINE_OFF: usize = 7;

fn b3(rt: &Runtime, dir: &Path, budget: Duration) -> f64 {
    let files = [
        fresh(dir, "b3-overwrite"),
        fresh(dir, "b3-append"),
        fresh(dir, "b3-commit.db"),
        fresh(dir, "b3-raw-steps.db"),
        fresh(dir, "b3-raw-runs.db"),
        fresh(dir, "b3-engine.db"),
        fresh(dir, "b3-raw-runs-off.db"),
        fresh(dir, "b3-engine-off.db"),
    ];
    let store = open_store(&files[ENGINE], Synchronous::Full);
    let store_off = open_store(&files[ENGINE_OFF], Synchronous::Off);
    let mut contenders: Vec<(&'static str, &'static str, Contender<'_>)> = vec![
        (
            "write 4 KiB + fdatasync, in place",
            "syncs/s",
            fdatasync_probe(&files[OVERWRITE], false),
        ),
        (
            "write 4 KiB + fdatasync, appending",
            "syncs/s",
            fdatasync_probe(&files[APPEND], true),
        ),
        (
            "SQLite commit of a 1-row update",
            "commits/s",
            sqlite_commit_probe(&files[COMMIT], false),
        ),
        (
            "raw steps: 1 commit per step (a result and the next start)",
            "steps/s",
            raw_steps(&files[RAW_STEPS]),
        ),
        (
            "raw runs: the engine's 11 commits per run, the store's statements",
            "steps/s",
            raw_runs(&files[RAW_RUNS], Synchronous::Full),
        ),
        (
            "**engine**: `start` + `outputs`, one run at a time",
            "steps/s",
            engine_chains(rt, &store),
        ),
        (
            "raw runs, `synchronous=OFF` (no sync: CPU and latency only)",
            "steps/s",
            raw_runs(&files[RAW_RUNS_OFF], Synchronous::Off),
        ),
        (
            "engine, `synchronous=OFF` (no sync: CPU and latency only)",
            "steps/s",
            engine_chains(rt, &store_off),
        ),
    ];
    // Warm-up: files and WALs created, the engines' specs stored.
    for (_, _, contender) in &mut contenders {
        contender();
    }
    let commits_before = (store.commits(), store_off.commits());
    let mut written = vec![0.0; contenders.len()];
    let mut series: Vec<Series> = contenders
        .iter()
        .map(|(name, unit, _)| Series {
            name,
            unit,
            rounds: Vec::new(),
        })
        .collect();
    let started = Instant::now();
    let mut reported = started;
    let mut rounds = 0usize;
    while started.elapsed() < budget {
        // Rotate the order, so no contender always follows the same one.
        for i in 0..contenders.len() {
            let index = (i + rounds) % contenders.len();
            let bytes = bytes_written();
            let t = Instant::now();
            let units = (contenders[index].2)();
            series[index]
                .rounds
                .push((units, t.elapsed().as_secs_f64()));
            written[index] += bytes_written() - bytes;
        }
        rounds += 1;
        if reported.elapsed() >= Duration::from_secs(10) {
            reported = Instant::now();
            eprintln!(
                "B3 {:.0}/{:.0} s (load {})",
                started.elapsed().as_secs_f64(),
                budget.as_secs_f64(),
                load_average()
            );
        }
    }
    let units = |index: usize| series[index].units();
    let commits_per_step = (store.commits() - commits_before.0) as f64 / units(ENGINE);
    let commits_per_step_off = (store_off.commits() - commits_before.1) as f64 / units(ENGINE_OFF);
    // Commits per unit of each contender's rate, to show the bytes written per commit.
    let commits_per_unit = [
        1.0,
        1.0,
        1.0,
        1.0,
        1.1,
        commits_per_step,
        1.1,
        commits_per_step_off,
    ];
    let empty_path = fresh(dir, "b3-empty.db");
    let mut empty = sqlite_commit_probe(&empty_path, true);
    let t = Instant::now();
    let mut empty_commits = 0.0;
    while t.elapsed() < Duration::from_millis(300) {
        empty_commits += empty();
    }
    let empty_rate = empty_commits / t.elapsed().as_secs_f64();
    drop(empty);
    drop(contenders);
    drop(store);
    drop(store_off);
    for file in files.iter().chain([&empty_path]) {
        remove_db(file);
    }

    let (engine, _, _) = quartiles(&series[ENGINE].rates());
    println!();
    println!("## B3: one run at a time, 10-step chain, SqliteStore (WAL, synchronous=FULL)");
    println!();
    println!(
        "{rounds} rounds in {:.0} s; each round gives every contender one unit (one run of 10 steps, or 20 syncs) in turn. \
         Per round: median (quartiles). All rounds: total units / total time.",
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "| contender | per round | all rounds | steps/s at 1 sync per step (per round) | bytes written per commit |"
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (index, s) in series.iter().enumerate() {
        let (m, q1, q3) = quartiles(&s.rates());
        let limit = if index < RAW_STEPS {
            format!("{m:.0}")
        } else {
            String::new()
        };
        let per_commit = written[index] / (units(index) * commits_per_unit[index]);
        println!(
            "| {} | {m:.0} {} ({q1:.0}–{q3:.0}) | {:.0} | {limit} | {per_commit:.0} |",
            s.name,
            s.unit,
            s.overall(),
        );
    }
    println!(
        "| SQLite empty transaction (writes nothing, so syncs nothing) | {empty_rate:.0} commits/s | | | 0 |"
    );
    println!();
    println!("engine: {commits_per_step:.2} commits per step");
    println!();
    println!("| ratio | per round: median (quartiles) | all rounds | target (on the median) |");
    println!("| --- | ---: | ---: | --- |");
    let ratio = |name: &str, mine: usize, other: usize, scale: f64, target: Option<f64>| {
        let overall = series[mine].overall() / (series[other].overall() * scale);
        let per_round: Vec<f64> = series[mine]
            .rates()
            .iter()
            .zip(series[other].rates())
            .map(|(a, b)| a / (b * scale))
            .collect();
        let (m, q1, q3) = quartiles(&per_round);
        let verdict = target.map_or(String::new(), |t| format!(">= {t}: {}", verdict(m >= t)));
        println!("| {name} | {m:.2} ({q1:.2}–{q3:.2}) | {overall:.2} | {verdict} |");
    };
    ratio("engine / raw steps", ENGINE, RAW_STEPS, 1.0, Some(0.85));
    ratio(
        "engine / raw runs (same commits)",
        ENGINE,
        RAW_RUNS,
        1.0,
        None,
    );
    ratio(
        "engine / fsync limit (in-place fdatasync rate, 1 sync per step)",
        ENGINE,
        OVERWRITE,
        1.0,
        Some(0.8),
    );
    ratio(
        "engine / appending fdatasync rate",
        ENGINE,
        APPEND,
        1.0,
        None,
    );
    ratio(
        "engine / SQLite 1-row commit rate",
        ENGINE,
        COMMIT,
        1.0,
        None,
    );
    ratio("raw steps / fsync limit", RAW_STEPS, OVERWRITE, 1.0, None);
    ratio(
        "raw steps / SQLite 1-row commit rate",
        RAW_STEPS,
        COMMIT,
        1.0,
        None,
    );
    ratio(
        "engine / raw runs, both `synchronous=OFF`",
        ENGINE_OFF,
        RAW_RUNS_OFF,
        1.0,
        None,
    );
    let per_commit = |index: usize, commits: f64| {
        let (m, _, _) = quartiles(&series[index].rates());
        1e6 / (m * commits)
    };
    println!();
    println!(
        "time per commit (median round): raw steps {:.0} µs, raw runs {:.0} µs, engine {:.0} µs; \
         with synchronous=OFF: raw runs {:.0} µs, engine {:.0} µs",
        per_commit(RAW_STEPS, 1.0),
        per_commit(RAW_RUNS, 1.1),
        per_commit(ENGINE, commits_per_step),
        per_commit(RAW_RUNS_OFF, 1.1),
        per_commit(ENGINE_OFF, commits_per_step_off)
    );
    engine
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**not met**"
    }
}
// ---------------------------------------------------------------------------------------
// B4: concurrent runs.

async fn concurrent_chains(engine: &Engine, runs: usize) {
    let mut set = JoinSet::new();
    for _ in 0..runs {
        let engine = engine.clone();
        set.spawn(async move { run_chain(&engine).await });
    }
    while let Some(joined) = set.join_next().await {
        ok(joined, "join a run");
    }
}

/// Run time and run-queue wait in ns, summed over this process's threads whose name
/// starts with `prefix` (`/proc/self/task/*/schedstat`; zero where unavailable).
fn thread_times(prefix: &str) -> (f64, f64) {
    let mut total = (0.0, 0.0);
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return total;
    };
    for task in tasks.flatten() {
        let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        let mut fields = stat
            .split_whitespace()
            .map(|f| f.parse::<f64>().unwrap_or(0.0));
        total.0 += fields.next().unwrap_or(0.0);
        total.1 += fields.next().unwrap_or(0.0);
    }
    total
}

/// The writer thread's and the tokio workers' run time and run-queue wait, in ns.
fn b4_threads() -> [f64; 4] {
    let writer = thread_times("workflow-sqlite");
    let workers = thread_times("tokio-r");
    [writer.0, writer.1, workers.0, workers.1]
}

/// What one run of B4's engine on SqliteStore did.
#[derive(Default)]
struct B4Engine {
    elapsed: f64,
    commits: u64,
    writes: u64,
    /// Writer run, writer wait, workers run, workers wait (ns) during the run.
    threads: [f64; 4],
}

/// The engine on a SQLite store at `path` (or on the in-memory store): `runs` chains at
/// once.
fn engine_concurrent(rt: &Runtime, path: Option<&Path>, runs: usize) -> B4Engine {
    let store = path.map(|path| open_store(path, Synchronous::Full));
    let shared = store.clone();
    let result = rt.block_on(async move {
        let engine = match shared {
            Some(store) => Engine::builder().shared_store(store).build(),
            None => Engine::builder().build(),
        };
        ok(engine.register::<Chain10>(()), "register Chain10");
        run_chain(&engine).await; // warm-up
        let before = store
            .as_ref()
            .map_or((0, 0), |s| (s.commits(), s.journal_writes()));
        let threads = b4_threads();
        let started = Instant::now();
        concurrent_chains(&engine, runs).await;
        let elapsed = started.elapsed().as_secs_f64();
        let threads_after = b4_threads();
        let after = store
            .as_ref()
            .map_or((0, 0), |s| (s.commits(), s.journal_writes()));
        B4Engine {
            elapsed,
            commits: after.0 - before.0,
            writes: after.1 - before.1,
            threads: [0, 1, 2, 3].map(|i| threads_after[i] - threads[i]),
        }
    });
    if let Some(path) = path {
        remove_db(path);
    }
    result
}

/// Raw rusqlite: the rows of `runs` chains (in the engine's interleaved order: every run
/// created, then entry 1 of every run, ...), `RAW_BATCH` per transaction. Returns the
/// elapsed time.
fn raw_batched(path: &Path, runs: usize, mirror: bool) -> f64 {
    enum Op {
        Create(usize),
        Append(usize, u64),
        Finish(usize),
    }
    let mut conn = raw_store(path, Synchronous::Full);
    let started_rows: Vec<String> = (0..runs)
        .map(|i| run_started::<Chain10>(i as u64))
        .collect();
    let step_rows: Vec<String> = (1..=2 * STEPS as u64).map(step_row).collect();
    let mut ops: Vec<Op> = (0..runs).map(Op::Create).collect();
    for seq in 1..=2 * STEPS as u64 {
        ops.extend((0..runs).map(|run| Op::Append(run, seq)));
    }
    ops.extend((0..runs).map(Op::Finish));
    let mut ids = vec![0u64; runs];
    let started = Instant::now();
    for batch in ops.chunks(RAW_BATCH) {
        txn(&mut conn, |c| {
            for op in batch {
                match *op {
                    Op::Create(run) => ids[run] = raw_create(c, &started_rows[run]),
                    Op::Append(run, seq) => {
                        let row = std::slice::from_ref(&step_rows[seq as usize - 1]);
                        raw_commit(c, ids[run], seq, row, mirror)
                    }
                    Op::Finish(run) => raw_finish(c, ids[run]),
                }
            }
        });
    }
    let elapsed = started.elapsed().as_secs_f64();
    drop(conn);
    remove_db(path);
    elapsed
}

fn b4(rt: &Runtime, dir: &Path, rounds: usize, runs: usize, b3_engine: Option<f64>) {
    const ENGINE: usize = 0;
    const RAW: usize = 1;
    const MIRROR: usize = 2;
    const MEMORY: usize = 3;
    let steps = (runs * STEPS) as f64;
    // Steps per second, per contender and round.
    let mut rates: [Vec<f64>; 4] = Default::default();
    let (mut commits, mut writes) = (vec![], vec![]);
    let mut threads: [Vec<f64>; 4] = Default::default();
    for round in 0..rounds {
        eprintln!("B4 round {}/{rounds} (load {})", round + 1, load_average());
        for i in 0..4 {
            let index = (i + round) % 4;
            let elapsed = match index {
                ENGINE => {
                    let path = fresh(dir, "b4-engine.db");
                    let run = engine_concurrent(rt, Some(&path), runs);
                    commits.push(run.commits as f64);
                    writes.push(run.writes as f64);
                    for (all, this) in threads.iter_mut().zip(run.threads) {
                        // As a share of the wall time.
                        all.push(this / 1e9 / run.elapsed);
                    }
                    run.elapsed
                }
                RAW => raw_batched(&fresh(dir, "b4-raw.db"), runs, false),
                MIRROR => raw_batched(&fresh(dir, "b4-raw-mirror.db"), runs, true),
                _ => engine_concurrent(rt, None, runs).elapsed,
            };
            rates[index].push(steps / elapsed);
        }
    }
    let m: Vec<f64> = rates.iter().map(|r| median(r.clone())).collect();
    let c = median(commits);
    let w = median(writes);
    // Requests per run: create, 20 appends, status.
    let requests = (runs * (2 * STEPS + 2)) as f64;
    let ratios = |a: usize, b: usize| -> Vec<f64> {
        rates[a].iter().zip(&rates[b]).map(|(x, y)| x / y).collect()
    };

    println!();
    println!("## B4: {runs} concurrent runs x {STEPS} steps, SqliteStore (WAL, synchronous=FULL), 2 worker threads");
    println!();
    println!("{rounds} rounds, the contenders in turn; medians (min–max)");
    println!();
    println!("| contender | runs/s | steps/s |");
    println!("| --- | ---: | ---: |");
    for (index, name) in [
        (
            RAW,
            format!("raw batched: plain inserts, {RAW_BATCH} rows per transaction"),
        ),
        (
            MIRROR,
            format!("raw batched: the store's statements, {RAW_BATCH} requests per transaction"),
        ),
        (ENGINE, "**engine on SqliteStore**".to_owned()),
        (
            MEMORY,
            "engine on MemoryStore (no I/O: the engine's CPU ceiling)".to_owned(),
        ),
    ] {
        println!(
            "| {name} | {:.0} | {:.0} ({}) |",
            m[index] / STEPS as f64,
            m[index],
            spread(&rates[index])
        );
    }
    println!();
    println!(
        "engine: {c:.0} commits for {requests:.0} write requests ({w:.0} journal rows): {:.0} requests per commit",
        requests / c
    );
    let share = |i: usize| 100.0 * median(threads[i].clone());
    println!(
        "engine, share of the wall time (median): the store's writer thread ran {:.0} % and waited for a CPU {:.0} %; \
         the 2 tokio workers ran {:.0} % and waited {:.0} % (of one CPU, summed)",
        share(0),
        share(1),
        share(2),
        share(3)
    );
    println!();
    println!("| ratio (per round) | median (min–max) | target |");
    println!("| --- | ---: | --- |");
    match b3_engine {
        Some(b3) => {
            let (min, max) = min_max(&rates[ENGINE]);
            println!(
                "| engine steps/s / B3 engine steps/s ({b3:.0}) | {:.1} ({:.1}–{:.1}) | >= 10: {} |",
                m[ENGINE] / b3,
                min / b3,
                max / b3,
                verdict(m[ENGINE] / b3 >= 10.0)
            );
        }
        None => println!("| engine / B3 | (run B3 too) | >= 10 |"),
    }
    for (name, other, target) in [
        ("engine / raw batched", RAW, Some(0.5)),
        ("engine / raw batched, store's statements", MIRROR, None),
        (
            "engine on SqliteStore / engine on MemoryStore",
            MEMORY,
            None,
        ),
    ] {
        let r = ratios(ENGINE, other);
        let med = median(r.clone());
        let (min, max) = min_max(&r);
        let verdict = target.map_or(String::new(), |t| format!(">= {t}: {}", verdict(med >= t)));
        println!("| {name} | {med:.2} ({min:.2}–{max:.2}) | {verdict} |");
    }
}

// ---------------------------------------------------------------------------------------
// B6: recovery after a kill.

/// The child process: starts `runs` gated runs, waits until all are parked at the gate,
/// says `ready` and waits to be killed.
fn b6_child(path: &Path, runs: usize) {
    flows::GATE_CLOSED.store(true, Ordering::Release);
    let rt = multi_thread();
    rt.block_on(async {
        let store = ok(SqliteStore::open_with(path, sqlite_options()), "open");
        let engine = Engine::builder().store(store).build();
        ok(engine.register::<Gated10>(()), "register Gated10");
        let mut set = JoinSet::new();
        for _ in 0..runs {
            let engine = engine.clone();
            set.spawn(
                async move { ok(engine.start::<Gated10>(Gated10Input {}).await, "start").id() },
            );
        }
        while let Some(joined) = set.join_next().await {
            ok(joined, "join a start");
        }
        let deadline = Instant::now() + Duration::from_secs(600);
        while flows::AT_GATE.load(Ordering::Acquire) < runs {
            assert!(Instant::now() < deadline, "runs did not reach the gate");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut out = std::io::stdout().lock();
        ok(writeln!(out, "ready"), "write to stdout");
        ok(out.flush(), "flush stdout");
        drop(out);
        std::future::pending::<()>().await;
    });
}

/// Builds the crash image in a child process and kills it (SIGKILL). Returns the time
/// the child took to get there.
fn b6_build(image: &Path, runs: usize) -> f64 {
    let exe = ok(std::env::current_exe(), "find the bench binary");
    let started = Instant::now();
    let mut child = ok(
        Process::new(exe)
            .env("DURABLE_B6_BUILD", image)
            .env("DURABLE_B6_RUNS", runs.to_string())
            .stdout(Stdio::piped())
            .spawn(),
        "start the B6 child",
    );
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        ok(
            BufReader::new(stdout).read_line(&mut line),
            "read the child",
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    ok(child.kill(), "kill the child");
    let status = ok(child.wait(), "reap the child");
    assert_eq!(line.trim(), "ready", "the B6 child failed ({status})");
    elapsed
}

fn copy_image(image: &Path, to: &Path) {
    remove_db(to);
    ok(fs::copy(image, to), "copy the crash image");
    let wal = companion(image, "-wal");
    if wal.exists() {
        ok(fs::copy(&wal, companion(to, "-wal")), "copy the crash WAL");
    }
}

fn count(conn: &Connection, sql: &str) -> u64 {
    ok(conn.query_row(sql, [], |row| row.get(0)), "count rows")
}

struct Recovery {
    open: f64,
    relaunched: f64,
    completed: f64,
}

/// Recovers a copy of the crash image: open, `resume_all`, then waits (polling a
/// separate connection every 2 ms) until no run is `running`.
fn b6_recover(rt: &Runtime, image: &Path, path: &Path, quick_check: bool, runs: usize) -> Recovery {
    copy_image(image, path);
    let started = Instant::now();
    let store = ok(
        SqliteStore::open_with(
            path,
            SqliteOptions {
                quick_check,
                ..sqlite_options()
            },
        ),
        "open the crash image",
    );
    let open = started.elapsed().as_secs_f64();
    let engine = rt.block_on(async {
        let engine = Engine::builder().store(store).build();
        ok(engine.register::<Gated10>(()), "register Gated10");
        let resumed = ok(engine.resume_all().await, "resume");
        assert_eq!(resumed, runs, "not every run resumed");
        engine
    });
    let relaunched = started.elapsed().as_secs_f64();
    let conn = raw_open(path, Synchronous::Full);
    let deadline = Instant::now() + Duration::from_secs(600);
    while count(&conn, "SELECT count(*) FROM runs WHERE status = 'running'") > 0 {
        assert!(Instant::now() < deadline, "recovered runs did not complete");
        std::thread::sleep(Duration::from_millis(2));
    }
    let completed = started.elapsed().as_secs_f64();
    let done = count(
        &conn,
        "SELECT count(*) FROM runs WHERE status = 'completed'",
    );
    assert_eq!(done as usize, runs, "not every recovered run completed");
    drop(conn);
    engine.shutdown();
    drop(engine);
    // Let the finished drivers drop their engine handles (and with them the store).
    std::thread::sleep(Duration::from_millis(50));
    remove_db(path);
    Recovery {
        open,
        relaunched,
        completed,
    }
}

/// `resume_all`'s store work alone, with no run driven: one bulk `claim`, then one
/// `Store::load` per run, one after the other (as `resume_all` does). Returns both
/// durations in seconds.
fn b6_parts(rt: &Runtime, image: &Path, path: &Path) -> (f64, f64) {
    copy_image(image, path);
    let store = open_store(path, Synchronous::Full);
    let result = rt.block_on(async {
        let started = Instant::now();
        let leases = ok(
            store
                .claim(Claim {
                    // Now, as an engine claims: the crashed engine's leases are
                    // compared with the clock.
                    claimant: Claimant {
                        owner: "bench",
                        lease_ms: 30_000,
                        now: now_ms(),
                    },
                    workflows: &[Gated10::NAME],
                    run: None,
                    reclaim_own: false,
                    limit: None,
                    claimable: workflow_core::store::Claimable::Any,
                    versions: None,
                })
                .await,
            "claim the runs",
        );
        let claim = started.elapsed().as_secs_f64();
        assert!(!leases.is_empty(), "the bulk claim took no run");
        let started = Instant::now();
        for lease in leases {
            let loaded = ok(store.load(lease.run).await, "load a run");
            assert!(loaded.is_some_and(|r| r.events.len() == STEPS));
        }
        (claim, started.elapsed().as_secs_f64())
    });
    drop(store);
    remove_db(path);
    result
}

fn b6(rt: &Runtime, dir: &Path, rounds: usize, runs: usize) {
    let image = fresh(dir, "b6-image.db");
    eprintln!("B6: building the crash image ({runs} runs) in a child process");
    let build = b6_build(&image, runs);
    let (db_size, wal_size) = (file_size(&image), file_size(&companion(&image, "-wal")));
    // Count on a copy: opening the image itself would checkpoint its WAL on close.
    let counted = fresh(dir, "b6-count.db");
    copy_image(&image, &counted);
    let conn = raw_open(&counted, Synchronous::Full);
    let rows = count(&conn, "SELECT count(*) FROM journal");
    let running = count(&conn, "SELECT count(*) FROM runs WHERE status = 'running'");
    drop(conn);
    remove_db(&counted);

    let (mut checked, mut unchecked, mut parts) = (vec![], vec![], vec![]);
    for round in 1..=rounds {
        eprintln!("B6 round {round}/{rounds} (load {})", load_average());
        checked.push(b6_recover(
            rt,
            &image,
            &fresh(dir, "b6-trial.db"),
            true,
            runs,
        ));
        unchecked.push(b6_recover(
            rt,
            &image,
            &fresh(dir, "b6-trial.db"),
            false,
            runs,
        ));
        parts.push(b6_parts(rt, &image, &fresh(dir, "b6-parts.db")));
    }
    remove_db(&image);

    println!();
    println!("## B6: recovery after SIGKILL, {runs} runs parked mid-way, SqliteStore (WAL, synchronous=FULL)");
    println!();
    println!(
        "crash image: {rows} journal rows, {running} running runs, db {:.1} MiB + WAL {:.1} MiB; built in {build:.1} s",
        db_size as f64 / 1048576.0,
        wal_size as f64 / 1048576.0
    );
    println!("medians of {rounds} recoveries of a copy of the image (range in brackets; page cache warm)");
    println!();
    println!("| open | `open` | `open` + `resume_all` (all re-launched) | until all completed | target <= 1 s (re-launched) |");
    println!("| --- | ---: | ---: | ---: | --- |");
    for (name, trials) in [
        ("`SqliteStore::open` (quick_check on, default)", &checked),
        ("quick_check off", &unchecked),
    ] {
        let open: Vec<f64> = trials.iter().map(|t| t.open * 1e3).collect();
        let relaunched: Vec<f64> = trials.iter().map(|t| t.relaunched * 1e3).collect();
        let completed: Vec<f64> = trials.iter().map(|t| t.completed * 1e3).collect();
        let r = median(relaunched.clone());
        println!(
            "| {name} | {:.0} ms [{}] | {r:.0} ms [{}] | {:.0} ms [{}] | {} |",
            median(open.clone()),
            spread(&open),
            spread(&relaunched),
            median(completed.clone()),
            spread(&completed),
            verdict(r <= 1000.0)
        );
    }
    let claim: Vec<f64> = parts.iter().map(|p| p.0 * 1e3).collect();
    let loads: Vec<f64> = parts.iter().map(|p| p.1 * 1e3).collect();
    let loads_median = median(loads.clone());
    println!();
    println!(
        "`resume_all`'s store work alone (no run driven, quick_check off): bulk `claim` {:.0} ms [{}], \
         then {runs} `Store::load` one after the other {loads_median:.0} ms [{}] ({:.0} µs per run)",
        median(claim.clone()),
        spread(&claim),
        spread(&loads),
        loads_median * 1e3 / runs as f64
    );
}

fn main() {
    if let Some(path) = std::env::var_os("DURABLE_B6_BUILD") {
        b6_child(Path::new(&path), env_number("DURABLE_B6_RUNS", 10_000));
        return;
    }
    // `cargo bench` passes `--bench`; other words select benchmarks.
    let wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .map(|arg| arg.to_lowercase())
        .collect();
    let run = |name: &str| wanted.is_empty() || wanted.iter().any(|w| w == name);

    let dir = std::env::var_os("DURABLE_DIR").map_or_else(
        || Path::new(env!("CARGO_TARGET_TMPDIR")).join("durable"),
        PathBuf::from,
    );
    ok(fs::create_dir_all(&dir), "create the bench directory");
    let rt = multi_thread();
    println!(
        "files in {} (load average at start: {})",
        dir.display(),
        load_average()
    );

    let budget = Duration::from_secs(env_number("B3_SECS", 30) as u64);
    let b3_engine = run("b3").then(|| b3(&rt, &dir, budget));
    if run("b4") {
        let runs = env_number("B4_RUNS", 1000);
        b4(&rt, &dir, env_number("B4_ROUNDS", 5), runs, b3_engine);
    }
    if run("b6") {
        let runs = env_number("B6_RUNS", 10_000);
        b6(&rt, &dir, env_number("B6_ROUNDS", 3), runs);
    }
    println!();
    println!("load average at the end: {}", load_average());
}

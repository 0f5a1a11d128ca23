//! The process the crash test kills. It resumes every unfinished run in the store, starts
//! the runs of a batch (idempotent starts, so a restart never starts a run twice), waits
//! for all of them and exits 0. Its effect steps apply their idempotency keys to a
//! separate ledger file, so the test can check no effect was applied twice.
//!
//! Usage: `crash_driver STORE LEDGER FIRST_RUN RUNS` with optional `CRASH_AT=point:n`
//! (kill itself with SIGKILL at the n-th time the engine reaches `point`).
//!
//! With `CRASH_WORKFLOW=blind` it runs `Blind` instead: a payment that is an external
//! effect, neither idempotent nor reconciled; with `KILL_IN_EFFECT=1` the process kills
//! itself right after the payment was applied and before its result is journaled. A run
//! whose outcome became unknown makes the driver exit with code 3.

use std::error::Error;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use workflow_core::prelude::*;
use workflow_sqlite::SqliteStore;

/// The ledger of external effects: one row per application.
pub struct Ledger {
    conn: Mutex<Connection>,
}

impl Ledger {
    fn open(path: &str) -> Result<Self, Box<dyn Error>> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS applied (key TEXT NOT NULL, value INTEGER NOT NULL);
             CREATE TABLE IF NOT EXISTS executions (key TEXT NOT NULL);",
        )?;
        Ok(Ledger {
            conn: Mutex::new(conn),
        })
    }

    /// Applies an effect once per key: the service deduplicates by idempotency key.
    fn apply(&self, key: &str, value: u64) -> Result<u64, StepError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| StepError::permanent("ledger lock poisoned"))?;
        let tx = conn.unchecked_transaction().map_err(io)?;
        tx.execute("INSERT INTO executions (key) VALUES (?1)", params![key])
            .map_err(io)?;
        let existing: Option<i64> = tx
            .query_row(
                "SELECT value FROM applied WHERE key = ?1",
                params![key],
                |row| row.get(0),
            )
            .optional()
            .map_err(io)?;
        if existing.is_none() {
            tx.execute(
                "INSERT INTO applied (key, value) VALUES (?1, ?2)",
                params![key, value as i64],
            )
            .map_err(io)?;
        }
        tx.commit().map_err(io)?;
        Ok(value)
    }

    fn find(&self, key: &str) -> Result<Option<u64>, StepError> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| StepError::permanent("ledger lock poisoned"))?;
        conn.query_row(
            "SELECT value FROM applied WHERE key = ?1",
            params![key],
            |row| row.get::<_, i64>(0),
        )
        .optional()
        .map(|v| v.map(|v| v as u64))
        .map_err(io)
    }
}

fn io(error: rusqlite::Error) -> StepError {
    StepError::unavailable(error.to_string())
}

mod work {
    use super::*;

    pub async fn compute(_ledger: &Ledger, order: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(3)).await;
        Ok(order * 10)
    }

    pub async fn double(_ledger: &Ledger, a: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        Ok(a * 2)
    }

    pub async fn charge(ledger: &Ledger, ctx: &StepContext, a: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        ledger.apply(&ctx.idempotency_key, a + 1)
    }

    pub async fn ship(
        ledger: &Ledger,
        ctx: &StepContext,
        b: u64,
        c: u64,
    ) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        ledger.apply(&ctx.idempotency_key, b + c)
    }

    pub async fn shipped(ledger: &Ledger, ctx: &StepContext) -> Result<Option<u64>, StepError> {
        ledger.find(&ctx.idempotency_key)
    }

    pub async fn total(_ledger: &Ledger, b: u64, c: u64, d: u64) -> Result<u64, StepError> {
        Ok(b + c + d)
    }

    /// One item of a map: an external effect keyed per item (`workflow/run/step/index`).
    pub async fn charge_item(ledger: &Ledger, ctx: &StepContext, n: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        ledger.apply(&ctx.idempotency_key, n + 5)
    }

    /// The child's effect.
    pub async fn pack(ledger: &Ledger, ctx: &StepContext, total: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(2)).await;
        ledger.apply(&ctx.idempotency_key, total + 1)
    }

    /// Applies the payment with the run's key, and with `KILL_IN_EFFECT` dies right after:
    /// the payment happened, its result was never journaled.
    pub async fn pay(ledger: &Ledger, ctx: &StepContext, amount: u64) -> Result<u64, StepError> {
        let paid = ledger.apply(&ctx.idempotency_key, amount)?;
        if std::env::var_os("KILL_IN_EFFECT").is_some() {
            super::kill_self();
        }
        Ok(paid)
    }
}

workflow! {
    /// One payment that is neither idempotent nor reconciled.
    pub workflow Blind(order: u64) env Ledger {
        step pay -> u64 { action: work::pay(env, ctx, order), effect: external }
    }
}

workflow! {
    /// Five steps, two external effects (one idempotent, one reconciled), a map of three
    /// keyed effects and a child run with one more.
    pub workflow Crashy(order: u64) env Ledger {
        step a -> u64 { action: work::compute(env, order) }
        step b -> u64 {
            action: work::charge(env, ctx, a),
            effect: external,
            idempotent: true,
            retry: { max_attempts: 3, initial: 10ms, max: 50ms },
        }
        step c -> u64 { action: work::double(env, a) }
        step d -> u64 {
            action: work::ship(env, ctx, b, c),
            effect: external,
            reconcile: work::shipped(env, ctx),
        }
        step e -> u64 { action: work::total(env, b, c, d) }
        step f -> u64 {
            for_each: n in [a, b, c],
            action: work::charge_item(env, ctx, n),
            effect: external,
            idempotent: true,
            concurrency: 2,
        }
        step g -> PackOutputs { workflow: Pack(total: e) }
    }
}

workflow! {
    /// The child run of `Crashy`: one keyed effect.
    pub workflow Pack(total: u64) env Ledger {
        step packed -> u64 {
            action: work::pack(env, ctx, total),
            effect: external,
            idempotent: true,
        }
    }
}

fn kill_self() -> ! {
    let pid = std::process::id().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status();
    std::process::abort()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, store, ledger, first, runs] = args.as_slice() else {
        return Err("usage: crash_driver STORE LEDGER FIRST_RUN RUNS".into());
    };
    let first: u64 = first.parse()?;
    let runs: u64 = runs.parse()?;
    let mut builder = Engine::builder().store(SqliteStore::open(store)?);
    if let Ok(spec) = std::env::var("CRASH_AT") {
        let (point, n) = spec.split_once(':').ok_or("CRASH_AT=point:n")?;
        let point: &'static str = Box::leak(point.to_owned().into_boxed_str());
        let n: u32 = n.parse()?;
        let seen = Arc::new(AtomicU32::new(0));
        builder = builder.fault_hook(move |at| {
            if at == point && seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
                kill_self();
            }
        });
    }
    let engine = builder.build();
    if std::env::var("CRASH_WORKFLOW").as_deref() == Ok("blind") {
        engine.register::<Blind>(Ledger::open(ledger)?)?;
        engine.resume_all().await?;
        let run = engine
            .start_with::<Blind>(
                BlindInput { order: first },
                StartOptions::key(format!("blind-{first}")),
            )
            .await?;
        return match run.outputs().await {
            Err(RunError::Failed { error, .. }) if error.kind() == ErrorKind::OutcomeUnknown => {
                eprintln!("outcome unknown: {}", error.message());
                std::process::exit(3)
            }
            other => other.map(drop).map_err(Into::into),
        };
    }
    engine.register::<Crashy>(Ledger::open(ledger)?)?;
    engine.register::<Pack>(Ledger::open(ledger)?)?;
    engine.resume_all().await?;
    let mut handles = Vec::new();
    for order in first..first + runs {
        let options = StartOptions::key(format!("order-{order}"));
        handles.push(
            engine
                .start_with::<Crashy>(CrashyInput { order }, options)
                .await?,
        );
    }
    for handle in handles {
        handle.outputs().await?;
    }
    Ok(())
}

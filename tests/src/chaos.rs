//! The workflow of the multi-process chaos test (`tests/tests/chaos.rs`), shared by the
//! test and its worker process (`src/bin/chaos_worker.rs`): retries, two keyed external
//! effects applied to a ledger table in the same database, and a human step that half the
//! runs get a decision for and the other half wait out.

use std::time::Duration;

use sqlx::{PgPool, Row};
use workflow_core::prelude::*;

/// How many runs the test starts when `CHAOS_RUNS` does not say.
pub const DEFAULT_RUNS: u64 = 200;

/// The human step's timeout: runs with an odd order number wait it out (the test's kills
/// go on past it, so deadlines fire on whichever worker holds the run then).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(15);

/// The external service: effects applied once per idempotency key, every execution
/// counted. It lives in the test's schema, next to the store.
#[derive(Debug, Clone)]
pub struct Ledger {
    pool: PgPool,
}

impl Ledger {
    /// Connects to the ledger in `schema` and creates its tables when missing.
    pub async fn open(url: &str, schema: &str) -> Result<Ledger, sqlx::Error> {
        let pool = crate::service::pool(
            url,
            schema,
            "CREATE TABLE IF NOT EXISTS ledger_applied (key text NOT NULL, value bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS ledger_executions (key text NOT NULL);
             CREATE TABLE IF NOT EXISTS ledger_fences (key text PRIMARY KEY, fence bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS ledger_refused (key text NOT NULL, fence bigint NOT NULL);",
        )
        .await?;
        Ok(Ledger { pool })
    }

    /// Applies an effect once per key (the service deduplicates by the key under a lock on
    /// it), and records the execution either way. A call whose fence is lower than the
    /// highest the ledger has seen for the key comes from a worker that lost the run: it is
    /// refused (and counted), as the fence pattern of the guide's many-workers chapter says.
    pub async fn apply(&self, key: &str, fence: u64, value: u64) -> Result<u64, StepError> {
        let io = |e: sqlx::Error| StepError::unavailable(e.to_string());
        let mut tx = self.pool.begin().await.map_err(io)?;
        if let Some(highest) = crate::service::check_fence(&mut tx, "ledger_fences", key, fence)
            .await
            .map_err(io)?
        {
            sqlx::query("INSERT INTO ledger_refused (key, fence) VALUES ($1, $2)")
                .bind(key)
                .bind(fence as i64)
                .execute(&mut *tx)
                .await
                .map_err(io)?;
            tx.commit().await.map_err(io)?;
            return Err(StepError::permanent(format!(
                "fence {fence} is older than {highest} for {key}: refused"
            )));
        }
        sqlx::query("INSERT INTO ledger_executions (key) VALUES ($1)")
            .bind(key)
            .execute(&mut *tx)
            .await
            .map_err(io)?;
        let existing = sqlx::query("SELECT value FROM ledger_applied WHERE key = $1")
            .bind(key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(io)?;
        let value = match existing {
            Some(row) => row.try_get::<i64, _>(0).map_err(io)? as u64,
            None => {
                sqlx::query("INSERT INTO ledger_applied (key, value) VALUES ($1, $2)")
                    .bind(key)
                    .bind(value as i64)
                    .execute(&mut *tx)
                    .await
                    .map_err(io)?;
                value
            }
        };
        tx.commit().await.map_err(io)?;
        Ok(value)
    }

    /// The value applied under `key`, if any.
    pub async fn find(&self, key: &str) -> Result<Option<u64>, StepError> {
        let row = sqlx::query("SELECT value FROM ledger_applied WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| StepError::unavailable(e.to_string()))?;
        Ok(row
            .and_then(|row| row.try_get::<i64, _>(0).ok())
            .map(|v| v as u64))
    }

    /// `(keys applied more than once, rows applied, executions, stale calls refused)`.
    pub async fn totals(&self) -> Result<(i64, i64, i64, i64), sqlx::Error> {
        let row = sqlx::query(
            "SELECT (SELECT count(*) FROM (SELECT key FROM ledger_applied
                                           GROUP BY key HAVING count(*) > 1) twice),
                    (SELECT count(*) FROM ledger_applied),
                    (SELECT count(*) FROM ledger_executions),
                    (SELECT count(*) FROM ledger_refused)",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok((
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        ))
    }
}

/// The steps.
pub mod work {
    use super::*;

    /// Fails its first two attempts with a transient error, then prices the order.
    pub async fn price(ctx: &StepContext, order: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if ctx.attempt <= 2 {
            return Err(StepError::unavailable("pricing is busy"));
        }
        Ok(order * 10)
    }

    /// Charges the price: an idempotent external effect.
    pub async fn charge(ledger: &Ledger, ctx: &StepContext, price: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let charged = ledger
            .apply(&ctx.idempotency_key, ctx.fence(), price + 1)
            .await?;
        // The answer takes a while to come back: a kill now repeats the call.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(charged)
    }

    /// Reserves stock.
    pub async fn reserve(order: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(order * 3)
    }

    /// Ships: an external effect asked about (reconciled) before it is run again.
    pub async fn ship(
        ledger: &Ledger,
        ctx: &StepContext,
        charge: u64,
        reserve: u64,
    ) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let shipped = ledger
            .apply(&ctx.idempotency_key, ctx.fence(), charge + reserve)
            .await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok(shipped)
    }

    /// Whether the shipment happened already.
    pub async fn shipped(ledger: &Ledger, ctx: &StepContext) -> Result<Option<u64>, StepError> {
        ledger.find(&ctx.idempotency_key).await
    }

    /// The total.
    pub async fn total(price: u64, ship: u64) -> Result<u64, StepError> {
        Ok(price + ship)
    }
}

workflow! {
    /// An order: priced with retries, charged (idempotent effect) while stock is reserved,
    /// approved by a person or by its deadline, shipped (reconciled effect), totalled.
    pub workflow ChaosOrder(order: u64) env Ledger {
        step price -> u64 {
            action: work::price(ctx, order),
            retry: { max_attempts: 20, backoff: fixed, initial: 300ms, jitter: none },
        }
        step charge -> u64 {
            action: work::charge(env, ctx, price),
            effect: external,
            idempotent: true,
            retry: { max_attempts: 20, backoff: fixed, initial: 20ms, jitter: none },
        }
        step reserve -> u64 { action: work::reserve(order) }
        human approve -> Approval {
            assignee: "ops",
            depends_on: [charge, reserve],
            timeout: 15s,
            on_timeout: approve,
        }
        step ship -> u64 {
            action: work::ship(env, ctx, charge, reserve),
            effect: external,
            reconcile: work::shipped(env, ctx),
            depends_on: [approve],
        }
        step total -> u64 { action: work::total(price, ship) }
    }
}

/// What every step of order `n` must output: price, charge, reserve, ship, total.
pub fn expected(order: u64) -> [u64; 5] {
    let price = order * 10;
    let charge = price + 1;
    let reserve = order * 3;
    let ship = charge + reserve;
    [price, charge, reserve, ship, price + ship]
}

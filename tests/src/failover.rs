//! The workflow and the downstream service of the failover tests
//! (`tests/tests/failover_pg.rs`). The service lives on another server than the one that
//! fails (the test's usual server), as a real downstream service would: it checks
//! fences and deadlines as the guide's pattern says (under a lock on the key, refuse a fence
//! lower than the highest seen, refuse a request decided after its `valid_until`), applies
//! an effect once per idempotency key, and keeps a ledger of every request it decided.

use std::time::Duration;

use sqlx::{PgPool, Row};
use workflow_core::prelude::*;

/// The downstream service.
#[derive(Debug, Clone)]
pub struct Bank {
    pool: PgPool,
}

/// What the service's ledger says after a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    /// Keys applied more than once.
    pub applied_twice: i64,
    /// Keys applied.
    pub applied: i64,
    /// Requests decided.
    pub requests: i64,
    /// Requests refused (a lower fence, or decided after their `valid_until`).
    pub refused: i64,
    /// Requests admitted with a fence lower than one admitted before them for their key.
    pub admitted_lower_after_higher: i64,
    /// Requests refused whose fence was the highest ever sent for their key (a legitimate
    /// owner refused: what a fence that went back would cause).
    pub refused_highest: i64,
}

impl Bank {
    /// Connects to the service in `schema` of `url`, creating its tables when missing.
    pub async fn open(url: &str, schema: &str) -> Result<Bank, sqlx::Error> {
        let pool = crate::service::pool(
            url,
            schema,
            "CREATE TABLE IF NOT EXISTS bank_fences (key text PRIMARY KEY, fence bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS bank_applied (key text NOT NULL, value bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS bank_requests
                 (id bigserial PRIMARY KEY, key text NOT NULL, fence bigint NOT NULL,
                  admitted boolean NOT NULL, why text NOT NULL);",
        )
        .await?;
        Ok(Bank { pool })
    }

    /// Applies `value` under `key` once, if `fence` and `valid_until` admit the request.
    pub async fn apply(
        &self,
        key: &str,
        fence: u64,
        valid_until: Option<u64>,
        value: u64,
    ) -> Result<u64, StepError> {
        let io = |e: sqlx::Error| StepError::unavailable(e.to_string());
        let mut tx = self.pool.begin().await.map_err(io)?;
        let refused_by_fence = crate::service::check_fence(&mut tx, "bank_fences", key, fence)
            .await
            .map_err(io)?;
        let now: i64 = sqlx::query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
            .fetch_one(&mut *tx)
            .await
            .map_err(io)?
            .get(0);
        let why = match (refused_by_fence, valid_until) {
            (Some(highest), _) => format!("fence {fence} < {highest}"),
            (None, Some(until)) if now > until as i64 => {
                format!("decided {} ms after valid_until", now - until as i64)
            }
            (None, _) => String::new(),
        };
        let admitted = why.is_empty();
        sqlx::query(
            "INSERT INTO bank_requests (key, fence, admitted, why) VALUES ($1, $2, $3, $4)",
        )
        .bind(key)
        .bind(fence as i64)
        .bind(admitted)
        .bind(&why)
        .execute(&mut *tx)
        .await
        .map_err(io)?;
        if !admitted {
            tx.commit().await.map_err(io)?;
            return Err(StepError::unavailable(format!("refused: {why}")));
        }
        let existing = sqlx::query("SELECT value FROM bank_applied WHERE key = $1")
            .bind(key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(io)?;
        let value = match existing {
            Some(row) => row.try_get::<i64, _>(0).map_err(io)? as u64,
            None => {
                sqlx::query("INSERT INTO bank_applied (key, value) VALUES ($1, $2)")
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

    /// The ledger's totals.
    pub async fn audit(&self) -> Result<Audit, sqlx::Error> {
        let row = sqlx::query(
            "SELECT
               (SELECT count(*) FROM (SELECT key FROM bank_applied GROUP BY key
                                      HAVING count(*) > 1) t),
               (SELECT count(*) FROM bank_applied),
               (SELECT count(*) FROM bank_requests),
               (SELECT count(*) FROM bank_requests WHERE NOT admitted),
               (SELECT count(*) FROM bank_requests r WHERE r.admitted AND EXISTS (
                    SELECT 1 FROM bank_requests e WHERE e.key = r.key AND e.admitted
                      AND e.id < r.id AND e.fence > r.fence)),
               (SELECT count(*) FROM bank_requests r WHERE NOT r.admitted AND r.fence = (
                    SELECT max(fence) FROM bank_requests e WHERE e.key = r.key))",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Audit {
            applied_twice: row.try_get(0)?,
            applied: row.try_get(1)?,
            requests: row.try_get(2)?,
            refused: row.try_get(3)?,
            admitted_lower_after_higher: row.try_get(4)?,
            refused_highest: row.try_get(5)?,
        })
    }
}

/// The steps.
pub mod work {
    use super::*;

    /// Reserves the amount (internal).
    pub async fn reserve(amount: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(amount * 2)
    }

    /// Charges it at the bank: an idempotent external effect, keyed, with its fence and
    /// deadline.
    pub async fn charge(bank: &Bank, ctx: &StepContext, reserved: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(30)).await;
        bank.apply(
            &ctx.idempotency_key,
            ctx.fence(),
            ctx.valid_until(),
            reserved + 1,
        )
        .await
    }

    /// Settles (internal).
    pub async fn settle(charge: u64) -> Result<u64, StepError> {
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(charge + 1)
    }
}

workflow! {
    /// A transfer: reserved, charged at the bank (a keyed, idempotent external effect),
    /// settled.
    pub workflow Transfer(amount: u64) env Bank {
        step reserve -> u64 { action: work::reserve(amount) }
        step charge -> u64 {
            action: work::charge(env, ctx, reserve),
            effect: external,
            idempotent: true,
            retry: { max_attempts: 100, backoff: fixed, initial: 200ms, jitter: none },
        }
        step settle -> u64 { action: work::settle(charge) }
    }
}

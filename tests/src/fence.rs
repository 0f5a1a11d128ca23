//! The workflow of the PostgreSQL fencing test (`tests/tests/fencing_pg.rs`), shared by the
//! test and its worker process (`src/bin/fence_worker.rs`): one unguarded external effect
//! (not idempotent, no reconcile) sent to a notification service that lives in the test's
//! schema. The service can check fences: it remembers the highest fence per idempotency
//! key and refuses lower ones; and it can check deadlines: it refuses a request it decides
//! after the request's `valid_until`. Every request goes to three copies of the service:
//! one that checks nothing (`none`), one that checks the fence (`fence`), one that checks
//! both as the guide's fence pattern says (`deadline`), so one run shows every outcome.

use std::time::Duration;

use sqlx::{PgPool, Row};
use workflow_core::prelude::*;

/// How long the first attempt's request is in flight before it lands (the worker froze
/// after sending it), and how long the first attempt then waits for its confirmation.
pub const IN_FLIGHT: Duration = Duration::from_secs(4);

/// The notification service, in the test's schema.
#[derive(Debug, Clone)]
pub struct Notifier {
    pool: PgPool,
}

impl Notifier {
    /// Connects to the service in `schema`, creating its tables when missing.
    pub async fn open(url: &str, schema: &str) -> Result<Notifier, sqlx::Error> {
        let pool = crate::service::pool(
            url,
            schema,
            "CREATE TABLE IF NOT EXISTS notify_fences (key text PRIMARY KEY, fence bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS notify_deadline_fences
                 (key text PRIMARY KEY, fence bigint NOT NULL);
             CREATE TABLE IF NOT EXISTS notify_applied
                 (mode text NOT NULL, key text NOT NULL, fence bigint NOT NULL, via text NOT NULL);
             CREATE TABLE IF NOT EXISTS notify_decided
                 (via text NOT NULL, fence bigint NOT NULL, late_ms bigint NOT NULL);",
        )
        .await?;
        Ok(Notifier { pool })
    }

    /// Sends one notification to the three copies of the service: `none` applies it,
    /// `fence` only when `fence` is at least the highest it has seen for `key`, `deadline`
    /// only when it also decides it no later than `valid_until` (by the service's clock,
    /// the server's `clock_timestamp()`). Each decision is recorded in `notify_decided`
    /// with how late it was (ms after `valid_until`; negative: in time).
    pub async fn send(
        &self,
        key: &str,
        fence: u64,
        valid_until: Option<u64>,
        via: &str,
    ) -> Result<(), StepError> {
        let io = |e: sqlx::Error| StepError::unavailable(e.to_string());
        let mut tx = self.pool.begin().await.map_err(io)?;
        let fenced = crate::service::check_fence(&mut tx, "notify_fences", key, fence)
            .await
            .map_err(io)?
            .is_none();
        let now: i64 = sqlx::query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
            .fetch_one(&mut *tx)
            .await
            .map_err(io)?
            .get(0);
        let late_ms = valid_until.map_or(i64::MIN, |until| now - until as i64);
        let in_time = late_ms <= 0;
        let deadline = in_time
            && crate::service::check_fence(&mut tx, "notify_deadline_fences", key, fence)
                .await
                .map_err(io)?
                .is_none();
        sqlx::query("INSERT INTO notify_decided (via, fence, late_ms) VALUES ($1, $2, $3)")
            .bind(via)
            .bind(fence as i64)
            .bind(late_ms)
            .execute(&mut *tx)
            .await
            .map_err(io)?;
        for (mode, admitted) in [("none", true), ("fence", fenced), ("deadline", deadline)] {
            if !admitted {
                continue;
            }
            sqlx::query(
                "INSERT INTO notify_applied (mode, key, fence, via) VALUES ($1, $2, $3, $4)",
            )
            .bind(mode)
            .bind(key)
            .bind(fence as i64)
            .bind(via)
            .execute(&mut *tx)
            .await
            .map_err(io)?;
        }
        tx.commit().await.map_err(io)?;
        Ok(())
    }

    /// The decisions made so far: `(via, fence, ms after valid_until)`, in order made.
    pub async fn decided(&self) -> Result<Vec<(String, u64, i64)>, sqlx::Error> {
        let rows = sqlx::query("SELECT via, fence, late_ms FROM notify_decided ORDER BY ctid")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.get(0), row.get::<i64, _>(1) as u64, row.get(2)))
            .collect())
    }

    /// What each copy applied: `(mode, fence, via)`, by mode, fence and via.
    pub async fn applied(&self) -> Result<Vec<(String, u64, String)>, sqlx::Error> {
        let rows =
            sqlx::query("SELECT mode, fence, via FROM notify_applied ORDER BY mode, fence, via")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|row| (row.get(0), row.get::<i64, _>(1) as u64, row.get(2)))
            .collect())
    }
}

/// Sends the notification. The first attempt's request leaves at once but lands only
/// after [`IN_FLIGHT`] (`via` "late": the worker froze with it on its way), and the attempt
/// then waits for a confirmation before sending a second request (`via` "body"); a later
/// attempt sends its request and returns.
pub async fn notify(service: &Notifier, ctx: &StepContext) -> Result<u64, StepError> {
    println!("entered {} {}", ctx.attempt, ctx.fence());
    let (key, fence) = (ctx.idempotency_key.clone(), ctx.fence());
    if ctx.attempt == 1 {
        let late = service.clone();
        let key = key.clone();
        // The deadline the request carries is the one current when it is sent.
        let valid_until = ctx.valid_until();
        tokio::spawn(async move {
            tokio::time::sleep(IN_FLIGHT).await;
            let _ = late.send(&key, fence, valid_until, "late").await;
        });
        tokio::time::sleep(IN_FLIGHT * 2).await;
    }
    service.send(&key, fence, ctx.valid_until(), "body").await?;
    Ok(fence)
}

workflow! {
    /// One unguarded external effect.
    pub workflow Notify(user: String) env Notifier {
        step notify -> u64 { action: notify(env, ctx), effect: external }
    }
}

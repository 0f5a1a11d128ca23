//! The workflow of the PostgreSQL fencing test (`tests/tests/fencing_pg.rs`), shared by the
//! test and its worker process (`src/bin/fence_worker.rs`): one unguarded external effect
//! (not idempotent, no reconcile) sent to a notification service that lives in the test's
//! schema. The service can check fences: it remembers the highest fence per idempotency
//! key and refuses lower ones. Every request goes to both a checking and a non-checking
//! copy of the service, so one run shows both outcomes.

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
             CREATE TABLE IF NOT EXISTS notify_applied
                 (checked boolean NOT NULL, key text NOT NULL, fence bigint NOT NULL, via text NOT NULL);",
        )
        .await?;
        Ok(Notifier { pool })
    }

    /// Sends one notification to both copies of the service: the checking one applies it
    /// only when `fence` is at least the highest it has seen for `key`.
    pub async fn send(&self, key: &str, fence: u64, via: &str) -> Result<(), StepError> {
        let io = |e: sqlx::Error| StepError::unavailable(e.to_string());
        let mut tx = self.pool.begin().await.map_err(io)?;
        let admitted = crate::service::check_fence(&mut tx, "notify_fences", key, fence)
            .await
            .map_err(io)?
            .is_none();
        for checked in [true, false] {
            if checked && !admitted {
                continue;
            }
            sqlx::query(
                "INSERT INTO notify_applied (checked, key, fence, via) VALUES ($1, $2, $3, $4)",
            )
            .bind(checked)
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

    /// What each copy applied: `(checked, fence, via)`, in order.
    pub async fn applied(&self) -> Result<Vec<(bool, u64, String)>, sqlx::Error> {
        let rows =
            sqlx::query("SELECT checked, fence, via FROM notify_applied ORDER BY fence, via")
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
        tokio::spawn(async move {
            tokio::time::sleep(IN_FLIGHT).await;
            let _ = late.send(&key, fence, "late").await;
        });
        tokio::time::sleep(IN_FLIGHT * 2).await;
    }
    service.send(&key, fence, "body").await?;
    Ok(fence)
}

workflow! {
    /// One unguarded external effect.
    pub workflow Notify(user: String) env Notifier {
        step notify -> u64 { action: notify(env, ctx), effect: external }
    }
}

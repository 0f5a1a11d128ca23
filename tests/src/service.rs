//! What the fake external services of the PostgreSQL tests share: a small pool in the
//! test's schema, and the fence check the guide describes (under a lock on the key, refuse a
//! fence lower than the highest seen for it, else remember it).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row, Transaction};

/// A pool of two connections to `url` with `schema` first on the search path; `ddl`
/// creates the service's tables when missing.
pub async fn pool(url: &str, schema: &str, ddl: &str) -> Result<PgPool, sqlx::Error> {
    let options = PgConnectOptions::from_str(url)?.options([("search_path", schema)]);
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options)
        .await?;
    sqlx::raw_sql(ddl).execute(&pool).await?;
    Ok(pool)
}

/// Locks `key` for the transaction and checks `fence` against the highest one `table`
/// (`key text PRIMARY KEY, fence bigint`) holds for it: `Ok(None)` when admitted (and
/// remembered), `Ok(Some(highest))` when refused.
pub async fn check_fence(
    tx: &mut Transaction<'_, Postgres>,
    table: &str,
    key: &str,
    fence: u64,
) -> Result<Option<u64>, sqlx::Error> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(key)
        .execute(&mut **tx)
        .await?;
    let highest: Option<i64> = sqlx::query(&format!("SELECT fence FROM {table} WHERE key = $1"))
        .bind(key)
        .fetch_optional(&mut **tx)
        .await?
        .map(|row| row.get(0));
    if let Some(highest) = highest.filter(|highest| (fence as i64) < *highest) {
        return Ok(Some(highest as u64));
    }
    sqlx::query(&format!(
        "INSERT INTO {table} (key, fence) VALUES ($1, $2)
         ON CONFLICT (key) DO UPDATE SET fence = EXCLUDED.fence"
    ))
    .bind(key)
    .bind(fence as i64)
    .execute(&mut **tx)
    .await?;
    Ok(None)
}

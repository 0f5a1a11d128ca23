//! The observer of the flow-control stress tests: a table outside the engine that the
//! stress workflow's actions write themselves, one row per attempt. An attempt inserts its
//! row (`entered_us`) before it does its work and sets `left_us` when the work is done,
//! both read from the machine's wall clock, which every worker process shares.
//!
//! On PostgreSQL the table lives in the test's schema beside the store's tables (but is
//! none of them); for the SQLite store it is a second SQLite file, never the store's.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};

/// One attempt of a step, as its action recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The job the run does (its input's `n`).
    pub job: u64,
    /// The run's workflow-level concurrency key.
    pub key: String,
    /// The step's name.
    pub step: String,
    /// The attempt's number (`ctx.attempt`).
    pub attempt: u32,
    /// The run's fencing token when the attempt began (`ctx.fence()`).
    pub fence: u64,
    /// The worker process.
    pub pid: u32,
    /// When the attempt began its work, in microseconds since the Unix epoch.
    pub entered_us: u64,
    /// When it finished its work; `None` when it never wrote that (killed, frozen, fenced).
    pub left_us: Option<u64>,
}

/// Where the rows go.
#[derive(Debug, Clone)]
enum Backend {
    Postgres(PgPool),
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
}

/// A handle on the observer's table, cheap to clone.
#[derive(Debug, Clone)]
pub struct Observer {
    backend: Backend,
}

const PG_DDL: &str = "CREATE TABLE IF NOT EXISTS stress_attempts (
    id bigserial PRIMARY KEY, job bigint NOT NULL, key text NOT NULL, step text NOT NULL,
    attempt integer NOT NULL, fence bigint NOT NULL, pid integer NOT NULL,
    entered_us bigint NOT NULL, left_us bigint)";

const SQLITE_DDL: &str = "CREATE TABLE IF NOT EXISTS stress_attempts (
    id INTEGER PRIMARY KEY, job INTEGER NOT NULL, key TEXT NOT NULL, step TEXT NOT NULL,
    attempt INTEGER NOT NULL, fence INTEGER NOT NULL, pid INTEGER NOT NULL,
    entered_us INTEGER NOT NULL, left_us INTEGER)";

/// An observer error: the database's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObserverError(pub String);

impl std::fmt::Display for ObserverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "observer: {}", self.0)
    }
}

impl std::error::Error for ObserverError {}

fn pg(e: sqlx::Error) -> ObserverError {
    ObserverError(e.to_string())
}

fn lite(e: rusqlite::Error) -> ObserverError {
    ObserverError(e.to_string())
}

impl Observer {
    /// The observer's table in `schema` of the PostgreSQL server at `url`, created when
    /// missing.
    pub async fn postgres(url: &str, schema: &str) -> Result<Observer, ObserverError> {
        let options = PgConnectOptions::from_str(url)
            .map_err(pg)?
            .options([("search_path", schema)]);
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .map_err(pg)?;
        sqlx::raw_sql(PG_DDL).execute(&pool).await.map_err(pg)?;
        Ok(Observer {
            backend: Backend::Postgres(pool),
        })
    }

    /// The observer's SQLite file at `path` (WAL, so the worker processes write it side by
    /// side), created when missing.
    pub fn sqlite(path: &Path) -> Result<Observer, ObserverError> {
        let conn = rusqlite::Connection::open(path).map_err(lite)?;
        conn.busy_timeout(Duration::from_secs(30)).map_err(lite)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(lite)?;
        conn.pragma_update(None, "synchronous", "OFF")
            .map_err(lite)?;
        conn.execute_batch(SQLITE_DDL).map_err(lite)?;
        Ok(Observer {
            backend: Backend::Sqlite(Arc::new(Mutex::new(conn))),
        })
    }

    /// Records that an attempt begins its work now; returns the row's id for
    /// [`Observer::leave`].
    pub async fn enter(&self, attempt: &Attempt) -> Result<i64, ObserverError> {
        match &self.backend {
            Backend::Postgres(pool) => sqlx::query_scalar(
                "INSERT INTO stress_attempts (job, key, step, attempt, fence, pid, entered_us)
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
            )
            .bind(attempt.job as i64)
            .bind(&attempt.key)
            .bind(&attempt.step)
            .bind(attempt.attempt as i32)
            .bind(attempt.fence as i64)
            .bind(attempt.pid as i32)
            .bind(attempt.entered_us as i64)
            .fetch_one(pool)
            .await
            .map_err(pg),
            Backend::Sqlite(conn) => {
                let (conn, attempt) = (Arc::clone(conn), attempt.clone());
                blocking(move || {
                    let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                    conn.execute(
                        "INSERT INTO stress_attempts (job, key, step, attempt, fence, pid, entered_us)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        rusqlite::params![
                            attempt.job as i64,
                            attempt.key,
                            attempt.step,
                            attempt.attempt,
                            attempt.fence as i64,
                            attempt.pid,
                            attempt.entered_us as i64
                        ],
                    )
                    .map_err(lite)?;
                    Ok(conn.last_insert_rowid())
                })
                .await
            }
        }
    }

    /// Records that the attempt of row `id` finished its work at `left_us`.
    pub async fn leave(&self, id: i64, left_us: u64) -> Result<(), ObserverError> {
        match &self.backend {
            Backend::Postgres(pool) => {
                sqlx::query("UPDATE stress_attempts SET left_us = $2 WHERE id = $1")
                    .bind(id)
                    .bind(left_us as i64)
                    .execute(pool)
                    .await
                    .map_err(pg)?;
                Ok(())
            }
            Backend::Sqlite(conn) => {
                let conn = Arc::clone(conn);
                blocking(move || {
                    let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                    conn.execute(
                        "UPDATE stress_attempts SET left_us = ?2 WHERE id = ?1",
                        rusqlite::params![id, left_us as i64],
                    )
                    .map_err(lite)?;
                    Ok(())
                })
                .await
            }
        }
    }

    /// Every attempt recorded, in the order they were entered.
    pub async fn attempts(&self) -> Result<Vec<Attempt>, ObserverError> {
        const SELECT: &str = "SELECT job, key, step, attempt, fence, pid, entered_us, left_us
                              FROM stress_attempts ORDER BY entered_us, id";
        match &self.backend {
            Backend::Postgres(pool) => {
                let rows = sqlx::query(SELECT).fetch_all(pool).await.map_err(pg)?;
                rows.into_iter()
                    .map(|row| {
                        Ok(Attempt {
                            job: row.try_get::<i64, _>(0)? as u64,
                            key: row.try_get(1)?,
                            step: row.try_get(2)?,
                            attempt: row.try_get::<i32, _>(3)? as u32,
                            fence: row.try_get::<i64, _>(4)? as u64,
                            pid: row.try_get::<i32, _>(5)? as u32,
                            entered_us: row.try_get::<i64, _>(6)? as u64,
                            left_us: row.try_get::<Option<i64>, _>(7)?.map(|v| v as u64),
                        })
                    })
                    .collect::<Result<_, sqlx::Error>>()
                    .map_err(pg)
            }
            Backend::Sqlite(conn) => {
                let conn = Arc::clone(conn);
                blocking(move || {
                    let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
                    let mut statement = conn.prepare(SELECT).map_err(lite)?;
                    let rows = statement
                        .query_map([], |row| {
                            Ok(Attempt {
                                job: row.get::<_, i64>(0)? as u64,
                                key: row.get(1)?,
                                step: row.get(2)?,
                                attempt: row.get(3)?,
                                fence: row.get::<_, i64>(4)? as u64,
                                pid: row.get(5)?,
                                entered_us: row.get::<_, i64>(6)? as u64,
                                left_us: row.get::<_, Option<i64>>(7)?.map(|v| v as u64),
                            })
                        })
                        .map_err(lite)?;
                    rows.collect::<Result<_, _>>().map_err(lite)
                })
                .await
            }
        }
    }
}

/// Runs `work` on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ObserverError> + Send + 'static,
) -> Result<T, ObserverError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ObserverError(e.to_string()))?
}

/// The observer file beside a SQLite store file: `runs.db` → `runs.observer.db`.
pub fn sqlite_path(store: &Path) -> PathBuf {
    store.with_extension("observer.db")
}

//! Worker rows and watched runs. A heartbeat renews its engine's leases (through
//! `workflow_renew`, which checks and records each run's journal length) and writes its
//! worker row in one statement; a watch marks a run watched for [`WATCH_HOLDS`], and
//! while it is, each commit to the run notifies the store's channel (`commit <id>`), which
//! every store's listener hands to its watchers of that run. A commit to a run nobody
//! watches reads the mark with the row it updates anyway and notifies nothing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use sqlx::{PgConnection, Row};
use tokio::sync::watch;

use super::sql::{int, uint, Answer};
use workflow_core::store::{Heartbeat, WorkerRow, WORKER_KEPT_MS};
use workflow_core::RunId;

/// Worker rows, and the mark of a run being watched.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE workers (
    name text PRIMARY KEY,
    started_at bigint NOT NULL,
    renewed_at bigint NOT NULL,
    lease_until bigint NOT NULL,
    draining_since bigint,
    stopped boolean NOT NULL DEFAULT false
);
ALTER TABLE runs ADD COLUMN watched_until timestamptz;
"#;

/// How long a watch marks its run watched: a watcher renews it after half of it.
pub(super) const WATCH_HOLDS: Duration = Duration::from_secs(30);

/// The payload prefix of a commit's notification.
pub(super) const COMMIT: &str = "commit ";

pub(super) async fn heartbeat(conn: &mut PgConnection, beat: Heartbeat<'_>) -> Answer<Vec<RunId>> {
    let rows = sqlx::query(
        "WITH clock AS (SELECT (extract(epoch FROM now()) * 1000)::bigint AS ms),
         beat AS (
            INSERT INTO workers (name, started_at, renewed_at, lease_until, draining_since, stopped)
            SELECT $1, $3, ms, ms + $2, $4, false FROM clock
            ON CONFLICT (name) DO UPDATE SET started_at = excluded.started_at,
                renewed_at = excluded.renewed_at, lease_until = excluded.lease_until,
                draining_since = excluded.draining_since,
                stopped = excluded.draining_since IS NOT NULL AND workers.stopped),
         gone AS (
            DELETE FROM workers
            WHERE name <> $1 AND renewed_at < (SELECT ms FROM clock) - $5)
         SELECT unnest(workflow_renew($1, $2))",
    )
    .bind(beat.claimant.owner)
    .bind(int(beat.claimant.lease_ms))
    .bind(int(beat.started))
    .bind(beat.draining.map(int))
    .bind(int(WORKER_KEPT_MS))
    .fetch_all(&mut *conn)
    .await?;
    let mut runs = rows
        .iter()
        .map(|row| row.try_get(0).map(|id| RunId(uint(id))))
        .collect::<Result<Vec<RunId>, sqlx::Error>>()?;
    runs.sort_unstable();
    Ok(runs)
}

pub(super) async fn workers(conn: &mut PgConnection) -> Answer<Vec<WorkerRow>> {
    let rows = sqlx::query(
        "SELECT name, started_at, renewed_at, lease_until, draining_since, stopped
         FROM workers ORDER BY name",
    )
    .fetch_all(&mut *conn)
    .await?;
    let row = |row: &sqlx::postgres::PgRow| {
        Ok(WorkerRow {
            name: row.try_get(0)?,
            started_at: uint(row.try_get(1)?),
            renewed_at: uint(row.try_get(2)?),
            lease_until: uint(row.try_get(3)?),
            draining_since: row.try_get::<Option<i64>, _>(4)?.map(uint),
            stopped: row.try_get(5)?,
        })
    };
    Ok(rows
        .iter()
        .map(row)
        .collect::<Result<Vec<WorkerRow>, sqlx::Error>>()?)
}

/// Marks `run` watched for [`WATCH_HOLDS`] (a finished run is not: nothing commits to it).
pub(super) async fn mark_watched(conn: &mut PgConnection, run: RunId) -> Answer<()> {
    sqlx::query(
        "UPDATE runs SET watched_until = now() + $2 * interval '1 millisecond'
         WHERE id = $1 AND status = 'running'",
    )
    .bind(int(run.0))
    .bind(WATCH_HOLDS.as_millis() as i64)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// This store's watchers, by run: each run's signal, bumped by the listener.
#[derive(Debug, Default)]
pub(super) struct Watchers {
    runs: Mutex<HashMap<RunId, watch::Sender<u64>>>,
}

impl Watchers {
    fn runs(&self) -> std::sync::MutexGuard<'_, HashMap<RunId, watch::Sender<u64>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A signal bumped after each commit to `run` the listener hears of.
    pub(super) fn subscribe(&self, run: RunId) -> watch::Receiver<u64> {
        let mut runs = self.runs();
        // Signals nobody holds any more go first.
        runs.retain(|_, signal| signal.receiver_count() > 0);
        runs.entry(run)
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// A notification's payload: bumps the watchers of the run it names; `false` when it
    /// is no commit's.
    pub(super) fn heard(&self, payload: &str) -> bool {
        let Some(id) = payload.strip_prefix(COMMIT) else {
            return false;
        };
        if let Ok(id) = id.parse() {
            if let Some(signal) = self.runs().get(&RunId(id)) {
                signal.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
        true
    }

    /// Bumps every watcher: the listener (re)connected and may have missed commits.
    pub(super) fn all(&self) {
        for signal in self.runs().values() {
            signal.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

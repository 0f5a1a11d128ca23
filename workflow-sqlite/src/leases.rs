//! Leases: claims (queued runs through their own index), renewals (with the worker's row,
//! for heartbeats) and releases, each one request inside the writer's transaction.

use rusqlite::params;

use super::schema::{db_error, Db};
use super::writer::Writer;
use workflow_core::journal::Timestamp;
use workflow_core::store::{
    Claim, Claimable, Claimant, Heartbeat, Lease, StoreError, WorkerRow, WORKER_KEPT_MS,
};
use workflow_core::RunId;

/// A JSON array of strings, for `IN (SELECT value FROM json_each(?))`.
fn json_list<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_owned())
}

pub(super) fn claim(writer: &Writer, claim: &Claim<'_>) -> Result<(Vec<Lease>, u64), StoreError> {
    let db: &Db = writer;
    let Claimant {
        owner,
        lease_ms,
        now,
    } = claim.claimant;
    let limit = claim
        .limit
        .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    if claim.claimable == Claimable::Queued && claim.run.is_none() {
        return claim_queued(writer, claim, limit);
    }
    let mut leases = db
        .conn
        .prepare_cached(
            "UPDATE runs SET owner = ?1, lease_token = lease_token + 1, lease_until = ?2
             WHERE id IN (
                SELECT id FROM runs
                WHERE status = 'running'
                  AND workflow IN (SELECT value FROM json_each(?3))
                  AND (?4 IS NULL OR id = ?4)
                  AND (?9 IS NULL OR fingerprint IN (SELECT value FROM json_each(?9)))
                  AND (owner IS NULL
                       OR (owner = ?1 AND ?5)
                       OR (owner <> ?1 AND lease_until <= ?6))
                  AND NOT EXISTS (SELECT 1 FROM flow_gates g
                                  WHERE g.run_id = runs.id AND g.admitted = 0)
                  AND (?8 = 0 OR (?8 = 1) = (owner IS NULL AND NOT EXISTS (
                      SELECT 1 FROM journal j WHERE j.run_id = runs.id AND j.seq >= 1
                        AND json_extract(j.event, '$.event') <> 'initiated')))
                ORDER BY id LIMIT ?7)
             RETURNING id, lease_token",
        )
        .and_then(|mut s| {
            s.query_map(
                params![
                    owner,
                    now.saturating_add(lease_ms),
                    json_list(claim.workflows),
                    claim.run.map(|r| r.0),
                    claim.reclaim_own,
                    now,
                    limit,
                    claim.claimable.code(),
                    claim.versions.map(json_list)
                ],
                |row| {
                    Ok(Lease {
                        run: RunId(row.get(0)?),
                        token: row.get(1)?,
                    })
                },
            )?
            .collect::<rusqlite::Result<Vec<Lease>>>()
        })
        .map_err(db_error(db))?;
    leases.sort_unstable_by_key(|lease| lease.run);
    let mut known = writer.known.borrow_mut();
    for lease in &leases {
        known.claimed(lease.run, owner, lease.token);
    }
    Ok((leases, 0))
}

/// A claim of queued runs (nobody's, never begun, not waiting for an admission), oldest
/// first: read through the index of unowned runs that wait for no admission, so runs queued
/// behind a concurrency key are not walked through by every claim.
fn claim_queued(
    writer: &Writer,
    claim: &Claim<'_>,
    limit: i64,
) -> Result<(Vec<Lease>, u64), StoreError> {
    let db: &Db = writer;
    let Claimant {
        owner,
        lease_ms,
        now,
    } = claim.claimant;
    let mut leases = db
        .conn
        .prepare_cached(
            "UPDATE runs SET owner = ?1, lease_token = lease_token + 1, lease_until = ?2
             WHERE id IN (
                SELECT id FROM runs INDEXED BY runs_queued
                WHERE status = 'running' AND owner IS NULL AND waiting = 0
                  AND workflow IN (SELECT value FROM json_each(?3))
                  AND (?4 IS NULL OR fingerprint IN (SELECT value FROM json_each(?4)))
                  AND NOT EXISTS (SELECT 1 FROM flow_gates g
                                  WHERE g.run_id = runs.id AND g.admitted = 0)
                  AND NOT EXISTS (
                      SELECT 1 FROM journal j WHERE j.run_id = runs.id AND j.seq >= 1
                        AND json_extract(j.event, '$.event') <> 'initiated')
                ORDER BY id LIMIT ?5)
             RETURNING id, lease_token",
        )
        .and_then(|mut s| {
            s.query_map(
                params![
                    owner,
                    now.saturating_add(lease_ms),
                    json_list(claim.workflows),
                    claim.versions.map(json_list),
                    limit,
                ],
                |row| {
                    Ok(Lease {
                        run: RunId(row.get(0)?),
                        token: row.get(1)?,
                    })
                },
            )?
            .collect::<rusqlite::Result<Vec<Lease>>>()
        })
        .map_err(db_error(db))?;
    leases.sort_unstable_by_key(|lease| lease.run);
    let mut known = writer.known.borrow_mut();
    for lease in &leases {
        known.claimed(lease.run, owner, lease.token);
    }
    Ok((leases, 0))
}

pub(super) fn renew(
    db: &Db,
    owner: &str,
    until: Timestamp,
) -> Result<(Vec<RunId>, u64), StoreError> {
    let mut runs = db
        .conn
        .prepare_cached("UPDATE runs SET lease_until = ?2 WHERE owner = ?1 RETURNING id")
        .and_then(|mut s| {
            s.query_map(params![owner, until], |row| Ok(RunId(row.get(0)?)))?
                .collect::<rusqlite::Result<Vec<RunId>>>()
        })
        .map_err(db_error(db))?;
    runs.sort_unstable();
    Ok((runs, 0))
}

/// Worker rows ([`Heartbeat`]): one per engine that keeps leases, by name.
pub(super) const WORKERS_MIGRATION: &str = "CREATE TABLE workers (
        name TEXT PRIMARY KEY,
        started_at INTEGER NOT NULL,
        renewed_at INTEGER NOT NULL,
        lease_until INTEGER NOT NULL,
        draining_since INTEGER,
        stopped INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;";

/// A heartbeat's values, moved to the writer thread.
#[derive(Debug)]
pub(super) struct Beat {
    owner: String,
    lease_ms: u64,
    now: Timestamp,
    started: Timestamp,
    draining: Option<Timestamp>,
}

impl From<Heartbeat<'_>> for Beat {
    fn from(beat: Heartbeat<'_>) -> Self {
        Beat {
            owner: beat.claimant.owner.to_owned(),
            lease_ms: beat.claimant.lease_ms,
            now: beat.claimant.now,
            started: beat.started,
            draining: beat.draining,
        }
    }
}

/// Renews the beat's leases and writes its worker row, in the writer's transaction.
pub(super) fn heartbeat(db: &Db, beat: &Beat) -> Result<(Vec<RunId>, u64), StoreError> {
    let until = beat.now.saturating_add(beat.lease_ms);
    let held = renew(db, &beat.owner, until)?;
    db.conn
        .prepare_cached(
            "INSERT INTO workers (name, started_at, renewed_at, lease_until, draining_since, stopped)
             VALUES (?1, ?2, ?3, ?4, ?5, 0)
             ON CONFLICT (name) DO UPDATE SET started_at = excluded.started_at,
                 renewed_at = excluded.renewed_at, lease_until = excluded.lease_until,
                 draining_since = excluded.draining_since,
                 stopped = excluded.draining_since IS NOT NULL AND workers.stopped",
        )
        .and_then(|mut s| s.execute(params![beat.owner, beat.started, beat.now, until, beat.draining]))
        .and_then(|_| {
            db.conn
                .prepare_cached("DELETE FROM workers WHERE renewed_at < ?2 AND name <> ?1")
        })
        .and_then(|mut s| {
            s.execute(params![beat.owner, beat.now.saturating_sub(WORKER_KEPT_MS)])
        })
        .map_err(db_error(db))?;
    Ok(held)
}

/// The worker rows, by name.
pub(super) fn workers(db: &Db) -> Result<Vec<WorkerRow>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT name, started_at, renewed_at, lease_until, draining_since, stopped
             FROM workers ORDER BY name",
        )
        .and_then(|mut s| {
            s.query_map([], |row| {
                Ok(WorkerRow {
                    name: row.get(0)?,
                    started_at: row.get(1)?,
                    renewed_at: row.get(2)?,
                    lease_until: row.get(3)?,
                    draining_since: row.get(4)?,
                    stopped: row.get(5)?,
                })
            })?
            .collect()
        })
        .map_err(db_error(db))
}

pub(super) fn release(
    writer: &Writer,
    owner: &str,
    runs: Option<&[RunId]>,
) -> Result<((), u64), StoreError> {
    let db: &Db = writer;
    let ids = runs.map(|runs| json_list(&runs.iter().map(|r| r.0).collect::<Vec<_>>()));
    db.conn
        .prepare_cached(
            "UPDATE runs SET owner = NULL
             WHERE owner = ?1 AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))",
        )
        .and_then(|mut s| s.execute(params![owner, ids]))
        .map_err(db_error(db))?;
    if runs.is_none() {
        // The engine stops: its worker row says so.
        db.conn
            .prepare_cached("UPDATE workers SET stopped = 1 WHERE name = ?1")
            .and_then(|mut s| s.execute(params![owner]))
            .map_err(db_error(db))?;
    }
    writer.known.borrow_mut().released(owner, runs);
    Ok(((), 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use workflow_core::store::Store;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_from_before_worker_rows_keeps_them_once_opened() {
        let (path, conn) = crate::schema::file_before(WORKERS_MIGRATION, "workflow-workers");
        // Closed before the store opens the file.
        drop(conn);
        let store = SqliteStore::open(&path).expect("open and migrate");
        assert_eq!(store.workers().await.expect("workers"), Vec::new());
        let beat = |owner, now| Heartbeat {
            claimant: Claimant {
                owner,
                lease_ms: 30_000,
                now,
            },
            started: 1_000,
            draining: None,
        };
        store.heartbeat(beat("a", 2_000)).await.expect("heartbeat");
        let rows = store.workers().await.expect("workers");
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].renewed_at, rows[0].lease_until), (2_000, 32_000));
        // A row not renewed for a day is deleted by the next heartbeat of anyone.
        let later = beat("b", 2_000 + WORKER_KEPT_MS + 1);
        store.heartbeat(later).await.expect("heartbeat");
        let names: Vec<String> = store
            .workers()
            .await
            .expect("workers")
            .into_iter()
            .map(|row| row.name)
            .collect();
        assert_eq!(names, ["b"]);
    }
}

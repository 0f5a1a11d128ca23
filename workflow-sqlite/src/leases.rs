//! Leases: claims (queued runs through their own index), renewals and releases, each one
//! request inside the writer's transaction.

use rusqlite::params;

use super::schema::{db_error, Db};
use super::writer::Writer;
use workflow_core::journal::Timestamp;
use workflow_core::store::{Claim, Claimable, Claimant, Lease, StoreError};
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
    writer.known.borrow_mut().released(owner, runs);
    Ok(((), 0))
}

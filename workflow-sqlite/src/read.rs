//! The store's reads: each function runs on the read connection and verifies every row's
//! checksum before it hands the row back.

use rusqlite::types::Value;
use rusqlite::{params, OptionalExtension};

use super::schema::{db_error, Db};
use super::sql::{damaged_spec, raw_run, run_record, RawRun, RUN_COLUMNS};
use workflow_core::journal::Event;
use workflow_core::store::checksum;
use workflow_core::store::{
    DeadLetter, InboxItem, Message, RunFilter, RunRecord, SpecRecord, StoreError, StoredRun,
};
use workflow_core::{ErrorKind, RunId};

/// Whether a run's inbox holds messages with ids above `after`.
pub(super) fn inbox_holds(db: &Db, run: RunId, after: u64) -> Result<bool, StoreError> {
    db.conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM inbox WHERE run_id = ?1 AND id > ?2)")
        .and_then(|mut s| s.query_row(params![run.0, after], |row| row.get(0)))
        .map_err(db_error(db))
}

pub(super) fn inbox(db: &Db, run: RunId, after: u64) -> Result<Vec<InboxItem>, StoreError> {
    let fail = db_error(db);
    let exists: Option<u64> = db
        .conn
        .prepare_cached("SELECT id FROM runs WHERE id = ?1")
        .and_then(|mut s| s.query_row(params![run.0], |row| row.get(0)).optional())
        .map_err(&fail)?;
    if exists.is_none() {
        return Err(StoreError::UnknownRun(run));
    }
    let rows = db
        .conn
        .prepare_cached(
            "SELECT id, message, at, key, crc FROM inbox WHERE run_id = ?1 AND id > ?2 ORDER BY id",
        )
        .and_then(|mut s| {
            s.query_map(params![run.0, after], |row| {
                Ok((
                    row.get::<_, u64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, u32>(4)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<(u64, String, u64, Option<String>, u32)>>>()
        })
        .map_err(&fail)?;
    rows.into_iter()
        .map(|(id, text, at, key, crc)| {
            if checksum::inbox(id, run, key.as_deref(), &text, at) != crc {
                return Err(StoreError::CorruptRow {
                    table: "inbox".to_owned(),
                    key: id.to_string(),
                });
            }
            let message: Message = serde_json::from_str(&text).map_err(|e| {
                db.corrupt(format!("inbox message {id} of {run} does not decode: {e}"))
            })?;
            Ok(InboxItem {
                id,
                run,
                message,
                at,
            })
        })
        .collect()
}

pub(super) fn pending_inbox(db: &Db, after: u64) -> Result<(Vec<RunId>, u64), StoreError> {
    let fail = db_error(db);
    let runs = db
        .conn
        .prepare_cached(
            "SELECT DISTINCT i.run_id FROM inbox i JOIN runs r ON r.id = i.run_id
             WHERE i.id > ?1 AND i.id > r.inbox_cursor
               AND r.status IN ('running', 'parked')
             ORDER BY i.run_id",
        )
        .and_then(|mut s| {
            s.query_map(params![after], |row| Ok(RunId(row.get(0)?)))?
                .collect::<rusqlite::Result<Vec<RunId>>>()
        })
        .map_err(&fail)?;
    let last: u64 = db
        .conn
        .prepare_cached("SELECT COALESCE(MAX(id), 0) FROM inbox")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(&fail)?;
    Ok((runs, last.max(after)))
}

pub(super) fn load(db: &Db, run: RunId) -> Result<Option<StoredRun>, StoreError> {
    let fail = db_error(db);
    // One read transaction: the row and the journal from the same snapshot.
    let snapshot = db.conn.unchecked_transaction().map_err(&fail)?;
    let loaded = load_in(db, run)?;
    snapshot.commit().map_err(&fail)?;
    Ok(loaded)
}

/// Several runs with their journals, in the order asked, without those that do not exist
/// or repeat: one read transaction, so every run from the same snapshot.
pub(super) fn load_many(db: &Db, runs: &[RunId]) -> Result<Vec<StoredRun>, StoreError> {
    let fail = db_error(db);
    let snapshot = db.conn.unchecked_transaction().map_err(&fail)?;
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(runs.len());
    for &run in runs {
        if seen.insert(run) {
            if let Some(stored) = load_in(db, run)? {
                out.push(stored);
            }
        }
    }
    snapshot.commit().map_err(&fail)?;
    Ok(out)
}

/// A run with its journal, read inside the caller's transaction.
fn load_in(db: &Db, run: RunId) -> Result<Option<StoredRun>, StoreError> {
    let fail = db_error(db);
    let raw = db
        .conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))
        .and_then(|mut s| s.query_row(params![run.0], raw_run).optional())
        .map_err(&fail)?;
    let Some(raw) = raw else {
        return Ok(None);
    };
    let record = run_record(db, raw)?;
    let mut statement = db
        .conn
        .prepare_cached("SELECT seq, event, crc FROM journal WHERE run_id = ?1 ORDER BY seq")
        .map_err(&fail)?;
    let mut rows = statement.query(params![run.0]).map_err(&fail)?;
    let mut events = Vec::new();
    while let Some(row) = rows.next().map_err(&fail)? {
        let seq: u64 = row.get(0).map_err(&fail)?;
        let expected = events.len() as u64;
        if seq != expected {
            // An entry is missing from the middle of the journal.
            return Err(StoreError::Corrupt {
                run,
                seq: expected.min(seq),
            });
        }
        let text = match row.get_ref(1).map_err(&fail)?.as_str() {
            Ok(text) => text,
            Err(_) => return Err(StoreError::Corrupt { run, seq }),
        };
        let crc: u32 = row.get(2).map_err(&fail)?;
        if checksum::entry(run, seq, text) != crc {
            return Err(StoreError::Corrupt { run, seq });
        }
        let bad = |reason: String| StoreError::BadRow { run, seq, reason };
        events.push(serde_json::from_str::<Event>(text).map_err(|e| bad(e.to_string()))?);
    }
    Ok(Some(StoredRun { record, events }))
}

/// Runs indexed for the listing in its order: by status and by workflow, each newest
/// first (`runs_status` orders a status's runs by workflow first, so a listing by status
/// alone sorted every run of the status).
pub(super) const LIST_MIGRATION: &str = "CREATE INDEX runs_status_id ON runs (status, id);
    CREATE INDEX runs_workflow_id ON runs (workflow, id);";

/// The listing's statement for the filters `filter` has, and its parameters: one condition
/// per filter given and none for the others, so SQLite plans each combination on its
/// index (`runs_status_id`, `runs_workflow_id`, `runs_status` for both, `run_search_value`
/// for search values). A `?n IS NULL OR status = ?n` condition, one statement for every
/// combination, used none of them: a listing of a rare status read the whole table.
pub(super) fn listing(filter: &RunFilter) -> (String, Vec<Value>) {
    let mut conditions = Vec::new();
    let mut values = Vec::new();
    let mut condition = |column: &str, value: Value| {
        values.push(value);
        conditions.push(format!("{column} ?{}", values.len()));
    };
    if let Some(workflow) = &filter.workflow {
        condition("workflow =", Value::Text(workflow.clone()));
    }
    if let Some(status) = filter.status {
        condition("status =", Value::Text(status.as_str().to_owned()));
    }
    if let Some(before) = filter.before {
        condition("id <", Value::Integer(before.0 as i64));
    }
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs");
    if !conditions.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conditions.join(" AND "));
    }
    let search = super::search::clause(filter.search.len(), values.len() + 1);
    match (conditions.is_empty(), search.strip_prefix(" AND ")) {
        (true, Some(first)) => sql.push_str(&format!(" WHERE {first}")),
        _ => sql.push_str(&search),
    }
    for (name, value) in &filter.search {
        values.extend([Value::Text(name.clone()), Value::Text(value.clone())]);
    }
    let limit = filter
        .limit
        .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    values.push(Value::Integer(limit));
    sql.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", values.len()));
    (sql, values)
}

pub(super) fn list_runs(db: &Db, filter: &RunFilter) -> Result<Vec<RunRecord>, StoreError> {
    let fail = db_error(db);
    let (sql, values) = listing(filter);
    let raws = db
        .conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_map(rusqlite::params_from_iter(values), raw_run)?
                .collect::<rusqlite::Result<Vec<RawRun>>>()
        })
        .map_err(&fail)?;
    raws.into_iter().map(|raw| run_record(db, raw)).collect()
}

/// A `dead_letters` row as stored, before its kind and checksum are checked.
type RawLetter = (RunId, String, String, u32, String, String, String, u64, u32);

pub(super) fn list_dead_letters(db: &Db) -> Result<Vec<DeadLetter>, StoreError> {
    let fail = db_error(db);
    let raws = db
        .conn
        .prepare_cached(
            "SELECT run_id, workflow, step, attempts, kind, message, trace_id, at, crc
             FROM dead_letters ORDER BY run_id DESC",
        )
        .and_then(|mut s| {
            s.query_map([], |row| -> rusqlite::Result<RawLetter> {
                Ok((
                    RunId(row.get(0)?),
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                    row.get(7)?,
                    row.get(8)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<RawLetter>>>()
        })
        .map_err(&fail)?;
    raws.into_iter()
        .map(
            |(run, workflow, step, attempts, kind, message, trace_id, at, crc)| {
                let damaged = || StoreError::CorruptRow {
                    table: "dead_letters".to_owned(),
                    key: run.to_string(),
                };
                let kind = kind.parse::<ErrorKind>().map_err(|_| damaged())?;
                let letter = DeadLetter {
                    run,
                    workflow,
                    step,
                    attempts,
                    kind,
                    message,
                    trace_id,
                    at,
                };
                if checksum::dead_letter(&letter) != crc {
                    return Err(damaged());
                }
                Ok(letter)
            },
        )
        .collect()
}

pub(super) fn spec(db: &Db, fingerprint: &str) -> Result<Option<String>, StoreError> {
    let row: Option<(String, String, u32)> = db
        .conn
        .prepare_cached("SELECT spec, workflow, crc FROM specs WHERE fingerprint = ?1")
        .and_then(|mut s| {
            s.query_row(params![fingerprint], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .optional()
        })
        .map_err(db_error(db))?;
    match row {
        Some((spec, workflow, crc)) if checksum::spec(fingerprint, &workflow, &spec) != crc => {
            Err(damaged_spec(fingerprint))
        }
        row => Ok(row.map(|(spec, _, _)| spec)),
    }
}

pub(super) fn specs(db: &Db, workflow: &str) -> Result<Vec<SpecRecord>, StoreError> {
    let rows = db
        .conn
        .prepare_cached(
            "SELECT fingerprint, workflow, spec, first_registered, last_registered, crc FROM specs
             WHERE workflow = ?1 ORDER BY last_registered DESC, first_registered DESC",
        )
        .and_then(|mut s| {
            s.query_map(params![workflow], |row| {
                Ok((
                    SpecRecord {
                        fingerprint: row.get(0)?,
                        workflow: row.get(1)?,
                        spec: row.get(2)?,
                        first_registered: row.get(3)?,
                        last_registered: row.get(4)?,
                    },
                    row.get::<_, u32>(5)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<(SpecRecord, u32)>>>()
        })
        .map_err(db_error(db))?;
    rows.into_iter()
        .map(|(record, crc)| {
            if checksum::spec(&record.fingerprint, &record.workflow, &record.spec) == crc {
                Ok(record)
            } else {
                Err(damaged_spec(&record.fingerprint))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use workflow_core::store::{RunStatus, Store};

    /// What SQLite plans for the listing by `filter` on the file at `path`.
    fn plan(path: &std::path::Path, filter: &RunFilter) -> String {
        let conn = rusqlite::Connection::open(path).expect("open");
        let (sql, values) = listing(filter);
        let mut statement = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("explain");
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                row.get::<_, String>(3)
            })
            .expect("plan")
            .collect::<rusqlite::Result<Vec<String>>>()
            .expect("plan rows");
        rows.join("; ")
    }

    #[tokio::test]
    async fn the_listing_migration_indexes_runs_by_status_and_by_workflow_newest_first() {
        let (path, conn) = crate::schema::file_before(LIST_MIGRATION, "workflow-list-migrate");
        // A file as the version before this migration left it: runs of two workflows,
        // one in three failed.
        for id in 1..=30_u64 {
            let workflow = if id % 2 == 0 { "even" } else { "odd" };
            let status = if id % 3 == 0 { "failed" } else { "completed" };
            let crc = checksum::RunRow {
                id: RunId(id),
                workflow,
                fingerprint: "fp",
                status,
                idempotency_key: None,
                note: None,
                parent: None,
                created_at: id,
                updated_at: id,
                inbox_cursor: 0,
            }
            .checksum();
            conn.execute(
                "INSERT INTO runs (id, workflow, fingerprint, status, created_at, updated_at, crc)
                 VALUES (?1, ?2, 'fp', ?3, ?1, ?1, ?4)",
                params![id, workflow, status, crc],
            )
            .expect("a run");
        }
        drop(conn);
        let store = SqliteStore::open(&path).expect("open and migrate");
        let by_status = RunFilter {
            status: Some(RunStatus::Failed),
            limit: Some(3),
            ..RunFilter::default()
        };
        let by_workflow = RunFilter {
            workflow: Some("even".into()),
            before: Some(RunId(20)),
            limit: Some(3),
            ..RunFilter::default()
        };
        let ids = |runs: Vec<RunRecord>| runs.into_iter().map(|r| r.id.0).collect::<Vec<_>>();
        let listed = store.runs(by_status.clone()).await.expect("by status");
        assert_eq!(ids(listed), [30, 27, 24]);
        let listed = store.runs(by_workflow.clone()).await.expect("by workflow");
        assert_eq!(ids(listed), [18, 16, 14]);
        drop(store);
        // Each read in the listing's order from its index: no sort of every match.
        let status_plan = plan(&path, &by_status);
        assert!(status_plan.contains("runs_status_id"), "{status_plan}");
        let workflow_plan = plan(&path, &by_workflow);
        assert!(
            workflow_plan.contains("runs_workflow_id"),
            "{workflow_plan}"
        );
        for plan in [status_plan, workflow_plan] {
            assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        }
    }
}

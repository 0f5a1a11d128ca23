//! Search values and purges: the `run_search` rows written with a new run, the clause that
//! finds runs by them, and the deletion of whole finished runs.

use rusqlite::params;

use super::schema::{db_error, Db};
use workflow_core::store::{PurgeFilter, StoreError};
use workflow_core::RunId;

/// Every table whose rows belong to one run, by its `run_id` column. A purge deletes a
/// run's rows from each (then the run's own row), in one transaction: a new kind of
/// per-run row is added here.
pub(super) const PER_RUN_TABLES: &[&str] = &[
    "journal",
    "inbox",
    "dead_letters",
    "run_search",
    "open_tasks",
    "flow_gates",
    "flow_slots",
    "flow_waits",
];

/// Inside a creation's transaction: the new run's search values.
pub(super) fn insert(db: &Db, run: RunId, values: &[(String, String)]) -> Result<(), StoreError> {
    let mut statement = db
        .conn
        .prepare_cached(
            "INSERT OR REPLACE INTO run_search (run_id, name, value) VALUES (?1, ?2, ?3)",
        )
        .map_err(db_error(db))?;
    for (name, value) in values {
        statement
            .execute(params![run.0, name, value])
            .map_err(db_error(db))?;
    }
    Ok(())
}

/// ` AND id IN (...)` once per condition, with numbered parameters from `first` on (a
/// name, then a value).
pub(super) fn clause(conditions: usize, first: usize) -> String {
    (0..conditions)
        .map(|i| {
            let name = first + 2 * i;
            format!(
                " AND id IN (SELECT run_id FROM run_search WHERE name = ?{name} AND value = ?{})",
                name + 1
            )
        })
        .collect()
}

/// The finished runs `filter` takes, lowest id first.
pub(super) fn purgeable(db: &Db, filter: &PurgeFilter) -> Result<Vec<RunId>, StoreError> {
    let except = serde_json::to_string(&filter.except).unwrap_or_else(|_| "[]".to_owned());
    let limit = i64::try_from(filter.limit.max(1)).unwrap_or(i64::MAX);
    db.conn
        .prepare_cached(
            // Walked in id order from `after` (`+status`: not through the status
            // index, which would read every finished run and sort them for each batch).
            "SELECT id FROM runs r
             WHERE +status IN ('completed', 'failed', 'cancelled') AND updated_at < ?1
               AND (?2 IS NULL OR workflow = ?2)
               AND workflow NOT IN (SELECT value FROM json_each(?3))
               AND id > coalesce(?4, 0)
               AND (parent IS NULL OR NOT EXISTS (
                    SELECT 1 FROM runs p WHERE p.id = r.parent
                      AND p.status NOT IN ('completed', 'failed', 'cancelled')))
             ORDER BY id LIMIT ?5",
        )
        .and_then(|mut s| {
            s.query_map(
                params![
                    filter.before,
                    filter.workflow,
                    except,
                    filter.after.map(|r| r.0),
                    limit
                ],
                |row| Ok(RunId(row.get(0)?)),
            )?
            .collect::<rusqlite::Result<Vec<RunId>>>()
        })
        .map_err(db_error(db))
}

/// Inside the writer's transaction: deletes the runs `filter` takes with all their rows,
/// then gives the freed pages back to the file system (with `auto_vacuum = INCREMENTAL`).
pub(super) fn purge(db: &Db, filter: &PurgeFilter) -> Result<(Vec<RunId>, u64), StoreError> {
    let runs = purgeable(db, filter)?;
    if runs.is_empty() {
        return Ok((runs, 0));
    }
    let ids = serde_json::to_string(&runs.iter().map(|r| r.0).collect::<Vec<u64>>())
        .unwrap_or_else(|_| "[]".to_owned());
    for table in PER_RUN_TABLES.iter().chain(&["runs"]) {
        let column = if *table == "runs" { "id" } else { "run_id" };
        db.conn
            .prepare_cached(&format!(
                "DELETE FROM {table} WHERE {column} IN (SELECT value FROM json_each(?1))"
            ))
            .and_then(|mut s| s.execute(params![ids]))
            .map_err(db_error(db))?;
    }
    db.conn
        .execute_batch("PRAGMA incremental_vacuum")
        .map_err(db_error(db))?;
    Ok((runs, 0))
}

//! Search values and purges: the `run_search` rows written with a new run, the clause that
//! finds runs by them, and the deletion of whole finished runs.

use rusqlite::params;

use super::schema::{db_error, Db};
use super::writer::{Step, Writer};
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

/// The most runs one step of a purge deletes: a step costs about what one ordinary
/// commit does, so a commit that arrives during it waits little (see `commits.rs`).
pub(super) const PURGE_STEP: usize = 2;

/// The most pages one step of the vacuum after a purge gives back.
pub(super) const VACUUM_STEP: i64 = 32;

/// A purge as a maintenance request of the writer: up to `filter.limit` runs, deleted in
/// steps of [`PURGE_STEP`] runs, each step one transaction (a run is deleted whole in
/// one); then, when the walk found every run the filter takes (the pass is over), the
/// freed pages given back to the file system ([`VACUUM_STEP`] pages a step).
pub(super) struct Purge {
    filter: PurgeFilter,
    purged: Vec<RunId>,
    vacuuming: bool,
}

impl Purge {
    pub(super) fn new(filter: PurgeFilter) -> Purge {
        Purge {
            filter,
            purged: Vec::new(),
            vacuuming: false,
        }
    }

    /// Inside the writer's transaction: the next step.
    pub(super) fn step(&mut self, writer: &Writer) -> Result<Step<Vec<RunId>>, StoreError> {
        let limit = self.filter.limit.max(1);
        if !self.vacuuming {
            let want = (limit - self.purged.len()).min(PURGE_STEP);
            let step = PurgeFilter {
                limit: want,
                after: self.purged.last().copied().or(self.filter.after),
                ..self.filter.clone()
            };
            let runs = delete(writer, &step)?;
            let mut known = writer.known.borrow_mut();
            runs.iter().for_each(|run| known.forget(*run));
            let found = runs.len();
            self.purged.extend(runs);
            if self.purged.len() >= limit {
                return Ok(Step::Done(std::mem::take(&mut self.purged), 0));
            }
            if found == want {
                return Ok(Step::More(0));
            }
            self.vacuuming = true;
            return Ok(Step::More(0));
        }
        let free = || {
            writer
                .conn
                .prepare_cached("PRAGMA freelist_count")
                .and_then(|mut s| s.query_row([], |row| row.get::<_, i64>(0)))
                .map_err(db_error(writer))
        };
        let before = free()?;
        if before > 0 {
            writer
                .conn
                .execute_batch(&format!("PRAGMA incremental_vacuum({VACUUM_STEP})"))
                .map_err(db_error(writer))?;
        }
        let after = free()?;
        // Done when no free page is left, or none was given back (a file without
        // `auto_vacuum = INCREMENTAL` keeps its free pages for new rows).
        if after == 0 || after >= before {
            return Ok(Step::Done(std::mem::take(&mut self.purged), 0));
        }
        Ok(Step::More(0))
    }
}

/// Inside the writer's transaction: deletes the runs `filter` takes with all their rows.
fn delete(db: &Db, filter: &PurgeFilter) -> Result<Vec<RunId>, StoreError> {
    let runs = purgeable(db, filter)?;
    if runs.is_empty() {
        return Ok(runs);
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
    Ok(runs)
}

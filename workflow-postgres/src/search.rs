//! Search values and purges: the `run_search` rows written with a new run (in the
//! creation's statement), the clause that finds runs by them, and the deletion of whole
//! finished runs, each batch one statement.

use sqlx::{PgConnection, Row};

use super::sql::{int, uint, Answer};
use workflow_core::store::PurgeFilter;
use workflow_core::RunId;

/// Every table whose rows belong to one run, by its `run_id` column. A purge deletes a
/// run's rows from each (and the run's own row) in one statement: a new kind of per-run
/// row is added here.
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

/// The creation statement around `workflow_create(...)` (its parameters `$1` to `$18`):
/// a new run's search values (`$19` names, `$20` values) are inserted by the same
/// statement, so they are written exactly when the run is.
pub(super) const CREATE: &str = "WITH c AS (
        SELECT o_outcome, o_run, o_token, o_len
        FROM workflow_create($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                             $15, $16, $17, $18)
    ), s AS (
        INSERT INTO run_search (run_id, name, value)
        SELECT c.o_run, t.name, t.value
        FROM c, unnest($19::text[], $20::text[]) AS t(name, value)
        WHERE c.o_outcome = 'new'
    )
    SELECT o_outcome, o_run, o_token, o_len FROM c";

/// ` AND r.id IN (...)` once per condition, with numbered parameters from `first` on (a
/// name, then a value).
pub(super) fn clause(conditions: usize, first: usize) -> String {
    (0..conditions)
        .map(|i| {
            let name = first + 2 * i;
            format!(
                " AND r.id IN (SELECT run_id FROM run_search WHERE name = ${name} AND value = ${})",
                name + 1
            )
        })
        .collect()
}

/// The runs a purge takes (`$1` to `$5`), locked, lowest id first.
const PURGEABLE: &str = "SELECT r.id FROM runs r
    WHERE r.status IN ('completed', 'failed', 'cancelled') AND r.updated_at < $1
      AND ($2::text IS NULL OR r.workflow = $2)
      AND NOT (r.workflow = ANY ($3::text[]))
      AND ($4::bigint IS NULL OR r.id > $4)
      AND (r.parent IS NULL OR NOT EXISTS (
           SELECT 1 FROM runs p WHERE p.id = r.parent
             AND p.status NOT IN ('completed', 'failed', 'cancelled')))
    ORDER BY r.id LIMIT $5";

/// Deletes (or, dry, names) the runs `filter` takes with all their rows, in one statement.
pub(super) async fn purge(conn: &mut PgConnection, filter: &PurgeFilter) -> Answer<Vec<RunId>> {
    let sql = if filter.dry_run {
        PURGEABLE.to_owned()
    } else {
        let deletes: String = PER_RUN_TABLES
            .iter()
            .map(|table| {
                format!(
                    ", d_{table} AS (DELETE FROM {table} WHERE run_id IN (SELECT id FROM doomed))"
                )
            })
            .collect();
        format!(
            "WITH doomed AS ({PURGEABLE} FOR UPDATE OF r SKIP LOCKED){deletes}
             DELETE FROM runs WHERE id IN (SELECT id FROM doomed) RETURNING id"
        )
    };
    let rows = sqlx::query(&sql)
        .bind(int(filter.before))
        .bind(filter.workflow.as_deref())
        .bind(&filter.except)
        .bind(filter.after.map(|r| int(r.0)))
        .bind(int(filter.limit.max(1) as u64))
        .fetch_all(&mut *conn)
        .await?;
    let mut runs = rows
        .iter()
        .map(|row| Ok(RunId(uint(row.try_get(0)?))))
        .collect::<Result<Vec<RunId>, sqlx::Error>>()?;
    runs.sort_unstable();
    Ok(runs)
}

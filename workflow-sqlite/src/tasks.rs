//! The open-task index in the file: the `open_tasks` table, written inside the writer's
//! transaction with the journal entries it follows ([`apply`]), filled from the journals
//! by its migration ([`backfill`]) and paged by [`list`].

use std::collections::BTreeMap;

use rusqlite::params;

use super::schema::{db_error, Db};
use workflow_core::journal::Event;
use workflow_core::store::tasks::{self, OpenTask, Row, TaskChange, TaskCount, TaskFilter};
use workflow_core::store::StoreError;
use workflow_core::RunId;

/// The migration that adds the index; [`backfill`] fills it in the same transaction.
pub(super) const MIGRATION: &str = "CREATE TABLE open_tasks (
        run_id INTEGER NOT NULL,
        step INTEGER NOT NULL,
        workflow TEXT NOT NULL,
        assignee TEXT NOT NULL,
        deadline INTEGER NOT NULL,
        opened_at INTEGER NOT NULL,
        escalated INTEGER NOT NULL,
        prompt TEXT,
        PRIMARY KEY (run_id, step)
    ) WITHOUT ROWID;
    CREATE INDEX open_tasks_deadline ON open_tasks (deadline, run_id, step);
    CREATE INDEX open_tasks_assignee ON open_tasks (assignee, deadline, run_id, step);";

/// A run's journal, decoded (inside the writer's transaction).
fn journal(db: &Db, run: RunId) -> Result<Vec<Event>, StoreError> {
    let texts = db
        .conn
        .prepare_cached("SELECT seq, event FROM journal WHERE run_id = ?1 ORDER BY seq")
        .and_then(|mut s| {
            s.query_map(params![run.0], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<rusqlite::Result<Vec<(u64, String)>>>()
        })
        .map_err(db_error(db))?;
    texts
        .into_iter()
        .map(|(seq, text)| {
            serde_json::from_str(&text).map_err(|e| StoreError::BadRow {
                run,
                seq,
                reason: e.to_string(),
            })
        })
        .collect()
}

fn insert(db: &Db, run: RunId, row: &Row) -> Result<(), StoreError> {
    db.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO open_tasks
                (run_id, step, workflow, assignee, deadline, opened_at, escalated, prompt)
             SELECT id, ?2, workflow, ?3, ?4, ?5, ?6, ?7 FROM runs WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                run.0,
                row.step,
                row.assignee,
                row.deadline,
                row.opened_at,
                row.escalated,
                row.prompt
            ])
        })
        .map(drop)
        .map_err(db_error(db))
}

fn delete(db: &Db, run: RunId) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("DELETE FROM open_tasks WHERE run_id = ?1")
        .and_then(|mut s| s.execute(params![run.0]))
        .map(drop)
        .map_err(db_error(db))
}

/// Inside the writer's transaction: applies a write's index changes to `run`'s rows.
pub(super) fn apply(db: &Db, run: RunId, changes: &[TaskChange]) -> Result<(), StoreError> {
    let fail = db_error(db);
    for change in changes {
        match change {
            TaskChange::Open {
                step,
                assignee,
                deadline,
                at,
                prompt,
            } => insert(
                db,
                run,
                &Row {
                    step: *step,
                    assignee: assignee.clone(),
                    deadline: *deadline,
                    opened_at: *at,
                    escalated: false,
                    prompt: prompt.clone(),
                },
            )?,
            TaskChange::Escalate {
                step,
                assignee,
                deadline,
            } => {
                db.conn
                    .prepare_cached(
                        "UPDATE open_tasks SET assignee = ?3, deadline = ?4, escalated = 1
                         WHERE run_id = ?1 AND step = ?2",
                    )
                    .and_then(|mut s| s.execute(params![run.0, step, assignee, deadline]))
                    .map_err(&fail)?;
            }
            TaskChange::Delegate { step, assignee } => {
                db.conn
                    .prepare_cached(
                        "UPDATE open_tasks SET assignee = ?3 WHERE run_id = ?1 AND step = ?2",
                    )
                    .and_then(|mut s| s.execute(params![run.0, step, assignee]))
                    .map_err(&fail)?;
            }
            TaskChange::Close { step } => {
                db.conn
                    .prepare_cached("DELETE FROM open_tasks WHERE run_id = ?1 AND step = ?2")
                    .and_then(|mut s| s.execute(params![run.0, step]))
                    .map_err(&fail)?;
            }
            TaskChange::CloseAll => delete(db, run)?,
            TaskChange::Rebuild => {
                delete(db, run)?;
                for row in tasks::open_in(&journal(db, run)?).values() {
                    insert(db, run, row)?;
                }
            }
        }
    }
    Ok(())
}

/// Inside the migration's transaction: the open tasks of every running run, from its
/// journal.
pub(super) fn backfill(db: &Db) -> Result<(), StoreError> {
    let runs = db
        .conn
        .prepare("SELECT id FROM runs WHERE status = 'running' ORDER BY id")
        .and_then(|mut s| {
            s.query_map([], |row| Ok(RunId(row.get(0)?)))?
                .collect::<rusqlite::Result<Vec<RunId>>>()
        })
        .map_err(db_error(db))?;
    let mut rows = 0usize;
    for run in runs {
        let open: BTreeMap<usize, Row> = tasks::open_in(&journal(db, run)?);
        for row in open.values() {
            insert(db, run, row)?;
        }
        rows += open.len();
    }
    tracing::info!(path = %db.path, rows, "indexed the open tasks of every running run");
    Ok(())
}

/// A JSON array, for `IN (SELECT value FROM json_each(?))`; `None` stays NULL.
fn list_of(items: Option<&Vec<String>>) -> Option<String> {
    items.map(|items| serde_json::to_string(items).unwrap_or_else(|_| "[]".to_owned()))
}

/// One page of the index.
pub(super) fn list(db: &Db, filter: &TaskFilter) -> Result<Vec<OpenTask>, StoreError> {
    let limit = filter
        .limit
        .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
    let offset = i64::try_from(filter.offset).unwrap_or(i64::MAX);
    let after = filter.after;
    db.conn
        .prepare_cached(
            "SELECT run_id, step, workflow, assignee, deadline, opened_at, escalated, prompt
             FROM open_tasks
             WHERE (?1 IS NULL OR workflow IN (SELECT value FROM json_each(?1)))
               AND (?2 IS NULL OR assignee IN (SELECT value FROM json_each(?2)))
               AND (?3 IS NULL OR (deadline, run_id, step) > (?3, ?4, ?5))
               AND (?8 IS NULL OR run_id IN (SELECT value FROM json_each(?8)))
             ORDER BY deadline, run_id, step LIMIT ?6 OFFSET ?7",
        )
        .and_then(|mut s| {
            s.query_map(
                params![
                    list_of(filter.workflows.as_ref()),
                    list_of(filter.assignees.as_ref()),
                    after.map(|k| k.deadline),
                    after.map(|k| k.run.0),
                    after.map(|k| k.step),
                    limit,
                    offset,
                    filter.runs.as_ref().map(|runs| {
                        serde_json::to_string(&runs.iter().map(|run| run.0).collect::<Vec<u64>>())
                            .unwrap_or_else(|_| "[]".to_owned())
                    })
                ],
                |row| {
                    Ok(OpenTask {
                        run: RunId(row.get(0)?),
                        step: row.get(1)?,
                        workflow: row.get(2)?,
                        assignee: row.get(3)?,
                        deadline: row.get(4)?,
                        opened_at: row.get(5)?,
                        escalated: row.get(6)?,
                        prompt: row.get(7)?,
                    })
                },
            )?
            .collect()
        })
        .map_err(db_error(db))
}

/// Open tasks per workflow and assignee.
pub(super) fn counts(db: &Db) -> Result<Vec<TaskCount>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT workflow, assignee, COUNT(*), MIN(opened_at) FROM open_tasks
             GROUP BY workflow, assignee ORDER BY workflow, assignee",
        )
        .and_then(|mut s| {
            s.query_map([], |row| {
                Ok(TaskCount {
                    workflow: row.get(0)?,
                    assignee: row.get(1)?,
                    count: row.get(2)?,
                    oldest_opened_at: row.get(3)?,
                })
            })?
            .collect()
        })
        .map_err(db_error(db))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use workflow_core::store::checksum;
    use workflow_core::store::Store;

    fn opened(step: usize, assignee: &str, at: u64) -> Event {
        Event::TaskOpened {
            step,
            assignee: assignee.to_owned(),
            prompt: None,
            deadline: at + 1_000,
            at,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_migration_indexes_the_open_tasks_of_running_runs() {
        let (path, conn) = crate::schema::file_before(MIGRATION, "workflow-tasks-migrate");
        {
            // A file as the version before the index left it.
            let decided = Event::TaskDecided {
                step: 1,
                by: "ana@finance".to_owned(),
                decision: serde_json::json!(true),
                inbox: None,
                via: None,
                at: 20,
            };
            let runs: [(u64, &str, Vec<Event>); 3] = [
                (
                    1,
                    "running",
                    vec![opened(1, "finance", 10), opened(2, "legal", 11)],
                ),
                (2, "running", vec![opened(1, "finance", 10), decided]),
                (3, "completed", vec![opened(1, "finance", 10)]),
            ];
            for (id, status, events) in runs {
                conn.execute(
                    "INSERT INTO runs (id, workflow, fingerprint, status, created_at, updated_at)
                     VALUES (?1, 'refund', 'fp1', ?2, 1, 1)",
                    params![id, status],
                )
                .expect("a run");
                for (seq, event) in events.iter().enumerate() {
                    let text = serde_json::to_string(event).expect("json");
                    let crc = checksum::entry(RunId(id), seq as u64, &text);
                    conn.execute(
                        "INSERT INTO journal (run_id, seq, event, crc) VALUES (?1, ?2, ?3, ?4)",
                        params![id, seq, text, crc],
                    )
                    .expect("an entry");
                }
            }
        }
        // Closed before the store opens the file.
        drop(conn);
        let store = SqliteStore::open(&path).expect("open and migrate");
        let tasks = store
            .open_tasks(TaskFilter::default())
            .await
            .expect("open tasks");
        let found: Vec<(u64, usize, &str, &str)> = tasks
            .iter()
            .map(|t| (t.run.0, t.step, t.workflow.as_str(), t.assignee.as_str()))
            .collect();
        assert_eq!(
            found,
            [(1, 1, "refund", "finance"), (1, 2, "refund", "legal")]
        );
        drop(store);
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

//! The open-task index in the database: the `open_tasks` table, written in the
//! transaction of the write whose entries it follows ([`apply`]), filled from the journals
//! by its migration ([`backfill`]) and paged by [`list`].

use sqlx::{PgConnection, Row as _};

use super::error::Target;
use super::sql::{int, uint, Answer, CommitRow, Create, CreateAnswer, Failure};
use workflow_core::journal::Event;
use workflow_core::store::tasks::{self, OpenTask, Row, TaskChange, TaskCount, TaskFilter};
use workflow_core::store::{RunStatus, StoreError};
use workflow_core::RunId;

/// The migration that adds the index; [`backfill`] fills it in the same transaction.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE open_tasks (
    run_id bigint NOT NULL,
    step bigint NOT NULL,
    workflow text NOT NULL,
    assignee text NOT NULL,
    deadline bigint NOT NULL,
    opened_at bigint NOT NULL,
    escalated boolean NOT NULL,
    prompt text,
    PRIMARY KEY (run_id, step)
);
CREATE INDEX open_tasks_deadline ON open_tasks (deadline, run_id, step);
CREATE INDEX open_tasks_assignee ON open_tasks (assignee, deadline, run_id, step);
"#;

/// A commit and its index changes, in one transaction (for commits that may change the
/// index; the others stay one statement).
pub(super) async fn commit(
    conn: &mut PgConnection,
    row: &CommitRow<'_>,
    channel: &str,
) -> Answer<(String, bool)> {
    let run = row.commit.run;
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let before = lock_status(&mut tx, run).await?;
    let answer = super::sql::commit(&mut tx, row, channel).await?;
    if let (Some(before), "ok") = (before, answer.0.as_str()) {
        apply(&mut tx, run, row.tasks(before)).await?;
    }
    tx.commit().await?;
    Ok(answer)
}

/// A creation whose first entries open tasks, with their rows, in one transaction.
pub(super) async fn create(
    conn: &mut PgConnection,
    create: Create<'_>,
    changes: &[TaskChange],
) -> Answer<CreateAnswer> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let answer = super::sql::create(
        &mut tx,
        create.new,
        create.events,
        create.sums,
        create.nonce,
        create.channel,
    )
    .await?;
    if let (Some(run), "new") = (answer.run, answer.outcome.as_str()) {
        apply(&mut tx, RunId(uint(run)), changes).await?;
    }
    tx.commit().await?;
    Ok(answer)
}

/// A run's status, with its row locked for the rest of the transaction.
pub(super) async fn lock_status(conn: &mut PgConnection, run: RunId) -> Answer<Option<RunStatus>> {
    let status: Option<String> =
        sqlx::query_scalar("SELECT status FROM runs WHERE id = $1 FOR NO KEY UPDATE")
            .bind(int(run.0))
            .fetch_optional(&mut *conn)
            .await?;
    Ok(status.and_then(|s| RunStatus::parse(&s)))
}

async fn journal(conn: &mut PgConnection, run: RunId) -> Answer<Vec<Event>> {
    let rows = sqlx::query("SELECT seq, event FROM journal WHERE run_id = $1 ORDER BY seq")
        .bind(int(run.0))
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|row| {
            let seq: i64 = row.try_get(0)?;
            let text: String = row.try_get(1)?;
            serde_json::from_str(&text).map_err(|e| {
                Failure::Store(StoreError::BadRow {
                    run,
                    seq: uint(seq),
                    reason: e.to_string(),
                })
            })
        })
        .collect()
}

async fn insert(conn: &mut PgConnection, run: RunId, row: &Row) -> Answer<()> {
    sqlx::query(
        "INSERT INTO open_tasks
            (run_id, step, workflow, assignee, deadline, opened_at, escalated, prompt)
         SELECT id, $2, workflow, $3, $4, $5, $6, $7 FROM runs WHERE id = $1
         ON CONFLICT (run_id, step) DO UPDATE SET
            assignee = excluded.assignee, deadline = excluded.deadline,
            opened_at = excluded.opened_at, escalated = excluded.escalated,
            prompt = excluded.prompt",
    )
    .bind(int(run.0))
    .bind(row.step as i64)
    .bind(&row.assignee)
    .bind(int(row.deadline))
    .bind(int(row.opened_at))
    .bind(row.escalated)
    .bind(&row.prompt)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn delete(conn: &mut PgConnection, run: RunId) -> Answer<()> {
    sqlx::query("DELETE FROM open_tasks WHERE run_id = $1")
        .bind(int(run.0))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Inside the write's transaction: applies its index changes to `run`'s rows.
pub(super) async fn apply(
    conn: &mut PgConnection,
    run: RunId,
    changes: &[TaskChange],
) -> Answer<()> {
    for change in changes {
        match change {
            TaskChange::Open {
                step,
                assignee,
                deadline,
                at,
                prompt,
            } => {
                let row = Row {
                    step: *step,
                    assignee: assignee.clone(),
                    deadline: *deadline,
                    opened_at: *at,
                    escalated: false,
                    prompt: prompt.clone(),
                };
                insert(conn, run, &row).await?;
            }
            TaskChange::Escalate {
                step,
                assignee,
                deadline,
            } => {
                sqlx::query(
                    "UPDATE open_tasks SET assignee = $3, deadline = $4, escalated = true
                     WHERE run_id = $1 AND step = $2",
                )
                .bind(int(run.0))
                .bind(*step as i64)
                .bind(assignee)
                .bind(int(*deadline))
                .execute(&mut *conn)
                .await?;
            }
            TaskChange::Delegate { step, assignee } => {
                sqlx::query("UPDATE open_tasks SET assignee = $3 WHERE run_id = $1 AND step = $2")
                    .bind(int(run.0))
                    .bind(*step as i64)
                    .bind(assignee)
                    .execute(&mut *conn)
                    .await?;
            }
            TaskChange::Close { step } => {
                sqlx::query("DELETE FROM open_tasks WHERE run_id = $1 AND step = $2")
                    .bind(int(run.0))
                    .bind(*step as i64)
                    .execute(&mut *conn)
                    .await?;
            }
            TaskChange::CloseAll => delete(conn, run).await?,
            TaskChange::Rebuild => {
                delete(conn, run).await?;
                let events = journal(conn, run).await?;
                for row in tasks::open_in(&events).values() {
                    insert(conn, run, row).await?;
                }
            }
        }
    }
    Ok(())
}

/// Inside the migration's transaction: the open tasks of every running run, from its
/// journal.
pub(super) async fn backfill(conn: &mut PgConnection, target: &Target) -> Result<(), StoreError> {
    let fill = async {
        let runs: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM runs WHERE status = 'running' ORDER BY id")
                .fetch_all(&mut *conn)
                .await?;
        let mut rows = 0usize;
        for id in runs {
            let run = RunId(uint(id));
            let events = journal(conn, run).await?;
            for row in tasks::open_in(&events).values() {
                insert(conn, run, row).await?;
                rows += 1;
            }
        }
        Answer::Ok(rows)
    };
    match fill.await {
        Ok(rows) => {
            tracing::info!(target = %target, rows, "indexed the open tasks of every running run");
            Ok(())
        }
        Err(Failure::Store(error)) => Err(error),
        Err(Failure::Sql(error)) => Err(target.error(error)),
    }
}

/// One page of the index.
pub(super) async fn list(conn: &mut PgConnection, filter: &TaskFilter) -> Answer<Vec<OpenTask>> {
    let after = filter.after;
    let rows = sqlx::query(
        "SELECT run_id, step, workflow, assignee, deadline, opened_at, escalated, prompt
         FROM open_tasks
         WHERE ($1::text[] IS NULL OR workflow = ANY($1))
           AND ($2::text[] IS NULL OR assignee = ANY($2))
           AND ($3::bigint IS NULL OR (deadline, run_id, step) > ($3, $4, $5))
           AND ($8::bigint[] IS NULL OR run_id = ANY($8))
         ORDER BY deadline, run_id, step LIMIT $6 OFFSET $7",
    )
    .bind(filter.workflows.as_ref())
    .bind(filter.assignees.as_ref())
    .bind(after.map(|k| int(k.deadline)))
    .bind(after.map_or(0, |k| int(k.run.0)))
    .bind(after.map_or(0, |k| k.step as i64))
    .bind(filter.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
    .bind(i64::try_from(filter.offset).unwrap_or(i64::MAX))
    .bind(
        filter
            .runs
            .as_ref()
            .map(|runs| runs.iter().map(|run| int(run.0)).collect::<Vec<i64>>()),
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(OpenTask {
                run: RunId(uint(row.try_get(0)?)),
                step: uint(row.try_get(1)?) as usize,
                workflow: row.try_get(2)?,
                assignee: row.try_get(3)?,
                deadline: uint(row.try_get(4)?),
                opened_at: uint(row.try_get(5)?),
                escalated: row.try_get(6)?,
                prompt: row.try_get(7)?,
            })
        })
        .collect()
}

/// Open tasks per workflow and assignee.
pub(super) async fn counts(conn: &mut PgConnection) -> Answer<Vec<TaskCount>> {
    let rows = sqlx::query(
        "SELECT workflow, assignee, COUNT(*), MIN(opened_at) FROM open_tasks
         GROUP BY workflow, assignee ORDER BY workflow, assignee",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(TaskCount {
                workflow: row.try_get(0)?,
                assignee: row.try_get(1)?,
                count: uint(row.try_get(2)?),
                oldest_opened_at: uint(row.try_get(3)?),
            })
        })
        .collect()
}

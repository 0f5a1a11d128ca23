//! Creating a batch of runs in one transaction (`Store::create_runs`): one statement,
//! `workflow_create_many(...)` over arrays of the runs' parts, when no run of the batch
//! supersedes another or opens a task; else one transaction of one creation (and its
//! open-task rows) per run. A batch whose answer was lost is looked up by its runs'
//! nonces before it is sent again.

use std::sync::atomic::Ordering;

use sqlx::{PgConnection, Row};

use super::read::stored;
use super::sql::{self, int, uint, Answer, CreateAnswer, CreateSums, Failure};
use super::write::{kept_changing, STALE_TRIES};
use super::{tasks, unknown_outcome, PgStore};
use workflow_core::store::tasks::{self as store_tasks, TaskChange};
use workflow_core::store::{Created, NewRun, RunStatus, StoreError};
use workflow_core::RunId;

/// The statement that creates a batch of plain runs (its parameters `$1` to `$18`).
const CREATE_MANY: &str = "SELECT o_outcome, o_run, o_token, o_len
    FROM workflow_create_many($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                              $15, $16, $17, $18)";

/// One run of a batch, encoded, with its checksums.
struct Part<'a> {
    new: &'a NewRun<'a>,
    events: Vec<String>,
    sums: CreateSums,
    nonce: String,
    tasks: Vec<TaskChange>,
}

impl Part<'_> {
    /// Whether `workflow_create_many` creates it: it supersedes no run and opens no task.
    fn plain(&self) -> bool {
        self.new.supersedes.is_none() && self.tasks.is_empty()
    }
}

impl PgStore {
    /// Creates `runs` in order in one transaction (`Store::create_runs`).
    pub(super) async fn create_many(
        &self,
        runs: &[NewRun<'_>],
    ) -> Result<Vec<Created>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let mut parts = Vec::with_capacity(runs.len());
        for new in runs {
            let events: Vec<String> = new
                .events
                .iter()
                .map(sql::to_json)
                .collect::<Result<_, _>>()?;
            parts.push(Part {
                new,
                sums: CreateSums::new(new, &events),
                events,
                nonce: self.nonce(),
                tasks: store_tasks::changes(new.events, None, RunStatus::Running),
            });
        }
        let plain = parts.iter().all(Part::plain);
        for _ in 0..STALE_TRIES {
            for part in &mut parts {
                if let Some((old, note)) = part.new.supersedes {
                    part.sums.superseded = self
                        .run_row(old)
                        .await?
                        .map(|raw| sql::cancelled(&raw, note, part.new.at));
                }
            }
            let answers = self.create_many_once(&parts, plain).await?;
            if answers
                .last()
                .is_some_and(|answer| answer.outcome == "stale")
            {
                continue;
            }
            return self.created_many(&parts, &answers);
        }
        let superseded = runs
            .iter()
            .find_map(|new| new.supersedes.map(|(old, _)| old));
        Err(kept_changing(&self.target, superseded))
    }

    /// The batch's answers, once every run's answer is known: the first refusal fails the
    /// whole batch (its transaction was rolled back).
    fn created_many(
        &self,
        parts: &[Part<'_>],
        answers: &[CreateAnswer],
    ) -> Result<Vec<Created>, StoreError> {
        let run_id = |answer: &CreateAnswer| RunId(answer.run.map_or(0, uint));
        for answer in answers {
            match answer.outcome.as_str() {
                "new" | "existing" => {}
                "unknown" => return Err(StoreError::UnknownRun(run_id(answer))),
                "conflict" => {
                    return Err(StoreError::Conflict {
                        run: run_id(answer),
                        seq: uint(answer.len),
                    })
                }
                other => return Err(unknown_outcome(&self.target, "workflow_create", other)),
            }
        }
        if answers.len() != parts.len() {
            return Err(unknown_outcome(
                &self.target,
                "workflow_create_many",
                &format!("{} rows for {} runs", answers.len(), parts.len()),
            ));
        }
        let mut created = Vec::with_capacity(parts.len());
        for (part, answer) in parts.iter().zip(answers) {
            let run = run_id(answer);
            if answer.outcome == "existing" {
                created.push(Created::Existing(run));
                continue;
            }
            self.known.put(sql::created_row(part.new, &part.sums, run));
            self.stats
                .journal_writes
                .fetch_add(part.events.len() as u64, Ordering::Relaxed);
            created.push(Created::New {
                run,
                token: uint(answer.token),
            });
        }
        if created.iter().any(|c| matches!(c, Created::New { .. })) {
            self.stats.commits.fetch_add(1, Ordering::Relaxed);
        }
        Ok(created)
    }

    /// One try of a batch, through lost connections.
    async fn create_many_once(
        &self,
        parts: &[Part<'_>],
        plain: bool,
    ) -> Result<Vec<CreateAnswer>, StoreError> {
        let mut retry = self.retry();
        let mut ambiguous = false;
        loop {
            let mut conn = retry.conn().await?;
            if ambiguous {
                self.sent();
                match created_by(&mut conn, parts).await {
                    Ok(Some(answers)) => return Ok(answers),
                    Ok(None) => {}
                    Err(Failure::Store(error)) => return Err(error),
                    Err(Failure::Sql(error)) => {
                        retry.again(error).await?;
                        continue;
                    }
                }
            }
            self.sent();
            let sent = if plain {
                create_plain(&mut conn, parts, &self.channel).await
            } else {
                create_each(&mut conn, parts, &self.channel).await
            };
            match sent {
                Ok(answers) => return Ok(answers),
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) => {
                    ambiguous = true;
                    retry.again(error).await?;
                }
            }
        }
    }
}

/// Creates plain runs in one statement.
async fn create_plain(
    conn: &mut PgConnection,
    parts: &[Part<'_>],
    channel: &str,
) -> Answer<Vec<CreateAnswer>> {
    let each = |f: &dyn Fn(&Part<'_>) -> i64| parts.iter().map(f).collect::<Vec<i64>>();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let rows = sqlx::query(CREATE_MANY)
        .bind(parts.iter().map(|p| p.new.workflow).collect::<Vec<_>>())
        .bind(parts.iter().map(|p| p.new.fingerprint).collect::<Vec<_>>())
        .bind(
            parts
                .iter()
                .map(|p| p.new.idempotency_key)
                .collect::<Vec<_>>(),
        )
        .bind(
            parts
                .iter()
                .map(|p| p.new.parent.map(|run| int(run.0)))
                .collect::<Vec<_>>(),
        )
        .bind(
            parts
                .iter()
                .map(|p| p.new.owner.map(|c| c.owner))
                .collect::<Vec<_>>(),
        )
        .bind(each(&|p| p.new.owner.map_or(0, |c| int(c.lease_ms))))
        .bind(each(&|p| int(p.new.at)))
        .bind(parts.iter().map(|p| p.nonce.as_str()).collect::<Vec<_>>())
        .bind(channel)
        .bind(each(&|p| stored(p.sums.run.base)))
        .bind(sql::bits(parts.iter().map(|p| &p.sums.run)))
        .bind(
            parts
                .iter()
                .map(|p| count(p.events.len()))
                .collect::<Vec<_>>(),
        )
        .bind(
            parts
                .iter()
                .flat_map(|p| p.events.iter().map(String::as_str))
                .collect::<Vec<_>>(),
        )
        .bind(
            parts
                .iter()
                .flat_map(|p| p.sums.events.iter().map(|k| stored(k.base)))
                .collect::<Vec<_>>(),
        )
        .bind(sql::bits(parts.iter().flat_map(|p| &p.sums.events)))
        .bind(
            parts
                .iter()
                .map(|p| count(p.new.search.len()))
                .collect::<Vec<_>>(),
        )
        .bind(
            parts
                .iter()
                .flat_map(|p| p.new.search.iter().map(|(name, _)| name.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(
            parts
                .iter()
                .flat_map(|p| p.new.search.iter().map(|(_, value)| value.as_str()))
                .collect::<Vec<_>>(),
        )
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(CreateAnswer {
                outcome: row.try_get(0)?,
                run: row.try_get(1)?,
                token: row.try_get(2)?,
                len: row.try_get::<Option<i64>, _>(3)?.unwrap_or(0),
            })
        })
        .collect()
}

/// Creates the runs one statement each (with their open-task rows), in one transaction;
/// at the first refusal the transaction is rolled back and the answers end with it.
async fn create_each(
    conn: &mut PgConnection,
    parts: &[Part<'_>],
    channel: &str,
) -> Answer<Vec<CreateAnswer>> {
    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
    let mut answers = Vec::with_capacity(parts.len());
    for part in parts {
        let answer = sql::create(
            &mut tx,
            part.new,
            &part.events,
            &part.sums,
            &part.nonce,
            channel,
        )
        .await?;
        let outcome = answer.outcome.clone();
        if let (Some(run), "new") = (answer.run, outcome.as_str()) {
            tasks::apply(&mut tx, RunId(uint(run)), &part.tasks).await?;
        }
        answers.push(answer);
        if outcome != "new" && outcome != "existing" {
            tx.rollback().await?;
            return Ok(answers);
        }
    }
    tx.commit().await?;
    Ok(answers)
}

/// The answers of a batch whose answer was lost, if it was written: the runs its nonces
/// name are its new runs; each other run's key named a run that existed.
async fn created_by(
    conn: &mut PgConnection,
    parts: &[Part<'_>],
) -> Answer<Option<Vec<CreateAnswer>>> {
    let nonces: Vec<&str> = parts.iter().map(|p| p.nonce.as_str()).collect();
    let rows =
        sqlx::query("SELECT create_nonce, id, lease_token FROM runs WHERE create_nonce = ANY($1)")
            .bind(&nonces)
            .fetch_all(&mut *conn)
            .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        found.push((
            row.try_get::<String, _>(0)?,
            row.try_get::<i64, _>(1)?,
            row.try_get::<i64, _>(2)?,
        ));
    }
    let mut answers = Vec::with_capacity(parts.len());
    for part in parts {
        if let Some((_, run, token)) = found.iter().find(|(nonce, ..)| *nonce == part.nonce) {
            answers.push(CreateAnswer {
                outcome: "new".to_owned(),
                run: Some(*run),
                token: *token,
                len: part.events.len() as i64,
            });
            continue;
        }
        let run: Option<i64> =
            sqlx::query_scalar("SELECT id FROM runs WHERE workflow = $1 AND idempotency_key = $2")
                .bind(part.new.workflow)
                .bind(part.new.idempotency_key)
                .fetch_optional(&mut *conn)
                .await?;
        answers.push(CreateAnswer {
            outcome: "existing".to_owned(),
            run,
            token: 0,
            len: 0,
        });
    }
    Ok(Some(answers))
}

//! The store's statements, one round trip each: every function sends one statement on a
//! connection and decodes its answer. Writes call the functions of the schema, which
//! check and apply a request whole inside the server.

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use crate::error::{ErrorKind, RunId};
use crate::journal::{Event, Timestamp};
use crate::store::{
    Claim, Commit, DeadLetter, DeadLetterChange, InboxItem, Lease, Message, NewRun, RunFilter,
    RunRecord, RunStatus, SpecRecord, StoreError, StoredRun,
};

/// Rows that do not decode into the store's types.
#[derive(Debug)]
pub(super) enum Failure {
    /// The statement failed.
    Sql(sqlx::Error),
    /// A row holds what the store never writes.
    Store(StoreError),
}

impl From<sqlx::Error> for Failure {
    fn from(error: sqlx::Error) -> Self {
        Failure::Sql(error)
    }
}

pub(super) type Answer<T> = Result<T, Failure>;

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn uint(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Io(format!("cannot serialize a journal entry: {e}")))
}

/// What `workflow_create` answered.
pub(super) struct CreateAnswer {
    pub(super) outcome: String,
    pub(super) run: Option<i64>,
    pub(super) token: i64,
    pub(super) len: i64,
}

pub(super) async fn create(
    conn: &mut PgConnection,
    new: &NewRun<'_>,
    events: &[String],
    nonce: &str,
    channel: &str,
) -> Answer<CreateAnswer> {
    let row = sqlx::query(
        "SELECT o_outcome, o_run, o_token, o_len
         FROM workflow_create($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(new.workflow)
    .bind(new.fingerprint)
    .bind(new.idempotency_key)
    .bind(events)
    .bind(new.parent.map(|p| int(p.0)))
    .bind(new.owner.map(|c| c.owner))
    .bind(new.owner.map_or(0, |c| int(c.lease_ms)))
    .bind(new.supersedes.map(|(old, _)| int(old.0)))
    .bind(new.supersedes.map(|(_, note)| note))
    .bind(int(new.at))
    .bind(nonce)
    .bind(channel)
    .fetch_one(&mut *conn)
    .await?;
    Ok(CreateAnswer {
        outcome: row.try_get(0)?,
        run: row.try_get(1)?,
        token: row.try_get(2)?,
        len: row.try_get(3)?,
    })
}

/// The run a creation with `nonce` made, with its token: for a creation whose answer was
/// lost.
pub(super) async fn created_by(conn: &mut PgConnection, nonce: &str) -> Answer<Option<Lease>> {
    let row = sqlx::query("SELECT id, lease_token FROM runs WHERE create_nonce = $1")
        .bind(nonce)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match row {
        Some(row) => Some(Lease {
            run: RunId(uint(row.try_get(0)?)),
            token: uint(row.try_get(1)?),
        }),
        None => None,
    })
}

/// The owned, encoded parts of a [`Commit`].
pub(super) struct CommitRow<'a> {
    pub(super) commit: &'a Commit<'a>,
    pub(super) events: Vec<String>,
    pub(super) inboxes: Vec<Option<i64>>,
}

impl<'a> CommitRow<'a> {
    pub(super) fn new(commit: &'a Commit<'a>) -> Result<Self, StoreError> {
        Ok(CommitRow {
            commit,
            events: commit
                .events
                .iter()
                .map(to_json)
                .collect::<Result<_, _>>()?,
            inboxes: commit.events.iter().map(|e| e.inbox().map(int)).collect(),
        })
    }
}

pub(super) async fn commit(
    conn: &mut PgConnection,
    row: &CommitRow<'_>,
    channel: &str,
) -> Answer<String> {
    let commit = row.commit;
    let (op, letter): (i16, Option<&DeadLetter>) = match commit.dead_letter {
        DeadLetterChange::Keep => (0, None),
        DeadLetterChange::Put(letter) => (1, Some(letter)),
        DeadLetterChange::Remove => (2, None),
    };
    let outcome: String = sqlx::query(
        "SELECT workflow_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                                $15, $16, $17, $18, $19)",
    )
    .bind(int(commit.run.0))
    .bind(int(commit.seq))
    .bind(&row.events)
    .bind(&row.inboxes)
    .bind(commit.fence.map(|f| f.owner))
    .bind(commit.fence.map_or(0, |f| int(f.token)))
    .bind(commit.status.map(|(s, _)| s.as_str()))
    .bind(commit.status.and_then(|(_, note)| note))
    .bind(op)
    .bind(letter.map(|l| l.workflow.as_str()))
    .bind(letter.map(|l| l.step.as_str()))
    .bind(letter.map(|l| i64::from(l.attempts)))
    .bind(letter.map(|l| l.kind.as_str()))
    .bind(letter.map(|l| l.message.as_str()))
    .bind(letter.map(|l| l.trace_id.as_str()))
    .bind(letter.map(|l| int(l.at)))
    .bind(commit.inbox_cursor.map(int))
    .bind(int(commit.at))
    .bind(channel)
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)?;
    Ok(outcome)
}

/// Whether a commit whose answer was lost with its connection was applied: its entries
/// are in the journal from `seq` on (or, for a commit of a status alone, the run has that
/// status at that length). `false` for a commit of neither, which is safe to send again.
pub(super) async fn committed(conn: &mut PgConnection, row: &CommitRow<'_>) -> Answer<bool> {
    let commit = row.commit;
    let found = sqlx::query(
        "SELECT r.status, r.journal_len,
                array(SELECT j.event FROM journal j
                      WHERE j.run_id = r.id AND j.seq >= $2 AND j.seq < $2 + $3
                      ORDER BY j.seq)
         FROM runs r WHERE r.id = $1",
    )
    .bind(int(commit.run.0))
    .bind(int(commit.seq))
    .bind(row.events.len() as i64)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(found) = found else {
        return Ok(false);
    };
    let status: String = found.try_get(0)?;
    let len: i64 = found.try_get(1)?;
    let written: Vec<String> = found.try_get(2)?;
    if !row.events.is_empty() {
        return Ok(written == row.events);
    }
    Ok(match commit.status {
        Some((wanted, _)) => status == wanted.as_str() && uint(len) == commit.seq,
        None => false,
    })
}

pub(super) async fn claim(
    conn: &mut PgConnection,
    claim: &Claim<'_>,
    nonce: &str,
) -> Answer<Vec<Lease>> {
    let limit = claim.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    let workflows: Vec<&str> = claim.workflows.to_vec();
    let rows = sqlx::query(
        "WITH picked AS (
            SELECT id FROM runs
            WHERE status = 'running' AND workflow = ANY($3)
              AND ($4::bigint IS NULL OR id = $4)
              AND (owner IS NULL
                   OR (owner = $1 AND $5)
                   OR (owner <> $1 AND coalesce(lease_until, '-infinity') <= now()))
            ORDER BY id
            LIMIT $6
            FOR NO KEY UPDATE SKIP LOCKED)
         UPDATE runs r SET owner = $1, lease_token = r.lease_token + 1,
                lease_until = now() + $2 * interval '1 millisecond', claim_nonce = $7
         FROM picked WHERE r.id = picked.id
         RETURNING r.id, r.lease_token",
    )
    .bind(claim.claimant.owner)
    .bind(int(claim.claimant.lease_ms))
    .bind(&workflows)
    .bind(claim.run.map(|r| int(r.0)))
    .bind(claim.reclaim_own)
    .bind(limit)
    .bind(nonce)
    .fetch_all(&mut *conn)
    .await?;
    leases(&rows)
}

/// The runs a claim with `nonce` took and still holds: for a claim whose answer was lost.
pub(super) async fn claimed_by(
    conn: &mut PgConnection,
    owner: &str,
    nonce: &str,
) -> Answer<Vec<Lease>> {
    let rows = sqlx::query(
        "SELECT id, lease_token FROM runs
         WHERE owner = $1 AND claim_nonce = $2 AND status = 'running'",
    )
    .bind(owner)
    .bind(nonce)
    .fetch_all(&mut *conn)
    .await?;
    leases(&rows)
}

fn leases(rows: &[PgRow]) -> Answer<Vec<Lease>> {
    let mut leases = rows
        .iter()
        .map(|row| {
            Ok(Lease {
                run: RunId(uint(row.try_get(0)?)),
                token: uint(row.try_get(1)?),
            })
        })
        .collect::<Result<Vec<Lease>, sqlx::Error>>()?;
    leases.sort_unstable_by_key(|lease| lease.run);
    Ok(leases)
}

pub(super) async fn renew(
    conn: &mut PgConnection,
    owner: &str,
    lease_ms: u64,
) -> Answer<Vec<RunId>> {
    let rows = sqlx::query(
        "UPDATE runs SET lease_until = now() + $2 * interval '1 millisecond'
         WHERE owner = $1 RETURNING id",
    )
    .bind(owner)
    .bind(int(lease_ms))
    .fetch_all(&mut *conn)
    .await?;
    let mut runs = rows
        .iter()
        .map(|row| row.try_get(0).map(|id| RunId(uint(id))))
        .collect::<Result<Vec<RunId>, sqlx::Error>>()?;
    runs.sort_unstable();
    Ok(runs)
}

pub(super) async fn release(
    conn: &mut PgConnection,
    owner: &str,
    runs: Option<&[RunId]>,
    channel: &str,
) -> Answer<()> {
    let ids: Option<Vec<i64>> = runs.map(|runs| runs.iter().map(|r| int(r.0)).collect());
    sqlx::query(
        "WITH freed AS (
            UPDATE runs SET owner = NULL
            WHERE owner = $1 AND ($2::bigint[] IS NULL OR id = ANY($2))
            RETURNING 1)
         SELECT pg_notify($3, 'run') FROM (SELECT count(*) AS n FROM freed) f WHERE f.n > 0",
    )
    .bind(owner)
    .bind(ids)
    .bind(channel)
    .fetch_all(&mut *conn)
    .await?;
    Ok(())
}

pub(super) async fn submit(
    conn: &mut PgConnection,
    run: RunId,
    message: &str,
    key: Option<&str>,
    at: Timestamp,
    channel: &str,
) -> Answer<(String, Option<i64>)> {
    let row = sqlx::query("SELECT o_outcome, o_id FROM workflow_submit($1, $2, $3, $4, $5)")
        .bind(int(run.0))
        .bind(message)
        .bind(key)
        .bind(int(at))
        .bind(channel)
        .fetch_one(&mut *conn)
        .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

pub(super) async fn inbox(
    conn: &mut PgConnection,
    run: RunId,
    after: u64,
) -> Answer<Option<Vec<InboxItem>>> {
    let rows = sqlx::query(
        "SELECT i.id, i.message, i.at FROM runs r
         LEFT JOIN inbox i ON i.run_id = r.id AND i.id > $2
         WHERE r.id = $1 ORDER BY i.id",
    )
    .bind(int(run.0))
    .bind(int(after))
    .fetch_all(&mut *conn)
    .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let mut items = Vec::new();
    for row in &rows {
        let Some(id) = row.try_get::<Option<i64>, _>(0)? else {
            continue;
        };
        let text: String = row.try_get(1)?;
        let message: Message = serde_json::from_str(&text).map_err(|e| {
            Failure::Store(StoreError::Io(format!(
                "inbox message {id} of {run} does not decode: {e}"
            )))
        })?;
        items.push(InboxItem {
            id: uint(id),
            run,
            message,
            at: uint(row.try_get(2)?),
        });
    }
    Ok(Some(items))
}

/// Runs holding messages their owner has not taken in, whatever their ids: sequence
/// values are not handed out in commit order, so a cursor over ids could skip one.
pub(super) async fn pending_inbox(
    conn: &mut PgConnection,
    after: u64,
) -> Answer<(Vec<RunId>, u64)> {
    let row = sqlx::query(
        "SELECT (SELECT coalesce(max(id), 0) FROM inbox),
                array(SELECT id FROM runs
                      WHERE inbox_last > inbox_cursor AND status IN ('running', 'parked')
                      ORDER BY id)",
    )
    .fetch_one(&mut *conn)
    .await?;
    let last: i64 = row.try_get(0)?;
    let runs: Vec<i64> = row.try_get(1)?;
    Ok((
        runs.into_iter().map(|id| RunId(uint(id))).collect(),
        uint(last).max(after),
    ))
}

const RUN_COLUMNS: &str = "id, workflow, fingerprint, status, idempotency_key, note, parent, \
                           owner, created_at, updated_at";

fn run_record(row: &PgRow) -> Answer<RunRecord> {
    let id = RunId(uint(row.try_get("id")?));
    let status: String = row.try_get("status")?;
    let Some(status) = RunStatus::parse(&status) else {
        return Err(Failure::Store(StoreError::Io(format!(
            "{id} has an unknown status `{status}`"
        ))));
    };
    Ok(RunRecord {
        id,
        workflow: row.try_get("workflow")?,
        fingerprint: row.try_get("fingerprint")?,
        status,
        idempotency_key: row.try_get("idempotency_key")?,
        note: row.try_get("note")?,
        parent: row
            .try_get::<Option<i64>, _>("parent")?
            .map(|p| RunId(uint(p))),
        owner: row.try_get("owner")?,
        created_at: uint(row.try_get("created_at")?),
        updated_at: uint(row.try_get("updated_at")?),
    })
}

pub(super) async fn load(conn: &mut PgConnection, run: RunId) -> Answer<Option<StoredRun>> {
    // One statement: the row and the journal from the same snapshot.
    let row = sqlx::query(&format!(
        "SELECT {RUN_COLUMNS},
                array(SELECT j.event FROM journal j WHERE j.run_id = r.id ORDER BY j.seq)
                    AS events
         FROM runs r WHERE r.id = $1"
    ))
    .bind(int(run.0))
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let record = run_record(&row)?;
    let texts: Vec<String> = row.try_get("events")?;
    let events = texts
        .iter()
        .enumerate()
        .map(|(seq, text)| {
            serde_json::from_str::<Event>(text).map_err(|e| {
                Failure::Store(StoreError::BadRow {
                    run,
                    seq: seq as u64,
                    reason: e.to_string(),
                })
            })
        })
        .collect::<Result<Vec<Event>, Failure>>()?;
    Ok(Some(StoredRun { record, events }))
}

pub(super) async fn list_runs(
    conn: &mut PgConnection,
    filter: &RunFilter,
) -> Answer<Vec<RunRecord>> {
    let rows = sqlx::query(&format!(
        "SELECT {RUN_COLUMNS} FROM runs
         WHERE ($1::text IS NULL OR workflow = $1) AND ($2::text IS NULL OR status = $2)
           AND ($3::bigint IS NULL OR id < $3)
         ORDER BY id DESC LIMIT $4"
    ))
    .bind(filter.workflow.as_deref())
    .bind(filter.status.map(RunStatus::as_str))
    .bind(filter.before.map(|r| int(r.0)))
    .bind(filter.limit.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(run_record).collect()
}

pub(super) async fn dead_letters(conn: &mut PgConnection) -> Answer<Vec<DeadLetter>> {
    let rows = sqlx::query(
        "SELECT run_id, workflow, step, attempts, kind, message, trace_id, at
         FROM dead_letters ORDER BY run_id DESC",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let run = RunId(uint(row.try_get(0)?));
            let kind: String = row.try_get(4)?;
            let kind = kind.parse::<ErrorKind>().map_err(|e| {
                Failure::Store(StoreError::Io(format!("the dead letter of {run}: {e}")))
            })?;
            Ok(DeadLetter {
                run,
                workflow: row.try_get(1)?,
                step: row.try_get(2)?,
                attempts: u32::try_from(row.try_get::<i64, _>(3)?).unwrap_or(u32::MAX),
                kind,
                message: row.try_get(5)?,
                trace_id: row.try_get(6)?,
                at: uint(row.try_get(7)?),
            })
        })
        .collect()
}

pub(super) async fn put_spec(
    conn: &mut PgConnection,
    fingerprint: &str,
    workflow: &str,
    spec: &str,
    at: Timestamp,
) -> Answer<()> {
    sqlx::query(
        "INSERT INTO specs (fingerprint, workflow, spec, first_registered, last_registered)
         VALUES ($1, $2, $3, $4, $4)
         ON CONFLICT (fingerprint) DO UPDATE
            SET last_registered = greatest(specs.last_registered, excluded.last_registered)",
    )
    .bind(fingerprint)
    .bind(workflow)
    .bind(spec)
    .bind(int(at))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub(super) async fn spec(conn: &mut PgConnection, fingerprint: &str) -> Answer<Option<String>> {
    let row = sqlx::query("SELECT spec FROM specs WHERE fingerprint = $1")
        .bind(fingerprint)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match row {
        Some(row) => Some(row.try_get(0)?),
        None => None,
    })
}

pub(super) async fn specs(conn: &mut PgConnection, workflow: &str) -> Answer<Vec<SpecRecord>> {
    let rows = sqlx::query(
        "SELECT fingerprint, workflow, spec, first_registered, last_registered FROM specs
         WHERE workflow = $1 ORDER BY last_registered DESC, first_registered DESC",
    )
    .bind(workflow)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(SpecRecord {
                fingerprint: row.try_get(0)?,
                workflow: row.try_get(1)?,
                spec: row.try_get(2)?,
                first_registered: uint(row.try_get(3)?),
                last_registered: uint(row.try_get(4)?),
            })
        })
        .collect()
}

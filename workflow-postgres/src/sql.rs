//! The store's statements, one round trip each: every function sends one statement on a
//! connection and decodes its answer. Writes call the functions of the schema, which
//! check and apply a request whole inside the server.

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::read::{stored, RawRun};
use workflow_core::journal::Timestamp;
use workflow_core::store::checksum::{self, Keyed};
use workflow_core::store::tasks::{self, TaskChange};
use workflow_core::store::{
    Claim, Claimable, Commit, DeadLetter, DeadLetterChange, Lease, NewRun, RunStatus, StoreError,
};
use workflow_core::RunId;

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

pub(super) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(super) fn uint(value: i64) -> u64 {
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

/// The checksums of a creation: the new run's row and its entries, keyed by the run id
/// the server assigns, and the superseded run's row as read and once cancelled.
pub(super) struct CreateSums {
    pub(super) run: Keyed,
    pub(super) events: Vec<Keyed>,
    pub(super) superseded: Option<(i64, i64)>,
}

impl CreateSums {
    pub(super) fn new(new: &NewRun<'_>, events: &[String]) -> CreateSums {
        CreateSums {
            run: Keyed::new(|id| {
                checksum::RunRow {
                    id: RunId(id),
                    workflow: new.workflow,
                    fingerprint: new.fingerprint,
                    status: RunStatus::Running.as_str(),
                    idempotency_key: new.idempotency_key,
                    note: None,
                    parent: new.parent.map(|p| p.0),
                    created_at: new.at,
                    updated_at: new.at,
                    inbox_cursor: 0,
                }
                .checksum()
            }),
            events: events
                .iter()
                .enumerate()
                .map(|(seq, event)| {
                    Keyed::new(|run| checksum::entry(RunId(run), seq as u64, event))
                })
                .collect(),
            superseded: None,
        }
    }
}

/// The checksum of a superseded run's row as read, and once cancelled with `note`.
pub(super) fn cancelled(raw: &RawRun, note: &str, at: Timestamp) -> (i64, i64) {
    let row = checksum::RunRow {
        status: RunStatus::Cancelled.as_str(),
        note: Some(note),
        updated_at: at,
        ..raw.row()
    };
    (raw.crc, stored(row.checksum()))
}

/// The bits of keyed checksums, one after the other, as `workflow_keyed_crc` takes them.
pub(super) fn bits<'k>(keyed: impl IntoIterator<Item = &'k Keyed>) -> Vec<i64> {
    keyed
        .into_iter()
        .flat_map(|k| k.bits.iter().map(|bit| stored(*bit)))
        .collect()
}

/// The parts of a creation, for the creations that also write the open-task index.
pub(super) struct Create<'a> {
    pub(super) new: &'a NewRun<'a>,
    pub(super) events: &'a [String],
    pub(super) sums: &'a CreateSums,
    pub(super) nonce: &'a str,
    pub(super) channel: &'a str,
}

pub(super) async fn create(
    conn: &mut PgConnection,
    new: &NewRun<'_>,
    events: &[String],
    sums: &CreateSums,
    nonce: &str,
    channel: &str,
) -> Answer<CreateAnswer> {
    let row = sqlx::query(super::search::CREATE)
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
        .bind(stored(sums.run.base))
        .bind(bits([&sums.run]))
        .bind(
            sums.events
                .iter()
                .map(|k| stored(k.base))
                .collect::<Vec<i64>>(),
        )
        .bind(bits(&sums.events))
        .bind(sums.superseded.map(|(seen, _)| seen))
        .bind(sums.superseded.map(|(_, new)| new))
        .bind(
            new.search
                .iter()
                .map(|(name, _)| name.as_str())
                .collect::<Vec<&str>>(),
        )
        .bind(
            new.search
                .iter()
                .map(|(_, value)| value.as_str())
                .collect::<Vec<&str>>(),
        )
        .fetch_one(&mut *conn)
        .await?;
    Ok(CreateAnswer {
        outcome: row.try_get(0)?,
        run: row.try_get(1)?,
        token: row.try_get(2)?,
        // Null when the superseded run is unknown.
        len: row.try_get::<Option<i64>, _>(3)?.unwrap_or(0),
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

/// The owned, encoded parts of a [`Commit`], with their checksums.
pub(super) struct CommitRow<'a> {
    pub(super) commit: &'a Commit<'a>,
    pub(super) events: Vec<String>,
    pub(super) inboxes: Vec<Option<i64>>,
    pub(super) crcs: Vec<i64>,
    /// The run's row as read and as changed, when the commit changes it (a status or the
    /// inbox cursor): the server writes the new checksum only over the row it was
    /// computed from.
    pub(super) run_row: Option<(i64, i64)>,
    /// What the commit does to the open-task index if the run is running, and if not.
    tasks: (Vec<TaskChange>, Vec<TaskChange>),
    /// The steps whose tasks the commit closes if the run is running, when closing tasks
    /// is all it does to the index (`workflow_commit` then does it, and closes them all
    /// when the run ends).
    pub(super) closes: Vec<i64>,
    /// Asks also whether the run's inbox holds messages above this id
    /// (`Store::commit_peeking`); such a commit goes alone, not in a group.
    pub(super) peek: Option<u64>,
}

impl<'a> CommitRow<'a> {
    pub(super) fn new(commit: &'a Commit<'a>) -> Result<Self, StoreError> {
        let events: Vec<String> = commit
            .events
            .iter()
            .map(to_json)
            .collect::<Result<_, _>>()?;
        let crcs = (commit.seq..)
            .zip(&events)
            .map(|(seq, event)| stored(checksum::entry(commit.run, seq, event)))
            .collect();
        let status = commit.status.map(|(status, _)| status);
        let mut tasks = (
            tasks::changes(commit.events, status, RunStatus::Running),
            // A run that is not running has no rows, whatever its entries.
            tasks::changes(&[], status, RunStatus::Parked),
        );
        let closing = |c: &TaskChange| matches!(c, TaskChange::Close { .. } | TaskChange::CloseAll);
        let mut closes = Vec::new();
        if tasks.0.iter().chain(&tasks.1).all(closing) {
            // Closing tasks only: `workflow_commit` does it.
            for change in std::mem::take(&mut tasks.0) {
                if let TaskChange::Close { step } = change {
                    closes.push(step as i64);
                }
            }
            tasks.1.clear();
        }
        Ok(CommitRow {
            commit,
            events,
            inboxes: commit.events.iter().map(|e| e.inbox().map(int)).collect(),
            crcs,
            run_row: None,
            tasks,
            closes,
            peek: None,
        })
    }

    /// Whether the commit changes the open-task index beyond closing tasks (it then goes
    /// in a transaction with its index changes).
    pub(super) fn changes_tasks(&self) -> bool {
        !self.tasks.0.is_empty() || !self.tasks.1.is_empty()
    }

    /// The index changes of the commit to a run whose status is `before`.
    pub(super) fn tasks(&self, before: RunStatus) -> &[TaskChange] {
        if before == RunStatus::Running {
            &self.tasks.0
        } else {
            &self.tasks.1
        }
    }

    /// Whether the commit changes the run's row (not only its journal).
    pub(super) fn changes_run(&self) -> bool {
        self.commit.status.is_some() || self.commit.inbox_cursor.is_some()
    }

    /// The run's row after this commit, with its checksum.
    pub(super) fn changed(&self, raw: &RawRun) -> RawRun {
        let commit = self.commit;
        let mut changed = raw.clone();
        if let Some(cursor) = commit.inbox_cursor {
            changed.inbox_cursor = changed.inbox_cursor.max(cursor);
        }
        if let Some((status, note)) = commit.status {
            changed.status = status.as_str().to_owned();
            changed.note = note.map(str::to_owned);
            changed.updated_at = commit.at;
            if !status.is_driven() {
                changed.owner = None;
            }
        }
        changed.crc = stored(changed.row().checksum());
        changed
    }
}

/// The row of a run [`create`] made, with its checksum.
pub(super) fn created_row(new: &NewRun<'_>, sums: &CreateSums, run: RunId) -> RawRun {
    RawRun {
        id: run,
        workflow: new.workflow.to_owned(),
        fingerprint: new.fingerprint.to_owned(),
        status: RunStatus::Running.as_str().to_owned(),
        idempotency_key: new.idempotency_key.map(str::to_owned),
        note: None,
        parent: new.parent.map(|p| p.0),
        owner: new.owner.map(|c| c.owner.to_owned()),
        created_at: new.at,
        updated_at: new.at,
        inbox_cursor: 0,
        crc: stored(sums.run.with_key(run.0)),
    }
}

/// A commit sent alone: the server's outcome, and whether the run's inbox holds messages
/// above `row.peek` (`false` when not asked). The inbox is read in the statement's
/// snapshot: a message sent after it is announced to the run's driver, which exists by
/// then.
pub(super) async fn commit(
    conn: &mut PgConnection,
    row: &CommitRow<'_>,
    channel: &str,
) -> Answer<(String, bool)> {
    let commit = row.commit;
    let (op, letter): (i16, Option<&DeadLetter>) = match commit.dead_letter {
        DeadLetterChange::Keep => (0, None),
        DeadLetterChange::Put(letter) => (1, Some(letter)),
        DeadLetterChange::Remove => (2, None),
    };
    let answer = sqlx::query(
        "SELECT workflow_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
                                $15, $16, $17, $18, $19, $20, $21, $22, $23, $24),
                $25::bigint IS NOT NULL
                AND EXISTS (SELECT 1 FROM inbox WHERE run_id = $1 AND id > $25::bigint)",
    )
    .bind(int(commit.run.0))
    .bind(int(commit.seq))
    .bind(&row.events)
    .bind(&row.inboxes)
    .bind(&row.crcs)
    .bind(commit.fence.map(|f| f.owner))
    .bind(commit.fence.map_or(0, |f| int(f.token)))
    .bind(commit.status.map(|(s, _)| s.as_str()))
    .bind(commit.status.and_then(|(_, note)| note))
    .bind(row.run_row.map(|(seen, _)| seen))
    .bind(row.run_row.map(|(_, new)| new))
    .bind(op)
    .bind(letter.map(|l| l.workflow.as_str()))
    .bind(letter.map(|l| l.step.as_str()))
    .bind(letter.map(|l| i64::from(l.attempts)))
    .bind(letter.map(|l| l.kind.as_str()))
    .bind(letter.map(|l| l.message.as_str()))
    .bind(letter.map(|l| l.trace_id.as_str()))
    .bind(letter.map(|l| int(l.at)))
    .bind(letter.map(|l| stored(checksum::dead_letter(l))))
    .bind(commit.inbox_cursor.map(int))
    .bind(int(commit.at))
    .bind(channel)
    .bind(&row.closes)
    .bind(row.peek.map(int))
    .fetch_one(&mut *conn)
    .await?;
    Ok((answer.try_get(0)?, answer.try_get(1)?))
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
    if claim.claimable == Claimable::Queued && claim.run.is_none() {
        return claim_queued(conn, claim, nonce, limit, &workflows).await;
    }
    if claim.claimable == Claimable::Begun && claim.run.is_none() {
        return claim_begun(conn, claim, nonce, limit, &workflows).await;
    }
    let rows = sqlx::query(
        "WITH picked AS (
            SELECT id FROM runs
            WHERE status = 'running' AND workflow = ANY($3)
              AND ($4::bigint IS NULL OR id = $4)
              AND ($9::text[] IS NULL OR fingerprint = ANY($9))
              AND (owner IS NULL
                   OR (owner = $1 AND $5)
                   OR (owner <> $1 AND coalesce(lease_until, '-infinity') <= now())
                   OR (owner = $1 AND lease_until <= now() AND lease_token < (SELECT workflow_epoch())))
              AND NOT EXISTS (SELECT 1 FROM flow_gates g
                              WHERE g.run_id = runs.id AND NOT g.admitted)
              AND ($8 = 0 OR ($8 = 1) = (owner IS NULL AND (journal_len <= 1
                   OR (journal_len = 2 AND EXISTS (
                       SELECT 1 FROM journal j WHERE j.run_id = runs.id AND j.seq = 1
                         AND (j.event::jsonb)->>'event' = 'initiated')))))
            ORDER BY id
            LIMIT $6
            FOR NO KEY UPDATE SKIP LOCKED)
         UPDATE runs r SET owner = $1, lease_token = workflow_next_token(r.lease_token),
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
    .bind(claim.claimable.code())
    .bind(claim.versions.map(<[&str]>::to_vec))
    .fetch_all(&mut *conn)
    .await?;
    leases(&rows)
}

/// A claim of queued runs (nobody's, never begun, not waiting for an admission), oldest
/// first: read through the index of unowned runs that wait for no admission, so runs queued
/// behind a concurrency key are not walked through by every claim.
async fn claim_queued(
    conn: &mut PgConnection,
    claim: &Claim<'_>,
    nonce: &str,
    limit: Option<i64>,
    workflows: &[&str],
) -> Answer<Vec<Lease>> {
    let rows = sqlx::query(
        "WITH picked AS (
            SELECT id FROM runs
            WHERE status = 'running' AND owner IS NULL AND NOT waiting
              AND workflow = ANY($3)
              AND ($6::text[] IS NULL OR fingerprint = ANY($6))
              AND NOT EXISTS (SELECT 1 FROM flow_gates g
                              WHERE g.run_id = runs.id AND NOT g.admitted)
              AND (journal_len <= 1
                   OR (journal_len = 2 AND EXISTS (
                       SELECT 1 FROM journal j WHERE j.run_id = runs.id AND j.seq = 1
                         AND (j.event::jsonb)->>'event' = 'initiated')))
            ORDER BY id
            LIMIT $4
            FOR NO KEY UPDATE SKIP LOCKED)
         UPDATE runs r SET owner = $1, lease_token = workflow_next_token(r.lease_token),
                lease_until = now() + $2 * interval '1 millisecond', claim_nonce = $5
         FROM picked WHERE r.id = picked.id
         RETURNING r.id, r.lease_token",
    )
    .bind(claim.claimant.owner)
    .bind(int(claim.claimant.lease_ms))
    .bind(workflows)
    .bind(limit)
    .bind(nonce)
    .bind(claim.versions.map(<[&str]>::to_vec))
    .fetch_all(&mut *conn)
    .await?;
    leases(&rows)
}

/// A claim of begun runs (a lapsed lease, or nobody's after having begun): read from the
/// runs somebody owns (an index as large as the runs in flight) and the begun runs nobody
/// owns (`runs_idle_begun`: more than their first entry, by the row's length, which is
/// exact while nobody owns a run), never from queued runs. The
/// conditions are those of [`claim`] with `Claimable::Begun`, the gate's by the run's
/// `waiting` flag.
async fn claim_begun(
    conn: &mut PgConnection,
    claim: &Claim<'_>,
    nonce: &str,
    limit: Option<i64>,
    workflows: &[&str],
) -> Answer<Vec<Lease>> {
    let rows = sqlx::query(
        "WITH candidates AS (
            SELECT id FROM runs WHERE owner IS NOT NULL AND status = 'running'
            UNION ALL
            SELECT id FROM runs
            WHERE status = 'running' AND owner IS NULL AND NOT waiting AND journal_len >= 2),
         picked AS (
            SELECT r.id FROM runs r JOIN candidates c ON c.id = r.id
            WHERE r.status = 'running' AND r.workflow = ANY($3) AND NOT r.waiting
              AND ($7::text[] IS NULL OR r.fingerprint = ANY($7))
              AND (r.owner IS NULL
                   OR (r.owner = $1 AND $4)
                   OR (r.owner <> $1 AND coalesce(r.lease_until, '-infinity') <= now())
                   OR (r.owner = $1 AND r.lease_until <= now()
                       AND r.lease_token < (SELECT workflow_epoch())))
              AND NOT EXISTS (SELECT 1 FROM flow_gates g
                              WHERE g.run_id = r.id AND NOT g.admitted)
              AND NOT (r.owner IS NULL AND (r.journal_len <= 1
                   OR (r.journal_len = 2 AND EXISTS (
                       SELECT 1 FROM journal j WHERE j.run_id = r.id AND j.seq = 1
                         AND (j.event::jsonb)->>'event' = 'initiated'))))
            ORDER BY r.id
            LIMIT $5
            FOR NO KEY UPDATE OF r SKIP LOCKED)
         UPDATE runs r SET owner = $1, lease_token = workflow_next_token(r.lease_token),
                lease_until = now() + $2 * interval '1 millisecond', claim_nonce = $6
         FROM picked WHERE r.id = picked.id
         RETURNING r.id, r.lease_token",
    )
    .bind(claim.claimant.owner)
    .bind(int(claim.claimant.lease_ms))
    .bind(workflows)
    .bind(claim.reclaim_own)
    .bind(limit)
    .bind(nonce)
    .bind(claim.versions.map(<[&str]>::to_vec))
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
    let ids: Vec<i64> = sqlx::query("SELECT workflow_renew($1, $2)")
        .bind(owner)
        .bind(int(lease_ms))
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    Ok(ids.into_iter().map(|id| RunId(uint(id))).collect())
}

pub(super) async fn release(
    conn: &mut PgConnection,
    owner: &str,
    runs: Option<&[RunId]>,
    channel: &str,
) -> Answer<()> {
    let ids: Option<Vec<i64>> = runs.map(|runs| runs.iter().map(|r| int(r.0)).collect());
    // Releasing all of them (the engine stops) marks its worker row stopped.
    sqlx::query(
        "WITH freed AS (
            UPDATE runs SET owner = NULL, journal_len = greatest(journal_len,
                (SELECT coalesce(max(j.seq) + 1, 0) FROM journal j WHERE j.run_id = runs.id))
            WHERE owner = $1 AND ($2::bigint[] IS NULL OR id = ANY($2))
            RETURNING 1),
         stopped AS (UPDATE workers SET stopped = true WHERE name = $1 AND $2::bigint[] IS NULL)
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
    // The message's id is the server's: its checksum is keyed by it.
    let sum = Keyed::new(|id| checksum::inbox(id, run, key, message, at));
    let row =
        sqlx::query("SELECT o_outcome, o_id FROM workflow_submit($1, $2, $3, $4, $5, $6, $7)")
            .bind(int(run.0))
            .bind(message)
            .bind(key)
            .bind(int(at))
            .bind(channel)
            .bind(stored(sum.base))
            .bind(bits([&sum]))
            .fetch_one(&mut *conn)
            .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
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

pub(super) async fn put_spec(
    conn: &mut PgConnection,
    fingerprint: &str,
    workflow: &str,
    spec: &str,
    at: Timestamp,
) -> Answer<()> {
    sqlx::query(
        "INSERT INTO specs (fingerprint, workflow, spec, first_registered, last_registered, crc)
         VALUES ($1, $2, $3, $4, $4, $5)
         ON CONFLICT (fingerprint) DO UPDATE
            SET last_registered = greatest(specs.last_registered, excluded.last_registered)",
    )
    .bind(fingerprint)
    .bind(workflow)
    .bind(spec)
    .bind(int(at))
    .bind(stored(checksum::spec(fingerprint, workflow, spec)))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

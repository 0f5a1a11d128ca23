//! The store's reads, one statement each, every row verified against its checksum before
//! it is decoded: a damaged row is [`StoreError::Corrupt`] (a journal entry) or
//! [`StoreError::CorruptRow`], and nothing is written back.

use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};

use super::sql::{int, uint, Answer, Failure};
use workflow_core::journal::Event;
use workflow_core::store::checksum;
use workflow_core::store::{
    DeadLetter, InboxItem, Message, RunFilter, RunRecord, RunStatus, SpecRecord, StoreError,
    StoredRun,
};
use workflow_core::{ErrorKind, RunId};

/// A checksum as stored: a u32 in a bigint.
pub(super) fn stored(sum: u32) -> i64 {
    i64::from(sum)
}

pub(super) const RUN_COLUMNS: &str = "r.id, r.workflow, r.fingerprint, r.status, \
    r.idempotency_key, r.note, r.parent, r.owner, r.created_at, r.updated_at, \
    r.inbox_cursor, r.crc";

/// A `runs` row as stored, before its checksum and status are checked.
#[derive(Debug, Clone)]
pub(super) struct RawRun {
    pub(super) id: RunId,
    pub(super) workflow: String,
    pub(super) fingerprint: String,
    pub(super) status: String,
    pub(super) idempotency_key: Option<String>,
    pub(super) note: Option<String>,
    pub(super) parent: Option<u64>,
    pub(super) owner: Option<String>,
    pub(super) created_at: u64,
    pub(super) updated_at: u64,
    pub(super) inbox_cursor: u64,
    pub(super) crc: i64,
}

impl RawRun {
    pub(super) fn decode(row: &PgRow) -> Result<RawRun, sqlx::Error> {
        Ok(RawRun {
            id: RunId(uint(row.try_get("id")?)),
            workflow: row.try_get("workflow")?,
            fingerprint: row.try_get("fingerprint")?,
            status: row.try_get("status")?,
            idempotency_key: row.try_get("idempotency_key")?,
            note: row.try_get("note")?,
            parent: row.try_get::<Option<i64>, _>("parent")?.map(uint),
            owner: row.try_get("owner")?,
            created_at: uint(row.try_get("created_at")?),
            updated_at: uint(row.try_get("updated_at")?),
            inbox_cursor: uint(row.try_get("inbox_cursor")?),
            crc: row.try_get("crc")?,
        })
    }

    /// What the row's checksum covers.
    pub(super) fn row(&self) -> checksum::RunRow<'_> {
        checksum::RunRow {
            id: self.id,
            workflow: &self.workflow,
            fingerprint: &self.fingerprint,
            status: &self.status,
            idempotency_key: self.idempotency_key.as_deref(),
            note: self.note.as_deref(),
            parent: self.parent,
            created_at: self.created_at,
            updated_at: self.updated_at,
            inbox_cursor: self.inbox_cursor,
        }
    }

    pub(super) fn is_intact(&self) -> bool {
        stored(self.row().checksum()) == self.crc
    }

    /// The row, or the damage its checksum shows.
    pub(super) fn verified(self) -> Result<RawRun, Failure> {
        if self.is_intact() {
            Ok(self)
        } else {
            Err(damaged("runs", self.id.to_string()))
        }
    }

    fn record(self) -> Answer<RunRecord> {
        let raw = self.verified()?;
        let Some(status) = RunStatus::parse(&raw.status) else {
            return Err(Failure::Store(StoreError::Io(format!(
                "{} has an unknown status `{}`",
                raw.id, raw.status
            ))));
        };
        Ok(RunRecord {
            id: raw.id,
            workflow: raw.workflow,
            fingerprint: raw.fingerprint,
            status,
            idempotency_key: raw.idempotency_key,
            note: raw.note,
            parent: raw.parent.map(RunId),
            owner: raw.owner,
            created_at: raw.created_at,
            updated_at: raw.updated_at,
        })
    }
}

fn damaged(table: &str, key: String) -> Failure {
    Failure::Store(StoreError::CorruptRow {
        table: table.to_owned(),
        key,
    })
}

/// A run's row, verified against its checksum: what a write that changes the row computes
/// the new checksum from.
pub(super) async fn run_row(conn: &mut PgConnection, run: RunId) -> Answer<Option<RawRun>> {
    let row = sqlx::query(&format!("SELECT {RUN_COLUMNS} FROM runs r WHERE r.id = $1"))
        .bind(int(run.0))
        .fetch_optional(&mut *conn)
        .await?;
    match row {
        Some(row) => Ok(Some(RawRun::decode(&row)?.verified()?)),
        None => Ok(None),
    }
}

/// A run with its journal, and its row as stored (verified).
pub(super) async fn load(
    conn: &mut PgConnection,
    run: RunId,
) -> Answer<Option<(StoredRun, RawRun)>> {
    // One statement: the row and the journal from the same snapshot.
    let rows = sqlx::query(&format!(
        "SELECT {RUN_COLUMNS}, r.journal_len, j.seq, j.event, j.crc AS entry_crc
         FROM runs r LEFT JOIN journal j ON j.run_id = r.id
         WHERE r.id = $1 ORDER BY j.seq"
    ))
    .bind(int(run.0))
    .fetch_all(&mut *conn)
    .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    decode_run(run, &rows).map(Some)
}

/// Several runs with their journals (in the order asked, without those that do not exist
/// or repeat), and their rows as stored (verified): one statement, one snapshot.
pub(super) async fn load_many(
    conn: &mut PgConnection,
    runs: &[RunId],
) -> Answer<Vec<(StoredRun, RawRun)>> {
    let ids: Vec<i64> = runs.iter().map(|run| int(run.0)).collect();
    // Each run's journal is read by its key (a nested loop over the runs found), whatever
    // the planner estimates: as a plain join, a table without statistics (freshly filled,
    // or never analyzed) made it hash the whole journal, a scan of every entry for a page
    // of runs. `OFFSET 0` keeps the lateral subquery from being flattened into that join.
    let rows = sqlx::query(&format!(
        "SELECT {RUN_COLUMNS}, r.journal_len, j.seq, j.event, j.crc AS entry_crc
         FROM runs r LEFT JOIN LATERAL (
             SELECT seq, event, crc FROM journal WHERE run_id = r.id OFFSET 0
         ) j ON true
         WHERE r.id = ANY($1) ORDER BY r.id, j.seq"
    ))
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let mut loaded = std::collections::HashMap::new();
    let mut start = 0;
    while start < rows.len() {
        let id: i64 = rows[start].try_get("id")?;
        let mut end = start + 1;
        while end < rows.len() && rows[end].try_get::<i64, _>("id")? == id {
            end += 1;
        }
        let run = RunId(uint(id));
        loaded.insert(run, decode_run(run, &rows[start..end])?);
        start = end;
    }
    Ok(runs.iter().filter_map(|run| loaded.remove(run)).collect())
}

/// One run from its rows (the run's columns joined with each journal entry, by `seq`):
/// every checksum verified, every entry present.
fn decode_run(run: RunId, rows: &[PgRow]) -> Answer<(StoredRun, RawRun)> {
    let Some(first) = rows.first() else {
        return Err(damaged("runs", run.to_string()));
    };
    let raw = RawRun::decode(first)?.verified()?;
    let record = raw.clone().record()?;
    let length = uint(first.try_get("journal_len")?);
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let Some(seq) = row.try_get::<Option<i64>, _>("seq")? else {
            break;
        };
        let seq = uint(seq);
        let expected = events.len() as u64;
        if seq != expected {
            // An entry is missing from the middle of the journal.
            return Err(Failure::Store(StoreError::Corrupt {
                run,
                seq: expected.min(seq),
            }));
        }
        let text: String = row.try_get("event")?;
        let crc: i64 = row.try_get("entry_crc")?;
        if stored(checksum::entry(run, seq, &text)) != crc {
            return Err(Failure::Store(StoreError::Corrupt { run, seq }));
        }
        let event = serde_json::from_str::<Event>(&text).map_err(|e| {
            Failure::Store(StoreError::BadRow {
                run,
                seq,
                reason: e.to_string(),
            })
        })?;
        events.push(event);
    }
    if (events.len() as u64) < length {
        // Entries are missing from the end. The row's length is the journal's as its
        // row was last written (a status change, an inbox cursor, a lease renewal): a
        // running run's steps append after it without writing the row.
        let seq = events.len() as u64;
        return Err(Failure::Store(StoreError::Corrupt { run, seq }));
    }
    Ok((StoredRun { record, events }, raw))
}

/// A parameter of the listing.
enum Param<'a> {
    Text(&'a str),
    Int(i64),
}

/// The listing's statement for the filters `filter` has, and its parameters: one condition
/// per filter given and none for the others. A `$n IS NULL OR status = $n` condition left
/// the plan to the parameters' values, which a generic plan (prepared statements switch
/// to one after five executions) does not know: each combination is its own statement.
fn listing(filter: &RunFilter) -> (String, Vec<Param<'_>>) {
    let mut sql = format!("SELECT {RUN_COLUMNS} FROM runs r WHERE true");
    let mut params = Vec::new();
    let mut condition = |sql: &mut String, column: &str, param| {
        params.push(param);
        sql.push_str(&format!(" AND {column} ${}", params.len()));
    };
    if let Some(workflow) = &filter.workflow {
        condition(&mut sql, "r.workflow =", Param::Text(workflow));
    }
    if let Some(status) = filter.status {
        condition(&mut sql, "r.status =", Param::Text(status.as_str()));
    }
    if let Some(before) = filter.before {
        condition(&mut sql, "r.id <", Param::Int(int(before.0)));
    }
    sql.push_str(&super::search::clause(
        filter.search.len(),
        params.len() + 1,
    ));
    for (name, value) in &filter.search {
        params.extend([Param::Text(name), Param::Text(value)]);
    }
    sql.push_str(" ORDER BY r.id DESC");
    if let Some(limit) = filter.limit {
        params.push(Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" LIMIT ${}", params.len()));
    }
    (sql, params)
}

pub(super) async fn list_runs(
    conn: &mut PgConnection,
    filter: &RunFilter,
) -> Answer<Vec<RunRecord>> {
    let (sql, params) = listing(filter);
    let mut query = sqlx::query(&sql);
    for param in params {
        query = match param {
            Param::Text(text) => query.bind(text),
            Param::Int(n) => query.bind(n),
        };
    }
    let rows = query.fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|row| RawRun::decode(row)?.record())
        .collect()
}

/// The messages of a run's inbox after `after`; `None` when there is no such run.
pub(super) async fn inbox(
    conn: &mut PgConnection,
    run: RunId,
    after: u64,
) -> Answer<Option<Vec<InboxItem>>> {
    let rows = sqlx::query(
        "SELECT i.id, i.message, i.at, i.key, i.crc FROM runs r
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
        let id = uint(id);
        let text: String = row.try_get(1)?;
        let at = uint(row.try_get(2)?);
        let key: Option<String> = row.try_get(3)?;
        let crc: i64 = row.try_get(4)?;
        if stored(checksum::inbox(id, run, key.as_deref(), &text, at)) != crc {
            return Err(damaged("inbox", id.to_string()));
        }
        let message: Message = serde_json::from_str(&text).map_err(|e| {
            Failure::Store(StoreError::Io(format!(
                "inbox message {id} of {run} does not decode: {e}"
            )))
        })?;
        items.push(InboxItem {
            id,
            run,
            message,
            at,
        });
    }
    Ok(Some(items))
}

pub(super) const LETTER_COLUMNS: &str =
    "run_id, workflow, step, attempts, kind, message, trace_id, at, crc";

/// A `dead_letters` row with its stored checksum; the letter is `None` when its kind is
/// not one this version writes (the row is damaged).
pub(super) fn dead_letter(row: &PgRow) -> Result<(RunId, Option<DeadLetter>, i64), sqlx::Error> {
    let run = RunId(uint(row.try_get(0)?));
    let crc: i64 = row.try_get(8)?;
    let kind: String = row.try_get(4)?;
    let Ok(kind) = kind.parse::<ErrorKind>() else {
        return Ok((run, None, crc));
    };
    let letter = DeadLetter {
        run,
        workflow: row.try_get(1)?,
        step: row.try_get(2)?,
        attempts: u32::try_from(row.try_get::<i64, _>(3)?).unwrap_or(u32::MAX),
        kind,
        message: row.try_get(5)?,
        trace_id: row.try_get(6)?,
        at: uint(row.try_get(7)?),
    };
    Ok((run, Some(letter), crc))
}

pub(super) async fn dead_letters(conn: &mut PgConnection) -> Answer<Vec<DeadLetter>> {
    let rows = sqlx::query(&format!(
        "SELECT {LETTER_COLUMNS} FROM dead_letters ORDER BY run_id DESC"
    ))
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| match dead_letter(row)? {
            (_, Some(letter), crc) if stored(checksum::dead_letter(&letter)) == crc => Ok(letter),
            (run, _, _) => Err(damaged("dead_letters", run.to_string())),
        })
        .collect()
}

pub(super) async fn spec(conn: &mut PgConnection, fingerprint: &str) -> Answer<Option<String>> {
    let row = sqlx::query("SELECT workflow, spec, crc FROM specs WHERE fingerprint = $1")
        .bind(fingerprint)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let workflow: String = row.try_get(0)?;
    let spec: String = row.try_get(1)?;
    if stored(checksum::spec(fingerprint, &workflow, &spec)) != row.try_get::<i64, _>(2)? {
        return Err(damaged("specs", fingerprint.to_owned()));
    }
    Ok(Some(spec))
}

pub(super) async fn specs(conn: &mut PgConnection, workflow: &str) -> Answer<Vec<SpecRecord>> {
    let rows = sqlx::query(
        "SELECT fingerprint, workflow, spec, first_registered, last_registered, crc FROM specs
         WHERE workflow = $1 ORDER BY last_registered DESC, first_registered DESC",
    )
    .bind(workflow)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let record = SpecRecord {
                fingerprint: row.try_get(0)?,
                workflow: row.try_get(1)?,
                spec: row.try_get(2)?,
                first_registered: uint(row.try_get(3)?),
                last_registered: uint(row.try_get(4)?),
            };
            let sum = checksum::spec(&record.fingerprint, &record.workflow, &record.spec);
            if stored(sum) == row.try_get::<i64, _>(5)? {
                Ok(record)
            } else {
                Err(damaged("specs", record.fingerprint))
            }
        })
        .collect()
}

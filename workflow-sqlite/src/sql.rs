//! The store's writes: each function is one request, run inside the writer's transaction,
//! and returns its value and how many journal entries it wrote. Reads are in `read.rs`.

use rusqlite::{params, ErrorCode, OptionalExtension};

use super::known::KnownRun;
use super::schema::{db_error, Db};
use super::writer::Writer;
use workflow_core::journal::Timestamp;
use workflow_core::store::checksum;
use workflow_core::store::tasks::{self, TaskChange};
use workflow_core::store::{
    Commit, Created, DeadLetter, DeadLetterChange, RunRecord, RunStatus, StoreError, Submitted,
};
use workflow_core::RunId;

pub(super) use super::leases::{claim, heartbeat, release, renew, workers, Beat};

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Io(format!("cannot serialize a journal entry: {e}")))
}

/// The owned parts of a [`workflow_core::store::NewRun`], moved to the writer thread.
#[derive(Debug)]
pub(super) struct NewRunRow {
    pub(super) workflow: String,
    pub(super) fingerprint: String,
    pub(super) key: Option<String>,
    pub(super) events: Vec<String>,
    pub(super) parent: Option<RunId>,
    pub(super) owner: Option<(String, u64, Timestamp)>,
    pub(super) supersedes: Option<(RunId, String)>,
    pub(super) at: Timestamp,
    /// What the run's first entries do to the open-task index.
    pub(super) tasks: Vec<TaskChange>,
    pub(super) search: Vec<(String, String)>,
}

/// The owned parts of a [`Commit`], moved to the writer thread.
#[derive(Debug)]
pub(super) struct CommitRow {
    pub(super) run: RunId,
    pub(super) seq: u64,
    pub(super) events: Vec<String>,
    pub(super) fence: Option<(String, u64)>,
    pub(super) status: Option<(RunStatus, Option<String>)>,
    pub(super) dead_letter: Option<Option<DeadLetter>>,
    pub(super) inbox_cursor: Option<u64>,
    pub(super) at: Timestamp,
    /// What the commit does to the open-task index if the run is running, and if not.
    tasks: (Vec<TaskChange>, Vec<TaskChange>),
}

impl CommitRow {
    pub(super) fn new(commit: &Commit<'_>) -> Result<CommitRow, StoreError> {
        let status = commit.status.map(|(status, _)| status);
        Ok(CommitRow {
            run: commit.run,
            seq: commit.seq,
            events: commit
                .events
                .iter()
                .map(to_json)
                .collect::<Result<_, _>>()?,
            fence: commit.fence.map(|f| (f.owner.to_owned(), f.token)),
            status: commit
                .status
                .map(|(status, note)| (status, note.map(str::to_owned))),
            dead_letter: match commit.dead_letter {
                DeadLetterChange::Keep => None,
                DeadLetterChange::Put(letter) => Some(Some(letter.clone())),
                DeadLetterChange::Remove => Some(None),
            },
            inbox_cursor: commit.inbox_cursor,
            at: commit.at,
            tasks: (
                tasks::changes(commit.events, status, RunStatus::Running),
                // A run that is not running has no rows, whatever its entries.
                tasks::changes(&[], status, RunStatus::Parked),
            ),
        })
    }
}

pub(super) const RUN_COLUMNS: &str =
    "id, workflow, fingerprint, status, idempotency_key, note, parent, \
                           owner, created_at, updated_at, inbox_cursor, crc";

/// A `runs` row as stored, before its status is checked.
pub(super) struct RawRun {
    id: RunId,
    workflow: String,
    fingerprint: String,
    status: String,
    idempotency_key: Option<String>,
    note: Option<String>,
    parent: Option<u64>,
    owner: Option<String>,
    created_at: u64,
    updated_at: u64,
    inbox_cursor: u64,
    crc: u32,
}

impl RawRun {
    fn row(&self) -> checksum::RunRow<'_> {
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

    /// The row, or the damage its checksum shows.
    fn verified(self) -> Result<RawRun, StoreError> {
        if self.row().checksum() == self.crc {
            Ok(self)
        } else {
            Err(damaged_run(self.id))
        }
    }
}

pub(super) fn damaged_run(run: RunId) -> StoreError {
    StoreError::CorruptRow {
        table: "runs".to_owned(),
        key: run.to_string(),
    }
}

pub(super) fn raw_run(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        id: RunId(row.get(0)?),
        workflow: row.get(1)?,
        fingerprint: row.get(2)?,
        status: row.get(3)?,
        idempotency_key: row.get(4)?,
        note: row.get(5)?,
        parent: row.get(6)?,
        owner: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
        inbox_cursor: row.get(10)?,
        crc: row.get(11)?,
    })
}

pub(super) fn run_record(db: &Db, raw: RawRun) -> Result<RunRecord, StoreError> {
    let raw = raw.verified()?;
    let Some(status) = RunStatus::parse(&raw.status) else {
        return Err(db.corrupt(format!("{} has an unknown status `{}`", raw.id, raw.status)));
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

fn insert_events(db: &Db, run: RunId, from: u64, events: &[String]) -> Result<(), StoreError> {
    let mut statement = db
        .conn
        .prepare_cached("INSERT INTO journal (run_id, seq, event, crc) VALUES (?1, ?2, ?3, ?4)")
        .map_err(db_error(db))?;
    for (offset, event) in events.iter().enumerate() {
        let seq = from + offset as u64;
        let crc = checksum::entry(run, seq, event);
        match statement.execute(params![run.0, seq, event, crc]) {
            Ok(_) => {}
            // The entry exists already: someone else appended first. Any other constraint
            // (a check, a trigger) refuses the write for good, below.
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if failure.code == ErrorCode::ConstraintViolation
                    && failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
            {
                return Err(StoreError::Conflict { run, seq });
            }
            Err(e) => return Err(db_error(db)(e)),
        }
    }
    Ok(())
}

pub(super) fn create(writer: &Writer, new: &NewRunRow) -> Result<(Created, u64), StoreError> {
    let db: &Db = writer;
    let fail = db_error(db);
    if let Some(key) = &new.key {
        let existing = db
            .conn
            .prepare_cached("SELECT id FROM runs WHERE workflow = ?1 AND idempotency_key = ?2")
            .and_then(|mut s| {
                s.query_row(params![new.workflow, key], |row| row.get(0))
                    .optional()
            })
            .map_err(&fail)?;
        if let Some(id) = existing {
            return Ok((Created::Existing(RunId(id)), 0));
        }
    }
    if let Some((old, note)) = &new.supersedes {
        let Some(raw) = run_row(db, *old)? else {
            return Err(StoreError::UnknownRun(*old));
        };
        if raw.status != RunStatus::Parked.as_str() {
            return Err(StoreError::Conflict {
                run: *old,
                seq: journal_len(db, *old)?,
            });
        }
        let cancelled = RawRun {
            status: RunStatus::Cancelled.as_str().to_owned(),
            note: Some(note.clone()),
            updated_at: new.at,
            ..raw
        };
        update_run(db, &cancelled, true)?;
        super::tasks::apply(db, *old, &[TaskChange::CloseAll])?;
    }
    let (owner, token, lease_until) = match &new.owner {
        Some((owner, lease_ms, now)) => (Some(owner.as_str()), 1u64, now.saturating_add(*lease_ms)),
        None => (None, 0, 0),
    };
    let id: u64 = db
        .conn
        .prepare_cached(
            "INSERT INTO runs (workflow, fingerprint, status, idempotency_key, created_at,
                               updated_at, parent, owner, lease_token, lease_until)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9) RETURNING id",
        )
        .and_then(|mut s| {
            s.query_row(
                params![
                    new.workflow,
                    new.fingerprint,
                    RunStatus::Running.as_str(),
                    new.key,
                    new.at,
                    new.parent.map(|p| p.0),
                    owner,
                    token,
                    lease_until
                ],
                |row| row.get(0),
            )
        })
        .map_err(&fail)?;
    let run = RunId(id);
    let crc = checksum::RunRow {
        id: run,
        workflow: &new.workflow,
        fingerprint: &new.fingerprint,
        status: RunStatus::Running.as_str(),
        idempotency_key: new.key.as_deref(),
        note: None,
        parent: new.parent.map(|p| p.0),
        created_at: new.at,
        updated_at: new.at,
        inbox_cursor: 0,
    }
    .checksum();
    db.conn
        .prepare_cached("UPDATE runs SET crc = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![id, crc]))
        .map_err(&fail)?;
    insert_events(db, run, 0, &new.events)?;
    super::tasks::apply(db, run, &new.tasks)?;
    super::search::insert(db, run, &new.search)?;
    let mut known = writer.known.borrow_mut();
    if let Some((old, _)) = &new.supersedes {
        known.forget(*old);
    }
    known.put(
        run,
        KnownRun {
            owner: owner.map(str::to_owned),
            token,
            next: new.events.len() as u64,
            running: true,
        },
    );
    Ok((Created::New { run, token }, new.events.len() as u64))
}

/// Creates `rows` in order in the open transaction ([`create`] each), all or none: on a
/// failure the request's savepoint rolls back what the batch wrote, and the runs it
/// created are forgotten.
pub(super) fn create_many(
    writer: &Writer,
    rows: &[NewRunRow],
) -> Result<(Vec<Created>, u64), StoreError> {
    let mut created = Vec::with_capacity(rows.len());
    let mut entries = 0;
    for row in rows {
        match create(writer, row) {
            Ok((answer, written)) => {
                created.push(answer);
                entries += written;
            }
            Err(error) => {
                let mut known = writer.known.borrow_mut();
                for answer in &created {
                    if let Created::New { run, .. } = answer {
                        known.forget(*run);
                    }
                }
                return Err(error);
            }
        }
    }
    Ok((created, entries))
}

fn journal_len(db: &Db, run: RunId) -> Result<u64, StoreError> {
    db.conn
        .prepare_cached("SELECT COALESCE(MAX(seq) + 1, 0) FROM journal WHERE run_id = ?1")
        .and_then(|mut s| s.query_row(params![run.0], |row| row.get(0)))
        .map_err(db_error(db))
}

/// A run's row, verified against its checksum.
fn run_row(db: &Db, run: RunId) -> Result<Option<RawRun>, StoreError> {
    let raw = db
        .conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))
        .and_then(|mut s| s.query_row(params![run.0], raw_run).optional())
        .map_err(db_error(db))?;
    raw.map(RawRun::verified).transpose()
}

/// Inside a write: finishes a running run as cancelled with `note` (no journal entry: the
/// note says why), releasing its owner and closing its open tasks. Returns whether it was
/// running.
pub(super) fn cancel_with_note(
    db: &Db,
    run: RunId,
    note: &str,
    at: Timestamp,
) -> Result<bool, StoreError> {
    let Some(raw) = run_row(db, run)? else {
        return Ok(false);
    };
    if raw.status != RunStatus::Running.as_str() {
        return Ok(false);
    }
    let cancelled = RawRun {
        status: RunStatus::Cancelled.as_str().to_owned(),
        note: Some(note.to_owned()),
        updated_at: at,
        ..raw
    };
    update_run(db, &cancelled, true)?;
    super::tasks::apply(db, run, &[TaskChange::CloseAll])?;
    Ok(true)
}

/// Writes a run's status, note, update time and inbox cursor with their new checksum;
/// `release` clears the owner too.
fn update_run(db: &Db, raw: &RawRun, release: bool) -> Result<(), StoreError> {
    db.conn
        .prepare_cached(
            "UPDATE runs SET status = ?2, note = ?3, updated_at = ?4, inbox_cursor = ?5, crc = ?6,
                owner = CASE WHEN ?7 THEN NULL ELSE owner END
             WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                raw.id.0,
                raw.status,
                raw.note,
                raw.updated_at,
                raw.inbox_cursor,
                raw.row().checksum(),
                release
            ])
        })
        .map(drop)
        .map_err(db_error(db))
}

pub(super) fn commit(writer: &Writer, commit: &CommitRow) -> Result<((), u64), StoreError> {
    let db: &Db = writer;
    let fail = db_error(db);
    let run = commit.run;
    // The next entry is the journal's length: a taken or skipped sequence number is a
    // conflict. What the connection knows of the run answers when it agrees; a refusal is
    // checked against the run's row first.
    let remembered = writer
        .known
        .borrow()
        .get(run)
        .and_then(|known| admits(known, commit).ok());
    let running = match remembered {
        Some(running) => running,
        None => {
            writer.known.borrow_mut().forget(run);
            let known = read_known(db, run)?;
            let running = admits(&known, commit)?;
            writer.known.borrow_mut().put(run, known);
            running
        }
    };
    insert_events(db, run, commit.seq, &commit.events)?;
    // The run's row changes only with its status or its inbox cursor: a plain append
    // writes the journal alone.
    if commit.status.is_some() || commit.inbox_cursor.is_some() {
        let raw = run_row(db, run)?.ok_or(StoreError::UnknownRun(run))?;
        let mut changed = RawRun {
            inbox_cursor: raw.inbox_cursor.max(commit.inbox_cursor.unwrap_or(0)),
            ..raw
        };
        let mut release = false;
        if let Some((status, note)) = &commit.status {
            changed.status = status.as_str().to_owned();
            changed.note = note.clone();
            changed.updated_at = commit.at;
            release = !status.is_driven();
        }
        update_run(db, &changed, release)?;
    }
    match &commit.dead_letter {
        None => {}
        Some(Some(letter)) => put_dead_letter(db, letter)?,
        Some(None) => {
            db.conn
                .prepare_cached("DELETE FROM dead_letters WHERE run_id = ?1")
                .and_then(|mut s| s.execute(params![run.0]))
                .map_err(&fail)?;
        }
    }
    let (if_running, if_stopped) = &commit.tasks;
    let changes = if running { if_running } else { if_stopped };
    super::tasks::apply(db, run, changes)?;
    let mut known = writer.known.borrow_mut();
    match &commit.status {
        // A run that is not driven any more is written rarely: read again if it is.
        Some((status, _)) if !status.is_driven() => known.forget(run),
        status => {
            if let Some(known) = known.get_mut(run) {
                known.next = commit.seq + commit.events.len() as u64;
                if let Some((status, _)) = status {
                    known.running = *status == RunStatus::Running;
                }
            }
        }
    }
    Ok(((), commit.events.len() as u64))
}

/// Whether `commit` may be written to the run `known` describes: its fence holds and its
/// first entry comes next. Answers whether the run is running.
fn admits(known: &KnownRun, commit: &CommitRow) -> Result<bool, StoreError> {
    if let Some((fence_owner, fence_token)) = &commit.fence {
        if known.owner.as_deref() != Some(fence_owner.as_str()) || known.token != *fence_token {
            return Err(StoreError::Fenced {
                run: commit.run,
                owner: fence_owner.clone(),
            });
        }
    }
    if known.next != commit.seq {
        return Err(StoreError::Conflict {
            run: commit.run,
            seq: commit.seq,
        });
    }
    Ok(known.running)
}

/// A run's owner, token, journal length and status, as stored.
fn read_known(db: &Db, run: RunId) -> Result<KnownRun, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT owner, lease_token,
                    (SELECT COALESCE(MAX(seq) + 1, 0) FROM journal WHERE run_id = ?1), status
             FROM runs WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.query_row(params![run.0], |row| {
                Ok(KnownRun {
                    owner: row.get(0)?,
                    token: row.get(1)?,
                    next: row.get(2)?,
                    running: row.get::<_, String>(3)? == RunStatus::Running.as_str(),
                })
            })
            .optional()
        })
        .map_err(db_error(db))?
        .ok_or(StoreError::UnknownRun(run))
}

fn put_dead_letter(db: &Db, letter: &DeadLetter) -> Result<(), StoreError> {
    db.conn
        .prepare_cached(
            "INSERT OR REPLACE INTO dead_letters
                (run_id, workflow, step, attempts, kind, message, trace_id, at, crc)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut s| {
            s.execute(params![
                letter.run.0,
                letter.workflow,
                letter.step,
                letter.attempts,
                letter.kind.as_str(),
                letter.message,
                letter.trace_id,
                letter.at,
                checksum::dead_letter(letter),
            ])
        })
        .map(drop)
        .map_err(db_error(db))
}

pub(super) fn submit(
    db: &Db,
    run: RunId,
    message: &str,
    key: Option<&str>,
    at: Timestamp,
) -> Result<(Submitted, u64), StoreError> {
    let fail = db_error(db);
    if let Some(key) = key {
        let existing: Option<u64> = db
            .conn
            .prepare_cached("SELECT id FROM inbox WHERE run_id = ?1 AND key = ?2")
            .and_then(|mut s| {
                s.query_row(params![run.0, key], |row| row.get(0))
                    .optional()
            })
            .map_err(&fail)?;
        if let Some(id) = existing {
            return Ok((Submitted::Duplicate(id), 0));
        }
    }
    let status: Option<String> = db
        .conn
        .prepare_cached("SELECT status FROM runs WHERE id = ?1")
        .and_then(|mut s| s.query_row(params![run.0], |row| row.get(0)).optional())
        .map_err(&fail)?;
    match status.as_deref().map(RunStatus::parse) {
        None => return Err(StoreError::UnknownRun(run)),
        Some(Some(status)) if status.is_finished() => return Err(StoreError::Finished(run)),
        Some(_) => {}
    }
    let id: u64 = db
        .conn
        .prepare_cached(
            "INSERT INTO inbox (run_id, key, message, at) VALUES (?1, ?2, ?3, ?4) RETURNING id",
        )
        .and_then(|mut s| s.query_row(params![run.0, key, message, at], |row| row.get(0)))
        .map_err(&fail)?;
    db.conn
        .prepare_cached("UPDATE inbox SET crc = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![id, checksum::inbox(id, run, key, message, at)]))
        .map_err(&fail)?;
    Ok((Submitted::New(id), 0))
}

pub(super) fn put_spec(
    db: &Db,
    fingerprint: &str,
    workflow: &str,
    spec: &str,
    at: Timestamp,
) -> Result<((), u64), StoreError> {
    db.conn
        .prepare_cached(
            "INSERT INTO specs (fingerprint, spec, workflow, first_registered, last_registered, crc)
             VALUES (?1, ?2, ?3, ?4, ?4, ?5)
             ON CONFLICT (fingerprint) DO UPDATE
                SET last_registered = MAX(last_registered, excluded.last_registered)",
        )
        .and_then(|mut s| {
            s.execute(params![
                fingerprint,
                spec,
                workflow,
                at,
                checksum::spec(fingerprint, workflow, spec)
            ])
        })
        .map_err(db_error(db))?;
    Ok(((), 0))
}

pub(super) fn damaged_spec(fingerprint: &str) -> StoreError {
    StoreError::CorruptRow {
        table: "specs".to_owned(),
        key: fingerprint.to_owned(),
    }
}

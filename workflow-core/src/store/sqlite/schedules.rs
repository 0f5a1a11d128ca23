//! Schedule rows in SQLite: one row per schedule, its definition and its state as JSON,
//! a version for compare-and-set, and a checksum verified on every read.

use rusqlite::{params, OptionalExtension};

use super::schema::{db_error, Db};
use crate::journal::Timestamp;
use crate::store::checksum::{self, ScheduleText};
use crate::store::{MissedTicks, ScheduleChange, ScheduleRow, ScheduleState, StoreError};

const COLUMNS: &str = "id, workflow, definition, paused, state, version, created_at, crc";

struct Raw {
    id: String,
    workflow: String,
    definition: String,
    paused: bool,
    state: String,
    version: u64,
    created_at: Timestamp,
    crc: u32,
}

impl Raw {
    fn text(&self) -> ScheduleText<'_> {
        ScheduleText {
            id: &self.id,
            workflow: &self.workflow,
            definition: &self.definition,
            paused: self.paused,
            state: &self.state,
            version: self.version,
            created_at: self.created_at,
        }
    }

    fn row(self) -> Result<ScheduleRow, StoreError> {
        self.text().verified(|crc| crc == self.crc)
    }
}

fn raw(row: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    Ok(Raw {
        id: row.get(0)?,
        workflow: row.get(1)?,
        definition: row.get(2)?,
        paused: row.get(3)?,
        state: row.get(4)?,
        version: row.get(5)?,
        created_at: row.get(6)?,
        crc: row.get(7)?,
    })
}

fn get(db: &Db, id: &str) -> Result<Option<Raw>, StoreError> {
    db.conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM schedules WHERE id = ?1"))
        .and_then(|mut s| s.query_row(params![id], raw).optional())
        .map_err(db_error(db))
}

fn put(db: &Db, raw: &Raw) -> Result<(), StoreError> {
    let crc = checksum::schedule(&raw.text());
    db.conn
        .prepare_cached(&format!(
            "INSERT OR REPLACE INTO schedules ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        ))
        .and_then(|mut s| {
            s.execute(params![
                raw.id,
                raw.workflow,
                raw.definition,
                raw.paused,
                raw.state,
                raw.version,
                raw.created_at,
                crc
            ])
        })
        .map_err(db_error(db))?;
    Ok(())
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Creates a schedule or replaces its definition (in the writer's transaction).
pub(super) fn put_schedule(
    db: &Db,
    id: &str,
    workflow: &str,
    definition: &str,
    at: Timestamp,
) -> Result<(ScheduleRow, u64), StoreError> {
    let raw = match get(db, id)? {
        Some(existing) => {
            // Verify what is kept before writing over it.
            let kept = Raw { ..existing }.row()?;
            Raw {
                id: id.to_owned(),
                workflow: workflow.to_owned(),
                definition: definition.to_owned(),
                paused: kept.paused,
                state: json(&kept.state),
                version: kept.version + 1,
                created_at: kept.created_at,
                crc: 0,
            }
        }
        None => Raw {
            id: id.to_owned(),
            workflow: workflow.to_owned(),
            definition: definition.to_owned(),
            paused: false,
            state: json(&ScheduleState {
                after: at,
                ..ScheduleState::default()
            }),
            version: 1,
            created_at: at,
            crc: 0,
        },
    };
    put(db, &raw)?;
    let crc = checksum::schedule(&raw.text());
    Ok((Raw { crc, ..raw }.row()?, 0))
}

/// Applies a change if the version matches.
pub(super) fn update_schedule(
    db: &Db,
    id: &str,
    version: u64,
    change: &ScheduleChange,
) -> Result<(bool, u64), StoreError> {
    let Some(existing) = get(db, id)? else {
        return Ok((false, 0));
    };
    if existing.version != version {
        return Ok((false, 0));
    }
    let row = existing.row()?;
    let raw = Raw {
        id: row.id,
        workflow: row.workflow,
        definition: json(&row.schedule),
        paused: change.paused.unwrap_or(row.paused),
        state: json(change.state.as_ref().unwrap_or(&row.state)),
        version: row.version + 1,
        created_at: row.created_at,
        crc: 0,
    };
    put(db, &raw)?;
    if let Some(missed) = &change.missed {
        db.conn
            .prepare_cached(
                "INSERT OR IGNORE INTO schedule_missed (schedule, first, last, count, recorded_at, crc)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    id,
                    missed.first,
                    missed.last,
                    missed.count,
                    missed.recorded_at,
                    checksum::missed_ticks(id, missed)
                ])
            })
            .map_err(db_error(db))?;
    }
    Ok((true, 0))
}

/// The missed-tick records of a schedule, newest first.
pub(super) fn missed_ticks(
    db: &Db,
    id: &str,
    limit: usize,
) -> Result<Vec<MissedTicks>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = db
        .conn
        .prepare_cached(
            "SELECT first, last, count, recorded_at, crc FROM schedule_missed
             WHERE schedule = ?1 ORDER BY first DESC LIMIT ?2",
        )
        .and_then(|mut s| {
            s.query_map(params![id, limit], |row| {
                Ok((
                    MissedTicks {
                        first: row.get(0)?,
                        last: row.get(1)?,
                        count: row.get(2)?,
                        recorded_at: row.get(3)?,
                    },
                    row.get::<_, u32>(4)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(db_error(db))?;
    rows.into_iter()
        .map(|(missed, crc)| {
            if checksum::missed_ticks(id, &missed) == crc {
                Ok(missed)
            } else {
                Err(StoreError::CorruptRow {
                    table: "schedule_missed".to_owned(),
                    key: format!("{id}@{}", missed.first),
                })
            }
        })
        .collect()
}

/// Deletes a schedule (and its missed-tick records).
pub(super) fn delete_schedule(db: &Db, id: &str) -> Result<(bool, u64), StoreError> {
    db.conn
        .prepare_cached("DELETE FROM schedule_missed WHERE schedule = ?1")
        .and_then(|mut s| s.execute(params![id]))
        .map_err(db_error(db))?;
    let deleted = db
        .conn
        .prepare_cached("DELETE FROM schedules WHERE id = ?1")
        .and_then(|mut s| s.execute(params![id]))
        .map_err(db_error(db))?;
    Ok((deleted > 0, 0))
}

/// Every schedule, by id.
pub(super) fn schedules(db: &Db) -> Result<Vec<ScheduleRow>, StoreError> {
    let raws = db
        .conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM schedules ORDER BY id"))
        .and_then(|mut s| {
            s.query_map([], raw)?
                .collect::<rusqlite::Result<Vec<Raw>>>()
        })
        .map_err(db_error(db))?;
    raws.into_iter().map(Raw::row).collect()
}

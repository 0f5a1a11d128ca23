//! Schedule rows in SQLite: one row per schedule, its definition and its state as JSON,
//! a version for compare-and-set, and a checksum verified on every read. Beside them its
//! next fire time, indexed, so a scheduler's pass reads only due rows; it is derived from
//! the row (or decided with it), so the checksum does not cover it.

use rusqlite::{params, OptionalExtension};

use super::schema::{db_error, Db};
use workflow_core::journal::Timestamp;
use workflow_core::store::checksum::{self, ScheduleText};
use workflow_core::store::{
    Decider, DueBatch, DueDecision, DueRow, DueSchedules, MissedTicks, ScheduleChange, ScheduleRow,
    ScheduleState, ScheduleUpdate, StoreError,
};

/// The migration that adds the next fire time of every schedule row, indexed; [`backfill`]
/// fills it.
pub(super) const MIGRATION: &str = "ALTER TABLE schedules ADD COLUMN next_fire INTEGER;
    CREATE INDEX schedules_next_fire ON schedules (next_fire);";

const COLUMNS: &str = "id, workflow, definition, paused, state, version, created_at, crc";

#[derive(Clone)]
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

fn put(db: &Db, raw: &Raw, next_fire: Option<Timestamp>) -> Result<(), StoreError> {
    let crc = checksum::schedule(&raw.text());
    db.conn
        .prepare_cached(&format!(
            "INSERT OR REPLACE INTO schedules ({COLUMNS}, next_fire)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
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
                crc,
                next_fire
            ])
        })
        .map_err(db_error(db))?;
    Ok(())
}

/// Writes `raw` with the next fire time computed from it; returns the row as written.
fn put_derived(db: &Db, raw: Raw) -> Result<ScheduleRow, StoreError> {
    let crc = checksum::schedule(&raw.text());
    let written = Raw { crc, ..raw };
    let row = written.clone().row()?;
    put(db, &written, workflow_core::schedule::next_fire(&row))?;
    Ok(row)
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
    Ok((put_derived(db, raw)?, 0))
}

/// The row `change` makes of `row` (version bumped), not yet written.
fn changed(row: &ScheduleRow, definition: String, change: &ScheduleChange) -> Raw {
    Raw {
        id: row.id.clone(),
        workflow: row.workflow.clone(),
        definition,
        paused: change.paused.unwrap_or(row.paused),
        state: json(change.state.as_ref().unwrap_or(&row.state)),
        version: row.version + 1,
        created_at: row.created_at,
        crc: 0,
    }
}

fn record_missed(db: &Db, id: &str, missed: &MissedTicks) -> Result<(), StoreError> {
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
    Ok(())
}

/// Applies a change if the version matches; `next_fire` is the row's next fire time
/// after it, `None` to compute it from the changed row.
fn apply(
    db: &Db,
    id: &str,
    version: u64,
    change: &ScheduleChange,
    next_fire: Option<Option<Timestamp>>,
) -> Result<bool, StoreError> {
    let Some(existing) = get(db, id)? else {
        return Ok(false);
    };
    if existing.version != version {
        return Ok(false);
    }
    let definition = existing.definition.clone();
    let row = existing.row()?;
    let raw = changed(&row, definition, change);
    match next_fire {
        Some(next_fire) => {
            let crc = checksum::schedule(&raw.text());
            put(db, &Raw { crc, ..raw }, next_fire)?;
        }
        None => {
            put_derived(db, raw)?;
        }
    }
    if let Some(missed) = &change.missed {
        record_missed(db, id, missed)?;
    }
    Ok(true)
}

/// Applies a change if the version matches.
pub(super) fn update_schedule(
    db: &Db,
    id: &str,
    version: u64,
    change: &ScheduleChange,
) -> Result<(bool, u64), StoreError> {
    Ok((apply(db, id, version, change, None)?, 0))
}

/// Applies several compare-and-sets (in the writer's transaction).
pub(super) fn update_schedules(
    db: &Db,
    updates: &[ScheduleUpdate],
) -> Result<(Vec<bool>, u64), StoreError> {
    let applied = updates
        .iter()
        .map(|u| apply(db, &u.id, u.version, &u.change, Some(u.next_fire)))
        .collect::<Result<Vec<bool>, StoreError>>()?;
    Ok((applied, 0))
}

/// Takes the due rows, decides them and writes the answers (in the writer's transaction:
/// one writer, so no other caller decides at the same time).
pub(super) fn decide_schedules(
    db: &Db,
    due: &DueSchedules,
    decide: &Decider,
) -> Result<(DueBatch, u64), StoreError> {
    let workflows = serde_json::to_string(&due.workflows).unwrap_or_else(|_| "[]".to_owned());
    let limit = i64::try_from(due.limit).unwrap_or(i64::MAX);
    let raws = db
        .conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM schedules
             WHERE next_fire <= ?1 AND paused = 0
               AND workflow IN (SELECT value FROM json_each(?2))
             ORDER BY next_fire LIMIT ?3"
        ))
        .and_then(|mut s| {
            s.query_map(params![due.now, workflows, limit], raw)?
                .collect::<rusqlite::Result<Vec<Raw>>>()
        })
        .map_err(db_error(db))?;
    let mut rows = Vec::with_capacity(raws.len());
    for existing in raws {
        let definition = existing.definition.clone();
        let row = existing.row()?;
        match decide(&row) {
            DueDecision::Change { change, next_fire } => {
                let raw = changed(&row, definition, &change);
                let crc = checksum::schedule(&raw.text());
                let raw = Raw { crc, ..raw };
                put(db, &raw, next_fire)?;
                if let Some(missed) = &change.missed {
                    record_missed(db, &row.id, missed)?;
                }
                rows.push(DueRow {
                    row: raw.row()?,
                    decided: true,
                    missed: change.missed,
                });
            }
            DueDecision::Later(at) => {
                db.conn
                    .prepare_cached("UPDATE schedules SET next_fire = ?2 WHERE id = ?1")
                    .and_then(|mut s| s.execute(params![row.id, at]))
                    .map_err(db_error(db))?;
                rows.push(DueRow {
                    row,
                    decided: false,
                    missed: None,
                });
            }
        }
    }
    let next = db
        .conn
        .prepare_cached(
            "SELECT MIN(next_fire) FROM schedules
             WHERE next_fire > ?1 AND paused = 0
               AND workflow IN (SELECT value FROM json_each(?2))",
        )
        .and_then(|mut s| s.query_row(params![due.now, workflows], |r| r.get(0)))
        .map_err(db_error(db))?;
    Ok((DueBatch { rows, next }, 0))
}

/// After [`MIGRATION`]: the next fire time of every existing row, from its definition and
/// state. A row that does not verify is made due at once, so the scheduler reports it.
pub(super) fn backfill(db: &Db) -> Result<(), StoreError> {
    let raws = db
        .conn
        .prepare(&format!("SELECT {COLUMNS} FROM schedules"))
        .and_then(|mut s| {
            s.query_map([], raw)?
                .collect::<rusqlite::Result<Vec<Raw>>>()
        })
        .map_err(db_error(db))?;
    for existing in raws {
        let id = existing.id.clone();
        let next_fire = match existing.row() {
            Ok(row) => workflow_core::schedule::next_fire(&row),
            Err(_) => Some(0),
        };
        db.conn
            .prepare_cached("UPDATE schedules SET next_fire = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id, next_fire]))
            .map_err(db_error(db))?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use std::sync::Arc;
    use workflow_core::store::Store;
    use workflow_spec::Schedule;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_migration_computes_the_next_fire_time_of_existing_rows() {
        let (path, conn) = crate::schema::file_before(MIGRATION, "workflow-next-fire");
        {
            // A file as the version before next fire times left it.
            let definition = json(&Schedule::new("* * * * *"));
            for (id, paused) in [("minutely", false), ("paused", true)] {
                let state = json(&ScheduleState::default());
                let text = ScheduleText {
                    id,
                    workflow: "W",
                    definition: &definition,
                    paused,
                    state: &state,
                    version: 1,
                    created_at: 0,
                };
                conn.execute(
                    &format!(
                        "INSERT INTO schedules ({COLUMNS}) VALUES (?1, 'W', ?2, ?3, ?4, 1, 0, ?5)"
                    ),
                    params![id, definition, paused, state, checksum::schedule(&text)],
                )
                .expect("a row");
            }
        }
        // Closed before the store opens the file.
        drop(conn);
        let store = SqliteStore::open(&path).expect("open and migrate");
        let due = |now| DueSchedules {
            now,
            workflows: vec!["W".to_owned()],
            limit: 10,
        };
        let later: Decider = Arc::new(|_: &ScheduleRow| DueDecision::Later(u64::MAX / 2));
        let batch = store
            .decide_schedules(due(59_999), Arc::clone(&later))
            .await
            .expect("decide");
        assert!(batch.rows.is_empty());
        assert_eq!(
            batch.next,
            Some(60_000),
            "the first tick after the state's `after`"
        );
        let batch = store
            .decide_schedules(due(60_000), later)
            .await
            .expect("decide");
        let taken: Vec<&str> = batch.rows.iter().map(|due| due.row.id.as_str()).collect();
        assert_eq!(
            taken,
            ["minutely"],
            "due at its tick; a paused row never is"
        );
        drop(store);
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

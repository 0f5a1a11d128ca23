//! Schedule rows in PostgreSQL: the same row as the SQLite store's (definition and state
//! as JSON, a version for compare-and-set, a checksum verified on every read). A change
//! reads the row `FOR UPDATE` and writes it in one transaction, so concurrent workers
//! serialise on the row and exactly one compare-and-set of a version succeeds.

use sqlx::postgres::PgRow;
use sqlx::{Acquire, PgConnection, Row};

use super::read::stored;
use super::sql::{int, uint, Answer, Failure};
use crate::journal::Timestamp;
use crate::store::checksum::{self, ScheduleText};
use crate::store::{MissedTicks, ScheduleChange, ScheduleRow, ScheduleState};

const COLUMNS: &str = "id, workflow, definition, paused, state, version, created_at, crc";

struct Raw {
    id: String,
    workflow: String,
    definition: String,
    paused: bool,
    state: String,
    version: u64,
    created_at: Timestamp,
}

impl Raw {
    fn decode(row: &PgRow) -> Result<(Raw, i64), sqlx::Error> {
        Ok((
            Raw {
                id: row.try_get(0)?,
                workflow: row.try_get(1)?,
                definition: row.try_get(2)?,
                paused: row.try_get(3)?,
                state: row.try_get(4)?,
                version: uint(row.try_get(5)?),
                created_at: uint(row.try_get(6)?),
            },
            row.try_get(7)?,
        ))
    }

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

    fn verified(self, crc: i64) -> Answer<ScheduleRow> {
        self.text()
            .verified(|computed| stored(computed) == crc)
            .map_err(Failure::Store)
    }
}

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

async fn locked(conn: &mut PgConnection, id: &str) -> Answer<Option<ScheduleRow>> {
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM schedules WHERE id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    match row {
        Some(row) => {
            let (raw, crc) = Raw::decode(&row)?;
            Ok(Some(raw.verified(crc)?))
        }
        None => Ok(None),
    }
}

async fn write(conn: &mut PgConnection, raw: &Raw) -> Answer<()> {
    sqlx::query(&format!(
        "INSERT INTO schedules ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (id) DO UPDATE SET workflow = excluded.workflow,
            definition = excluded.definition, paused = excluded.paused,
            state = excluded.state, version = excluded.version, crc = excluded.crc"
    ))
    .bind(&raw.id)
    .bind(&raw.workflow)
    .bind(&raw.definition)
    .bind(raw.paused)
    .bind(&raw.state)
    .bind(int(raw.version))
    .bind(int(raw.created_at))
    .bind(stored(checksum::schedule(&raw.text())))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Creates a schedule or replaces its definition.
pub(super) async fn put_schedule(
    conn: &mut PgConnection,
    id: &str,
    workflow: &str,
    definition: &str,
    at: Timestamp,
) -> Answer<ScheduleRow> {
    let mut tx = conn.begin().await?;
    // Two workers registering one schedule at once: the second waits on the first's row.
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('workflow_schedule:' || $1))")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let raw = match locked(&mut tx, id).await? {
        Some(kept) => Raw {
            id: id.to_owned(),
            workflow: workflow.to_owned(),
            definition: definition.to_owned(),
            paused: kept.paused,
            state: json(&kept.state),
            version: kept.version + 1,
            created_at: kept.created_at,
        },
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
        },
    };
    write(&mut tx, &raw).await?;
    tx.commit().await?;
    let crc = stored(checksum::schedule(&raw.text()));
    raw.verified(crc)
}

/// Applies a change if the version matches.
pub(super) async fn update_schedule(
    conn: &mut PgConnection,
    id: &str,
    version: u64,
    change: &ScheduleChange,
) -> Answer<bool> {
    let mut tx = conn.begin().await?;
    let Some(row) = locked(&mut tx, id).await? else {
        return Ok(false);
    };
    if row.version != version {
        return Ok(false);
    }
    let raw = Raw {
        id: row.id,
        workflow: row.workflow,
        definition: json(&row.schedule),
        paused: change.paused.unwrap_or(row.paused),
        state: json(change.state.as_ref().unwrap_or(&row.state)),
        version: row.version + 1,
        created_at: row.created_at,
    };
    write(&mut tx, &raw).await?;
    if let Some(missed) = &change.missed {
        sqlx::query(
            "INSERT INTO schedule_missed (schedule, first, last, count, recorded_at, crc)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(id)
        .bind(int(missed.first))
        .bind(int(missed.last))
        .bind(int(missed.count))
        .bind(int(missed.recorded_at))
        .bind(stored(checksum::missed_ticks(id, missed)))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Deletes a schedule and its missed-tick records.
pub(super) async fn delete_schedule(conn: &mut PgConnection, id: &str) -> Answer<bool> {
    let mut tx = conn.begin().await?;
    sqlx::query("DELETE FROM schedule_missed WHERE schedule = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    let done = sqlx::query("DELETE FROM schedules WHERE id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(done.rows_affected() > 0)
}

/// The missed-tick records of a schedule, newest first.
pub(super) async fn missed_ticks(
    conn: &mut PgConnection,
    id: &str,
    limit: usize,
) -> Answer<Vec<MissedTicks>> {
    let rows = sqlx::query(
        "SELECT first, last, count, recorded_at, crc FROM schedule_missed
         WHERE schedule = $1 ORDER BY first DESC LIMIT $2",
    )
    .bind(id)
    .bind(int(u64::try_from(limit).unwrap_or(u64::MAX)))
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let missed = MissedTicks {
                first: uint(row.try_get(0)?),
                last: uint(row.try_get(1)?),
                count: uint(row.try_get(2)?),
                recorded_at: uint(row.try_get(3)?),
            };
            let crc: i64 = row.try_get(4)?;
            if stored(checksum::missed_ticks(id, &missed)) == crc {
                Ok(missed)
            } else {
                Err(Failure::Store(crate::store::StoreError::CorruptRow {
                    table: "schedule_missed".to_owned(),
                    key: format!("{id}@{}", missed.first),
                }))
            }
        })
        .collect()
}

/// Every schedule, by id.
pub(super) async fn schedules(conn: &mut PgConnection) -> Answer<Vec<ScheduleRow>> {
    let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM schedules ORDER BY id"))
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|row| {
            let (raw, crc) = Raw::decode(row)?;
            raw.verified(crc)
        })
        .collect()
}

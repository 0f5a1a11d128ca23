//! Schedule rows in PostgreSQL: the same row as the SQLite store's (definition and state
//! as JSON, a version for compare-and-set, a checksum verified on every read). A change
//! reads the row `FOR UPDATE` and writes it in one transaction, so concurrent workers
//! serialise on the row and exactly one compare-and-set of a version succeeds. Beside
//! them the row's next fire time, indexed, so a pass reads only due rows; workers take
//! due rows `FOR UPDATE SKIP LOCKED`, so each row is decided by one worker at a time.

use sqlx::postgres::PgRow;
use sqlx::{Acquire, PgConnection, Row};

use super::read::stored;
use super::sql::{int, uint, Answer, Failure};
use workflow_core::journal::Timestamp;
use workflow_core::store::checksum::{self, ScheduleText};
use workflow_core::store::{
    Decider, DueBatch, DueDecision, DueRow, DueSchedules, MissedTicks, ScheduleChange, ScheduleRow,
    ScheduleState, ScheduleUpdate,
};

/// The migration that adds the next fire time of every schedule row, indexed; [`backfill`]
/// fills it.
pub(super) const MIGRATION: &str = r#"
ALTER TABLE schedules ADD COLUMN next_fire bigint;
CREATE INDEX schedules_next_fire ON schedules (next_fire);
"#;

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

/// Writes `raw` with its next fire time (computed from it when `None`).
async fn write(
    conn: &mut PgConnection,
    raw: &Raw,
    next_fire: Option<Option<Timestamp>>,
) -> Answer<()> {
    let next_fire = match next_fire {
        Some(next_fire) => next_fire,
        None => {
            let crc = stored(checksum::schedule(&raw.text()));
            workflow_core::schedule::next_fire(&raw.clone().verified(crc)?)
        }
    };
    sqlx::query(&format!(
        "INSERT INTO schedules ({COLUMNS}, next_fire) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (id) DO UPDATE SET workflow = excluded.workflow,
            definition = excluded.definition, paused = excluded.paused,
            state = excluded.state, version = excluded.version, crc = excluded.crc,
            next_fire = excluded.next_fire"
    ))
    .bind(&raw.id)
    .bind(&raw.workflow)
    .bind(&raw.definition)
    .bind(raw.paused)
    .bind(&raw.state)
    .bind(int(raw.version))
    .bind(int(raw.created_at))
    .bind(stored(checksum::schedule(&raw.text())))
    .bind(next_fire.map(int))
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
    write(&mut tx, &raw, None).await?;
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
    write(&mut tx, &changed(&row, change), None).await?;
    if let Some(missed) = &change.missed {
        record_missed(&mut tx, id, missed).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// The row `change` makes of `row` (version bumped), not yet written.
fn changed(row: &ScheduleRow, change: &ScheduleChange) -> Raw {
    Raw {
        id: row.id.clone(),
        workflow: row.workflow.clone(),
        definition: json(&row.schedule),
        paused: change.paused.unwrap_or(row.paused),
        state: json(change.state.as_ref().unwrap_or(&row.state)),
        version: row.version + 1,
        created_at: row.created_at,
    }
}

async fn record_missed(conn: &mut PgConnection, id: &str, missed: &MissedTicks) -> Answer<()> {
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
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Rows to write in one statement: their new state, version, checksum and next fire time
/// (the definition and workflow stay).
#[derive(Default)]
struct Writes {
    ids: Vec<String>,
    paused: Vec<bool>,
    states: Vec<String>,
    versions: Vec<i64>,
    crcs: Vec<i64>,
    next_fires: Vec<Option<i64>>,
}

impl Writes {
    fn push(&mut self, raw: &Raw, next_fire: Option<Timestamp>) {
        self.ids.push(raw.id.clone());
        self.paused.push(raw.paused);
        self.states.push(raw.state.clone());
        self.versions.push(int(raw.version));
        self.crcs.push(stored(checksum::schedule(&raw.text())));
        self.next_fires.push(next_fire.map(int));
    }

    async fn run(self, conn: &mut PgConnection) -> Answer<()> {
        if self.ids.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "UPDATE schedules AS s SET paused = u.paused, state = u.state, version = u.version,
                crc = u.crc, next_fire = u.next_fire
             FROM unnest($1::text[], $2::boolean[], $3::text[], $4::bigint[], $5::bigint[],
                         $6::bigint[]) AS u (id, paused, state, version, crc, next_fire)
             WHERE s.id = u.id",
        )
        .bind(&self.ids)
        .bind(&self.paused)
        .bind(&self.states)
        .bind(&self.versions)
        .bind(&self.crcs)
        .bind(&self.next_fires)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// The rows of `query` (bound to `binds` by the caller), decoded and verified, each with
/// its stored definition text.
fn decoded(rows: &[PgRow]) -> Answer<Vec<(Raw, ScheduleRow)>> {
    rows.iter()
        .map(|row| {
            let (raw, crc) = Raw::decode(row)?;
            let verified = raw.clone().verified(crc)?;
            Ok((raw, verified))
        })
        .collect()
}

/// Applies several compare-and-sets in one transaction.
pub(super) async fn update_schedules(
    conn: &mut PgConnection,
    updates: &[ScheduleUpdate],
) -> Answer<Vec<bool>> {
    let mut tx = conn.begin().await?;
    let ids: Vec<&str> = updates.iter().map(|u| u.id.as_str()).collect();
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM schedules WHERE id = ANY($1) ORDER BY id FOR UPDATE"
    ))
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?;
    let mut current: std::collections::HashMap<String, (Raw, ScheduleRow)> = decoded(&rows)?
        .into_iter()
        .map(|(raw, row)| (row.id.clone(), (raw, row)))
        .collect();
    let mut writes = Writes::default();
    let mut applied = Vec::with_capacity(updates.len());
    for update in updates {
        let Some((raw, row)) = current.get_mut(&update.id) else {
            applied.push(false);
            continue;
        };
        if row.version != update.version {
            applied.push(false);
            continue;
        }
        let new = Raw {
            definition: raw.definition.clone(),
            ..changed(row, &update.change)
        };
        writes.push(&new, update.next_fire);
        if let Some(missed) = &update.change.missed {
            record_missed(&mut tx, &update.id, missed).await?;
        }
        // A second update of the same row in the batch compares with this one's version.
        let crc = stored(checksum::schedule(&new.text()));
        *row = new.clone().verified(crc)?;
        *raw = new;
        applied.push(true);
    }
    writes.run(&mut tx).await?;
    tx.commit().await?;
    Ok(applied)
}

/// Takes the due rows no other worker is deciding, decides them and writes the answers,
/// in one transaction.
pub(super) async fn decide_schedules(
    conn: &mut PgConnection,
    due: &DueSchedules,
    decide: &Decider,
) -> Answer<DueBatch> {
    let mut tx = conn.begin().await?;
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM schedules
         WHERE next_fire <= $1 AND NOT paused AND workflow = ANY($2)
         ORDER BY next_fire LIMIT $3 FOR UPDATE SKIP LOCKED"
    ))
    .bind(int(due.now))
    .bind(&due.workflows)
    .bind(i64::try_from(due.limit).unwrap_or(i64::MAX))
    .fetch_all(&mut *tx)
    .await?;
    let mut writes = Writes::default();
    let (mut later_ids, mut later_at) = (Vec::new(), Vec::new());
    let mut out = Vec::with_capacity(rows.len());
    for (raw, row) in decoded(&rows)? {
        match decide(&row) {
            DueDecision::Change { change, next_fire } => {
                let new = Raw {
                    definition: raw.definition,
                    ..changed(&row, &change)
                };
                writes.push(&new, next_fire);
                if let Some(missed) = &change.missed {
                    record_missed(&mut tx, &row.id, missed).await?;
                }
                let crc = stored(checksum::schedule(&new.text()));
                out.push(DueRow {
                    row: new.verified(crc)?,
                    decided: true,
                    missed: change.missed,
                });
            }
            DueDecision::Later(at) => {
                later_ids.push(row.id.clone());
                later_at.push(int(at));
                out.push(DueRow {
                    row,
                    decided: false,
                    missed: None,
                });
            }
        }
    }
    writes.run(&mut tx).await?;
    if !later_ids.is_empty() {
        sqlx::query(
            "UPDATE schedules AS s SET next_fire = u.at
             FROM unnest($1::text[], $2::bigint[]) AS u (id, at) WHERE s.id = u.id",
        )
        .bind(&later_ids)
        .bind(&later_at)
        .execute(&mut *tx)
        .await?;
    }
    let next: Option<i64> = sqlx::query_scalar(
        "SELECT min(next_fire) FROM schedules
         WHERE next_fire > $1 AND NOT paused AND workflow = ANY($2)",
    )
    .bind(int(due.now))
    .bind(&due.workflows)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(DueBatch {
        rows: out,
        next: next.map(uint),
    })
}

/// Inside the migration's transaction, after [`MIGRATION`]: the next fire time of every
/// existing row, from its definition and state. A row that does not verify is made due
/// at once, so the scheduler reports it.
pub(super) async fn backfill(
    conn: &mut PgConnection,
    target: &super::error::Target,
) -> Result<(), workflow_core::store::StoreError> {
    let fill = async {
        let rows = sqlx::query(&format!("SELECT {COLUMNS} FROM schedules"))
            .fetch_all(&mut *conn)
            .await?;
        let (mut ids, mut at) = (Vec::new(), Vec::new());
        for row in &rows {
            let (raw, crc) = Raw::decode(row)?;
            ids.push(raw.id.clone());
            at.push(match raw.verified(crc) {
                Ok(row) => workflow_core::schedule::next_fire(&row).map(int),
                Err(_) => Some(0),
            });
        }
        sqlx::query(
            "UPDATE schedules AS s SET next_fire = u.at
             FROM unnest($1::text[], $2::bigint[]) AS u (id, at) WHERE s.id = u.id",
        )
        .bind(&ids)
        .bind(&at)
        .execute(&mut *conn)
        .await?;
        Answer::Ok(())
    };
    match fill.await {
        Ok(()) => Ok(()),
        Err(Failure::Store(error)) => Err(error),
        Err(Failure::Sql(error)) => Err(target.error(error)),
    }
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
                Err(Failure::Store(
                    workflow_core::store::StoreError::CorruptRow {
                        table: "schedule_missed".to_owned(),
                        key: format!("{id}@{}", missed.first),
                    },
                ))
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

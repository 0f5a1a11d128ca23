//! Checksums for a whole file: computed once when a file of an older version is migrated,
//! and verified by [`verify`] (with SQLite's own integrity check) for `workflow check`.

use rusqlite::params;

use super::schema::{db_error, Db};
use workflow_core::store::{checksum, Damage, DeadLetter, StoreError, Verification};
use workflow_core::RunId;

/// Inside the migration's transaction: computes the checksum of every existing row.
pub(super) fn backfill(db: &Db) -> Result<(), StoreError> {
    let fail = db_error(db);
    let mut rows = 0u64;
    for_each_row(db, RUNS, |row| {
        let crc = run_row(row)?.0;
        let id: u64 = row.get(0)?;
        db.conn
            .prepare_cached("UPDATE runs SET crc = ?2 WHERE id = ?1")?
            .execute(params![id, crc])?;
        rows += 1;
        Ok(())
    })
    .map_err(&fail)?;
    for_each_row(db, JOURNAL, |row| {
        let (run, seq): (u64, u64) = (row.get(0)?, row.get(1)?);
        let event = row.get_ref(2)?.as_str().unwrap_or_default().to_owned();
        db.conn
            .prepare_cached("UPDATE journal SET crc = ?3 WHERE run_id = ?1 AND seq = ?2")?
            .execute(params![run, seq, checksum::entry(RunId(run), seq, &event)])?;
        rows += 1;
        Ok(())
    })
    .map_err(&fail)?;
    for_each_row(db, SPECS, |row| {
        let (fingerprint, workflow, spec): (String, String, String) =
            (row.get(0)?, row.get(1)?, row.get(2)?);
        db.conn
            .prepare_cached("UPDATE specs SET crc = ?2 WHERE fingerprint = ?1")?
            .execute(params![
                fingerprint,
                checksum::spec(&fingerprint, &workflow, &spec)
            ])?;
        rows += 1;
        Ok(())
    })
    .map_err(&fail)?;
    for_each_row(db, DEAD_LETTERS, |row| {
        if let Some(letter) = dead_letter(row)? {
            db.conn
                .prepare_cached("UPDATE dead_letters SET crc = ?2 WHERE run_id = ?1")?
                .execute(params![letter.run.0, checksum::dead_letter(&letter)])?;
        }
        rows += 1;
        Ok(())
    })
    .map_err(&fail)?;
    for_each_row(db, INBOX, |row| {
        let (id, run, key, message, at): (u64, u64, Option<String>, String, u64) = (
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
        );
        db.conn
            .prepare_cached("UPDATE inbox SET crc = ?2 WHERE id = ?1")?
            .execute(params![
                id,
                checksum::inbox(id, RunId(run), key.as_deref(), &message, at)
            ])?;
        rows += 1;
        Ok(())
    })
    .map_err(&fail)?;
    tracing::info!(path = %db.path, rows, "computed the checksums of every row");
    Ok(())
}

const RUNS: &str = "SELECT id, workflow, fingerprint, status, idempotency_key, note, parent, \
                    created_at, updated_at, inbox_cursor, crc FROM runs ORDER BY id";
const JOURNAL: &str = "SELECT run_id, seq, event, crc FROM journal ORDER BY run_id, seq";
const SPECS: &str = "SELECT fingerprint, workflow, spec, crc FROM specs ORDER BY fingerprint";
const DEAD_LETTERS: &str = "SELECT run_id, workflow, step, attempts, kind, message, trace_id, \
                            at, crc FROM dead_letters ORDER BY run_id";
const INBOX: &str = "SELECT id, run_id, key, message, at, crc FROM inbox ORDER BY id";

fn for_each_row(
    db: &Db,
    sql: &str,
    mut each: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
) -> rusqlite::Result<()> {
    let mut statement = db.conn.prepare(sql)?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        each(row)?;
    }
    Ok(())
}

/// A `runs` row's checksum as computed from its columns, and the one stored.
fn run_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(u32, u32)> {
    let workflow: String = row.get(1)?;
    let fingerprint: String = row.get(2)?;
    let status: String = row.get(3)?;
    let key: Option<String> = row.get(4)?;
    let note: Option<String> = row.get(5)?;
    let computed = checksum::RunRow {
        id: RunId(row.get(0)?),
        workflow: &workflow,
        fingerprint: &fingerprint,
        status: &status,
        idempotency_key: key.as_deref(),
        note: note.as_deref(),
        parent: row.get(6)?,
        created_at: row.get(7)?,
        updated_at: row.get(8)?,
        inbox_cursor: row.get(9)?,
    }
    .checksum();
    Ok((computed, row.get(10)?))
}

/// A `dead_letters` row, or `None` when its kind is not one this version knows.
fn dead_letter(row: &rusqlite::Row<'_>) -> rusqlite::Result<Option<DeadLetter>> {
    let kind: String = row.get(4)?;
    let Ok(kind) = kind.parse() else {
        return Ok(None);
    };
    Ok(Some(DeadLetter {
        run: RunId(row.get(0)?),
        workflow: row.get(1)?,
        step: row.get(2)?,
        attempts: row.get(3)?,
        kind,
        message: row.get(5)?,
        trace_id: row.get(6)?,
        at: row.get(7)?,
    }))
}

/// SQLite's integrity check, then every row's checksum. Reads only.
pub(super) fn verify(db: &Db) -> Result<Verification, StoreError> {
    let fail = db_error(db);
    let mut verification = Verification::default();
    let findings: Vec<String> = db
        .conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| {
            s.query_map([], |row| row.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })
        .map_err(&fail)?;
    if findings != ["ok"] {
        verification.integrity = findings;
    }
    let mut damage = |table: &str, run: Option<u64>, key: String, reason: &str| {
        verification.damaged.push(Damage {
            table: table.to_owned(),
            run: run.map(RunId),
            key,
            reason: reason.to_owned(),
        });
    };
    let mismatch = "its checksum does not match its contents";
    let mut rows = 0u64;
    // Each table is read on its own; a table SQLite cannot read is reported as such.
    let scans: [(&str, &str); 5] = [
        ("runs", RUNS),
        ("journal", JOURNAL),
        ("specs", SPECS),
        ("dead_letters", DEAD_LETTERS),
        ("inbox", INBOX),
    ];
    for (table, sql) in scans {
        let mut expected_seq: Option<(u64, u64)> = None;
        let scanned = for_each_row(db, sql, |row| {
            rows += 1;
            match table {
                "runs" => {
                    let (computed, stored) = run_row(row)?;
                    if computed != stored {
                        let id: u64 = row.get(0)?;
                        damage(table, Some(id), format!("run-{id}"), mismatch);
                    }
                }
                "journal" => {
                    let (run, seq, crc): (u64, u64, u32) = (row.get(0)?, row.get(1)?, row.get(3)?);
                    let event = row.get_ref(2)?.as_str().map(str::to_owned);
                    let next = match expected_seq {
                        Some((r, s)) if r == run => s,
                        _ => 0,
                    };
                    if seq != next {
                        damage(
                            table,
                            Some(run),
                            format!("run-{run}/{next}"),
                            "missing from the journal",
                        );
                    }
                    expected_seq = Some((run, seq + 1));
                    match event {
                        Ok(event) if checksum::entry(RunId(run), seq, &event) == crc => {}
                        _ => damage(table, Some(run), format!("run-{run}/{seq}"), mismatch),
                    }
                }
                "specs" => {
                    let (fingerprint, workflow, spec, crc): (String, String, String, u32) =
                        (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
                    if checksum::spec(&fingerprint, &workflow, &spec) != crc {
                        damage(table, None, fingerprint, mismatch);
                    }
                }
                "dead_letters" => {
                    let run: u64 = row.get(0)?;
                    let crc: u32 = row.get(8)?;
                    match dead_letter(row)? {
                        Some(letter) if checksum::dead_letter(&letter) == crc => {}
                        _ => damage(table, Some(run), format!("run-{run}"), mismatch),
                    }
                }
                _ => {
                    let (id, run, key, message, at, crc): (
                        u64,
                        u64,
                        Option<String>,
                        String,
                        u64,
                        u32,
                    ) = (
                        row.get(0)?,
                        row.get(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        row.get(4)?,
                        row.get(5)?,
                    );
                    if checksum::inbox(id, RunId(run), key.as_deref(), &message, at) != crc {
                        damage(table, Some(run), id.to_string(), mismatch);
                    }
                }
            }
            Ok(())
        });
        if let Err(error) = scanned {
            damage(
                table,
                None,
                "*".to_owned(),
                &format!("the table cannot be read: {error}"),
            );
        }
    }
    orphans(db, &mut verification);
    verification.rows = rows;
    Ok(verification)
}

/// Rows whose run is gone, and runs without any journal entry: what a purge that
/// stopped half-way would leave (each run is purged in one transaction, so none should exist).
fn orphans(db: &Db, verification: &mut Verification) {
    let mut sql: Vec<String> = super::search::PER_RUN_TABLES
        .iter()
        .map(|table| {
            format!(
                "SELECT DISTINCT '{table}', run_id FROM {table}
                 WHERE run_id NOT IN (SELECT id FROM runs)"
            )
        })
        .collect();
    sql.push(
        "SELECT 'runs', id FROM runs
         WHERE NOT EXISTS (SELECT 1 FROM journal WHERE run_id = runs.id)"
            .to_owned(),
    );
    let found = db.conn.prepare(&sql.join(" UNION ALL ")).and_then(|mut s| {
        s.query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<(String, u64)>>>()
    });
    match found {
        Ok(found) => {
            for (table, run) in found {
                let (key, reason) = if table == "runs" {
                    (format!("run-{run}"), "the run has no journal")
                } else {
                    (format!("run-{run}"), "its run is gone")
                };
                verification.damaged.push(Damage {
                    table,
                    run: Some(RunId(run)),
                    key,
                    reason: reason.to_owned(),
                });
            }
        }
        Err(error) => verification.damaged.push(Damage {
            table: "runs".to_owned(),
            run: None,
            key: "*".to_owned(),
            reason: format!("the runs' rows cannot be matched: {error}"),
        }),
    }
}

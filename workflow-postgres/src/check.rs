//! Checksums for a whole schema: computed once when a schema of an older version is
//! migrated ([`backfill`], inside the migration's transaction), and verified by [`verify`]
//! for `workflow check`. Both walk every table in pages, by key.

use sqlx::postgres::PgRow;
use sqlx::{Connection, Executor, PgConnection, Row};

use super::error::Target;
use super::read::{self, stored, RawRun, LETTER_COLUMNS, RUN_COLUMNS};
use super::sql::{uint, Answer, Failure};
use workflow_core::store::{checksum, Damage, StoreError, Verification};
use workflow_core::RunId;

/// Rows read per statement.
const PAGE: i64 = 1_000;

/// Where a walk over a table stands: the key of the last row seen.
#[derive(Debug, Clone, Default)]
enum After {
    #[default]
    Start,
    Id(i64),
    Entry(i64, i64),
    Text(String),
}

/// The tables, each with a statement that reads a page after a key (`$1`, and `$2` for
/// the journal; null for the first page) and the key of a row.
struct Table {
    name: &'static str,
    page: String,
    key: fn(&PgRow) -> Result<After, sqlx::Error>,
}

fn tables() -> [Table; 5] {
    let id = |row: &PgRow| row.try_get::<i64, _>(0).map(After::Id);
    [
        Table {
            name: "runs",
            page: format!(
                "SELECT {RUN_COLUMNS} FROM runs r WHERE $1::bigint IS NULL OR r.id > $1
                 ORDER BY r.id LIMIT {PAGE}"
            ),
            key: id,
        },
        Table {
            name: "journal",
            page: format!(
                "SELECT run_id, seq, event, crc FROM journal
                 WHERE $1::bigint IS NULL OR (run_id, seq) > ($1, $2::bigint)
                 ORDER BY run_id, seq LIMIT {PAGE}"
            ),
            key: |row| Ok(After::Entry(row.try_get(0)?, row.try_get(1)?)),
        },
        Table {
            name: "specs",
            page: format!(
                "SELECT fingerprint, workflow, spec, crc FROM specs
                 WHERE $1::text IS NULL OR fingerprint > $1 ORDER BY fingerprint LIMIT {PAGE}"
            ),
            key: |row| row.try_get(0).map(After::Text),
        },
        Table {
            name: "dead_letters",
            page: format!(
                "SELECT {LETTER_COLUMNS} FROM dead_letters
                 WHERE $1::bigint IS NULL OR run_id > $1 ORDER BY run_id LIMIT {PAGE}"
            ),
            key: id,
        },
        Table {
            name: "inbox",
            page: format!(
                "SELECT id, run_id, key, message, at, crc FROM inbox
                 WHERE $1::bigint IS NULL OR id > $1 ORDER BY id LIMIT {PAGE}"
            ),
            key: id,
        },
    ]
}

/// The next page of `table` after `after`.
async fn page(conn: &mut PgConnection, table: &Table, after: &After) -> Answer<Vec<PgRow>> {
    let query = sqlx::query(&table.page);
    let query = match (table.name, after) {
        ("specs", After::Text(text)) => query.bind(Some(text.as_str())),
        ("specs", _) => query.bind(None::<&str>),
        ("journal", After::Entry(run, seq)) => query.bind(Some(*run)).bind(Some(*seq)),
        ("journal", _) => query.bind(None::<i64>).bind(None::<i64>),
        (_, After::Id(id)) => query.bind(Some(*id)),
        _ => query.bind(None::<i64>),
    };
    Ok(query.fetch_all(&mut *conn).await?)
}

/// A row's key and the checksum computed from what it says (`None`: it cannot be
/// computed, the row is damaged).
fn computed(table: &str, row: &PgRow) -> Result<(Option<RunId>, String, Option<u32>), sqlx::Error> {
    Ok(match table {
        "runs" => {
            let raw = RawRun::decode(row)?;
            (
                Some(raw.id),
                format!("run-{}", raw.id.0),
                Some(raw.row().checksum()),
            )
        }
        "journal" => {
            let run = RunId(uint(row.try_get(0)?));
            let seq = uint(row.try_get(1)?);
            let event: String = row.try_get(2)?;
            (
                Some(run),
                format!("run-{}/{seq}", run.0),
                Some(checksum::entry(run, seq, &event)),
            )
        }
        "specs" => {
            let (fingerprint, workflow, spec): (String, String, String) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            let sum = checksum::spec(&fingerprint, &workflow, &spec);
            (None, fingerprint, Some(sum))
        }
        "dead_letters" => {
            let (run, letter, _) = read::dead_letter(row)?;
            (
                Some(run),
                format!("run-{}", run.0),
                letter.map(|l| checksum::dead_letter(&l)),
            )
        }
        _ => {
            let id = uint(row.try_get(0)?);
            let run = RunId(uint(row.try_get(1)?));
            let key: Option<String> = row.try_get(2)?;
            let message: String = row.try_get(3)?;
            let at = uint(row.try_get(4)?);
            let sum = checksum::inbox(id, run, key.as_deref(), &message, at);
            (Some(run), id.to_string(), Some(sum))
        }
    })
}

/// The statement that writes a page's checksums, matched on the rows' keys: ids (`$1`),
/// journal sequence numbers (`$2`) or fingerprints (`$1`), then the checksums.
fn fill_statement(table: &str) -> &'static str {
    match table {
        "runs" => {
            "UPDATE runs t SET crc = v.crc FROM unnest($1::bigint[], $2::bigint[]) AS v(id, crc)
             WHERE t.id = v.id"
        }
        "journal" => {
            "UPDATE journal t SET crc = v.crc
             FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS v(run_id, seq, crc)
             WHERE t.run_id = v.run_id AND t.seq = v.seq"
        }
        "specs" => {
            "UPDATE specs t SET crc = v.crc FROM unnest($1::text[], $2::bigint[]) AS v(fp, crc)
             WHERE t.fingerprint = v.fp"
        }
        "dead_letters" => {
            "UPDATE dead_letters t SET crc = v.crc
             FROM unnest($1::bigint[], $2::bigint[]) AS v(run_id, crc) WHERE t.run_id = v.run_id"
        }
        _ => {
            "UPDATE inbox t SET crc = v.crc FROM unnest($1::bigint[], $2::bigint[]) AS v(id, crc)
             WHERE t.id = v.id"
        }
    }
}

/// Inside the migration's transaction: computes the checksum of every existing row.
pub(super) async fn backfill(conn: &mut PgConnection, target: &Target) -> Result<(), StoreError> {
    match fill(conn).await {
        Ok(rows) => {
            tracing::info!(target = %target, rows, "computed the checksums of every row");
            Ok(())
        }
        Err(Failure::Store(error)) => Err(error),
        Err(Failure::Sql(error)) => Err(target.error(error)),
    }
}

async fn fill(conn: &mut PgConnection) -> Answer<u64> {
    let mut rows = 0u64;
    for table in tables() {
        let mut after = After::Start;
        loop {
            let found = page(conn, &table, &after).await?;
            let Some(last) = found.last() else {
                break;
            };
            after = (table.key)(last)?;
            let (mut ids, mut seqs, mut crcs, mut texts) = (vec![], vec![], vec![], vec![]);
            for row in &found {
                // A row whose checksum cannot be computed (a dead letter of a kind this
                // version does not know) keeps 0: `verify` reports it.
                let Some(sum) = computed(table.name, row)?.2 else {
                    continue;
                };
                match (table.key)(row)? {
                    After::Entry(run, seq) => {
                        ids.push(run);
                        seqs.push(seq);
                    }
                    After::Id(id) => ids.push(id),
                    After::Text(text) => texts.push(text),
                    After::Start => {}
                }
                crcs.push(stored(sum));
            }
            let query = sqlx::query(fill_statement(table.name));
            let query = match table.name {
                "specs" => query.bind(&texts).bind(&crcs),
                "journal" => query.bind(&ids).bind(&seqs).bind(&crcs),
                _ => query.bind(&ids).bind(&crcs),
            };
            query.execute(&mut *conn).await?;
            rows += found.len() as u64;
        }
    }
    Ok(rows)
}

/// Every row's checksum, every journal without gaps, and every journal at least as long
/// as its run's row last recorded, in one read-only snapshot. Reads only.
pub(super) async fn verify(conn: &mut PgConnection) -> Answer<Verification> {
    let mut tx = conn.begin().await?;
    tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .await?;
    let mut verification = Verification::default();
    let mut damage = |table: &str, run: Option<RunId>, key: String, reason: &str| {
        verification.damaged.push(Damage {
            table: table.to_owned(),
            run,
            key,
            reason: reason.to_owned(),
        });
    };
    let mismatch = "its checksum does not match its contents";
    let mut rows = 0u64;
    for table in tables() {
        let mut after = After::Start;
        // The next entry each run's journal should have.
        let mut next: Option<(RunId, u64)> = None;
        loop {
            let found = page(&mut tx, &table, &after).await?;
            let Some(last) = found.last() else {
                break;
            };
            after = (table.key)(last)?;
            for row in &found {
                rows += 1;
                let (run, key, sum) = computed(table.name, row)?;
                let crc: i64 = row.try_get("crc")?;
                if table.name == "journal" {
                    let run = run.unwrap_or(RunId(0));
                    let seq = uint(row.try_get(1)?);
                    let expected = match next {
                        Some((r, s)) if r == run => s,
                        _ => 0,
                    };
                    if seq != expected {
                        damage(
                            table.name,
                            Some(run),
                            format!("run-{}/{expected}", run.0),
                            "missing from the journal",
                        );
                    }
                    next = Some((run, seq + 1));
                }
                if sum.map(stored) != Some(crc) {
                    damage(table.name, run, key, mismatch);
                }
            }
        }
    }
    // A run's row says how long its journal was when the row was last written (a status
    // change, an inbox cursor, a lease renewal): the journal is at least that long, and
    // a running run's steps append after it. A shorter journal lost entries from its end.
    let lengths = sqlx::query(
        "SELECT r.id, r.journal_len, j.n FROM runs r
         JOIN (SELECT run_id, count(*) AS n FROM journal GROUP BY run_id) j ON j.run_id = r.id
         WHERE r.journal_len > j.n
         UNION ALL
         SELECT r.id, r.journal_len, 0 FROM runs r
         WHERE r.journal_len <> 0 AND NOT EXISTS (SELECT 1 FROM journal j WHERE j.run_id = r.id)
         ORDER BY 1",
    )
    .fetch_all(&mut *tx)
    .await?;
    for row in &lengths {
        let run = RunId(uint(row.try_get(0)?));
        let (said, held): (i64, i64) = (row.try_get(1)?, row.try_get(2)?);
        damage(
            "runs",
            Some(run),
            format!("run-{}", run.0),
            &format!(
                "its row says the journal has at least {said} entries; the journal holds {held}"
            ),
        );
    }
    tx.commit().await?;
    verification.rows = rows;
    Ok(verification)
}

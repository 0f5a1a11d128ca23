//! The schema: versioned migrations embedded in the binary, applied in one transaction
//! under an advisory lock so workers starting together migrate once, and refused without
//! a change when the database was written by a newer version of this library.
//!
//! Every write of the store is one statement, most of them calls of the stored functions
//! (`sql/functions/`, applied by [`super::functions`] after the migrations):
//! a commit, a creation or a submission is one round trip to the server, checked and
//! applied whole inside it.

use sqlx::{Executor, PgConnection, Row};

use super::error::Target;
use workflow_core::store::StoreError;
use workflow_core::BoxFuture;

/// The migrations: entry `i` takes a schema from version `i` to version `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // Version 1: runs with leases and fencing tokens, their journals, inboxes, dead
    // letters and specs. (The functions that write them are in `sql/functions/`.)
    r#"
CREATE TABLE runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow text NOT NULL,
    fingerprint text NOT NULL,
    status text NOT NULL,
    idempotency_key text,
    note text,
    parent bigint,
    owner text,
    lease_token bigint NOT NULL DEFAULT 0,
    lease_until timestamptz,
    -- Which claim or creation wrote the row last, so a request whose answer was lost
    -- with its connection finds out what it did.
    claim_nonce text,
    create_nonce text,
    journal_len bigint NOT NULL DEFAULT 0,
    inbox_last bigint NOT NULL DEFAULT 0,
    inbox_cursor bigint NOT NULL DEFAULT 0,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);
CREATE UNIQUE INDEX runs_idempotency ON runs (workflow, idempotency_key);
CREATE UNIQUE INDEX runs_create_nonce ON runs (create_nonce);
CREATE INDEX runs_running ON runs (workflow, id) WHERE status = 'running';
CREATE INDEX runs_owner ON runs (owner) WHERE owner IS NOT NULL;
CREATE INDEX runs_pending ON runs (id) WHERE inbox_last > inbox_cursor;
CREATE INDEX runs_status ON runs (status, id);

CREATE TABLE journal (
    run_id bigint NOT NULL REFERENCES runs (id),
    seq bigint NOT NULL,
    event text NOT NULL,
    -- The inbox message the entry takes in: each is taken in once.
    inbox bigint,
    PRIMARY KEY (run_id, seq)
);
CREATE UNIQUE INDEX journal_inbox ON journal (run_id, inbox) WHERE inbox IS NOT NULL;

CREATE TABLE inbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id bigint NOT NULL REFERENCES runs (id),
    key text,
    message text NOT NULL,
    at bigint NOT NULL
);
CREATE UNIQUE INDEX inbox_key ON inbox (run_id, key);
CREATE INDEX inbox_run ON inbox (run_id, id);

CREATE TABLE dead_letters (
    run_id bigint PRIMARY KEY REFERENCES runs (id),
    workflow text NOT NULL,
    step text NOT NULL,
    attempts bigint NOT NULL,
    kind text NOT NULL,
    message text NOT NULL,
    trace_id text NOT NULL,
    at bigint NOT NULL
);

CREATE TABLE specs (
    fingerprint text PRIMARY KEY,
    workflow text NOT NULL,
    spec text NOT NULL,
    first_registered bigint NOT NULL,
    last_registered bigint NOT NULL
);
CREATE INDEX specs_workflow ON specs (workflow);

"#,
    // Version 2: a CRC-32C checksum with every row (`workflow_core::store::checksum`, the same as
    // the SQLite store's), computed by the library and written with the row; the server
    // only fills in the part of a checksum that depends on an id it assigns
    // (`workflow_keyed_crc`). Stored as bigint: a u32 fits without a sign. Existing rows
    // get theirs from `check::backfill`, in this migration's transaction. The columns
    // have no default, so a writer that does not know them (an older version of this
    // library) fails instead of writing rows without checksums.
    r#"
ALTER TABLE runs ADD COLUMN crc bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ALTER COLUMN crc DROP DEFAULT;
ALTER TABLE journal ADD COLUMN crc bigint NOT NULL DEFAULT 0;
ALTER TABLE journal ALTER COLUMN crc DROP DEFAULT;
ALTER TABLE inbox ADD COLUMN crc bigint NOT NULL DEFAULT 0;
ALTER TABLE inbox ALTER COLUMN crc DROP DEFAULT;
ALTER TABLE dead_letters ADD COLUMN crc bigint NOT NULL DEFAULT 0;
ALTER TABLE dead_letters ALTER COLUMN crc DROP DEFAULT;
ALTER TABLE specs ADD COLUMN crc bigint NOT NULL DEFAULT 0;
ALTER TABLE specs ALTER COLUMN crc DROP DEFAULT;

"#,
    // Version 3: schedules, their definition apart from their state.
    r#"
CREATE TABLE schedules (
    id text PRIMARY KEY,
    workflow text NOT NULL,
    definition text NOT NULL,
    paused boolean NOT NULL DEFAULT false,
    state text NOT NULL,
    version bigint NOT NULL,
    created_at bigint NOT NULL,
    crc bigint NOT NULL
);
"#,
    // The open-task index, filled from the journals in the same transaction.
    super::tasks::MIGRATION,
    // Schedules' missed ticks: one row per run of consecutive ticks decided missed.
    r#"
CREATE TABLE schedule_missed (
    schedule text NOT NULL,
    first bigint NOT NULL,
    last bigint NOT NULL,
    count bigint NOT NULL,
    recorded_at bigint NOT NULL,
    crc bigint NOT NULL,
    PRIMARY KEY (schedule, first)
);
"#,
    // Search values (`search: [..]`) by run, indexed by name and value.
    r#"
CREATE TABLE run_search (
    run_id bigint NOT NULL REFERENCES runs (id),
    name text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX run_search_value ON run_search (name, value, run_id);
"#,
    // Group commit: several runs' commits in one statement.
    super::group::MIGRATION,
    // Flow control: gated runs, step slots, rate buckets and waiting steps.
    super::limits::MIGRATION,
    // A step's commit checks and updates the run's row in one statement.
    super::group::STEP_COMMIT_MIGRATION,
    // Schedules' next fire times, indexed, so a pass reads only due rows.
    super::schedules::MIGRATION,
    // The stored functions apart from the tables: each is one file of `sql/functions/`,
    // applied when its checksum differs from the one recorded here (`functions.rs`); the
    // revision of the set they belong to is the schema's `functions`.
    r#"
CREATE TABLE workflow_functions (name text PRIMARY KEY, checksum bigint NOT NULL);
ALTER TABLE workflow_schema ADD COLUMN functions integer NOT NULL DEFAULT 0;
"#,
    // Admission by key: each key's waiting runs in admission order, the keys' holders and
    // debounced runs indexed, and queued runs claimed without the gated ones.
    super::limits::QUEUE_MIGRATION,
    // Worker rows, written by heartbeats, and the mark of a watched run.
    super::workers::MIGRATION,
    // Begun runs nobody owns, indexed: a takeover claim reads them here instead of every
    // queued run. (A step's commit no longer writes the row's `journal_len`, so the
    // predicate costs commits nothing; the length is exact while nobody owns the run.)
    r#"
CREATE INDEX runs_idle_begun ON runs (id)
    WHERE status = 'running' AND owner IS NULL AND NOT waiting AND journal_len >= 2;
"#,
];

/// The newest schema version this library knows.
pub(super) const VERSION: u32 = MIGRATIONS.len() as u32;

/// The schema version whose migration adds the checksums.
const CHECKSUMS: usize = 2;

/// Creates the schema if needed, then checks its version and migrates it, in one
/// transaction under an advisory lock. A newer schema is refused and left untouched.
pub(super) fn prepare<'a>(
    conn: &'a mut PgConnection,
    schema: &'a str,
    target: &'a Target,
) -> BoxFuture<'a, Result<(), StoreError>> {
    Box::pin(async move {
        conn.execute("BEGIN").await.map_err(|e| target.error(e))?;
        let result = migrate(conn, schema, target).await;
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = conn
            .execute(end)
            .await
            .map(drop)
            .map_err(|e| target.error(e));
        result.and(ended)
    })
}

/// Inside the open transaction: everything [`prepare`] does.
async fn migrate(conn: &mut PgConnection, schema: &str, target: &Target) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| target.error(e);
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('workflow-migrate:' || $1))")
        .bind(schema)
        .execute(&mut *conn)
        .await
        .map_err(fail)?;
    let exists: bool = sqlx::query("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(&mut *conn)
        .await
        .and_then(|row| row.try_get(0))
        .map_err(fail)?;
    let version = if exists {
        current_version(conn, schema, target).await?
    } else {
        conn.execute(format!("CREATE SCHEMA {}", quote(schema)).as_str())
            .await
            .map_err(fail)?;
        None
    };
    let version = match version {
        Some(version) => version,
        None => {
            refuse_foreign_tables(conn, schema, target).await?;
            conn.execute(
                format!(
                    "CREATE TABLE {}.workflow_schema (version integer NOT NULL);
                 INSERT INTO {}.workflow_schema (version) VALUES (0)",
                    quote(schema),
                    quote(schema)
                )
                .as_str(),
            )
            .await
            .map_err(fail)?;
            0
        }
    };
    if version > VERSION {
        return Err(StoreError::NewerSchema {
            path: target.shown_with_schema(schema),
            found: version,
            supported: VERSION,
        });
    }
    for (from, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
        tracing::info!(target = %target, schema, from, to = from + 1, "migrating the store schema");
        conn.execute(format!("SET LOCAL search_path TO {};\n{migration}", quote(schema)).as_str())
            .await
            .map_err(fail)?;
        if from + 1 == CHECKSUMS {
            super::check::backfill(conn, target).await?;
        }
        if *migration == super::tasks::MIGRATION {
            super::tasks::backfill(conn, target).await?;
        }
        if *migration == super::schedules::MIGRATION {
            super::schedules::backfill(conn, target).await?;
        }
    }
    if version < VERSION {
        sqlx::query(&format!(
            "UPDATE {}.workflow_schema SET version = $1",
            quote(schema)
        ))
        .bind(VERSION as i32)
        .execute(&mut *conn)
        .await
        .map_err(fail)?;
    }
    super::functions::apply(conn, schema, target).await
}

/// The schema's version, `None` when it has no version table.
async fn current_version(
    conn: &mut PgConnection,
    schema: &str,
    target: &Target,
) -> Result<Option<u32>, StoreError> {
    let fail = |e: sqlx::Error| target.error(e);
    let has_table: bool = sqlx::query(
        "SELECT EXISTS (SELECT 1 FROM pg_tables
                        WHERE schemaname = $1 AND tablename = 'workflow_schema')",
    )
    .bind(schema)
    .fetch_one(&mut *conn)
    .await
    .and_then(|row| row.try_get(0))
    .map_err(fail)?;
    if !has_table {
        return Ok(None);
    }
    let versions: Vec<i32> = sqlx::query(&format!(
        "SELECT version FROM {}.workflow_schema",
        quote(schema)
    ))
    .fetch_all(&mut *conn)
    .await
    .map_err(fail)?
    .iter()
    .map(|row| row.try_get(0))
    .collect::<Result<_, _>>()
    .map_err(fail)?;
    match versions.as_slice() {
        [version] if *version >= 0 => Ok(Some(*version as u32)),
        _ => Err(StoreError::CorruptFile {
            path: target.shown_with_schema(schema),
            reason: format!("workflow_schema holds {versions:?}, not one version"),
        }),
    }
}

/// A schema with tables of our names but no version table belongs to something else.
async fn refuse_foreign_tables(
    conn: &mut PgConnection,
    schema: &str,
    target: &Target,
) -> Result<(), StoreError> {
    let taken: Vec<String> = sqlx::query(
        "SELECT tablename::text FROM pg_tables WHERE schemaname = $1
           AND tablename IN ('runs', 'journal', 'inbox', 'dead_letters', 'specs')
         ORDER BY tablename",
    )
    .bind(schema)
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| target.error(e))?
    .iter()
    .map(|row| row.try_get(0))
    .collect::<Result<_, _>>()
    .map_err(|e| target.error(e))?;
    if taken.is_empty() {
        Ok(())
    } else {
        Err(StoreError::CorruptFile {
            path: target.shown_with_schema(schema),
            reason: format!(
                "the schema has tables named like the store's ({}) but is not a workflow store",
                taken.join(", ")
            ),
        })
    }
}

/// A schema name as a quoted identifier. Names are checked to be `[A-Za-z0-9_]` before
/// they get here; quoting keeps their case.
pub(super) fn quote(schema: &str) -> String {
    format!("\"{}\"", schema.replace('"', "\"\""))
}

//! The schema: versioned migrations embedded in the binary, applied in one transaction
//! under an advisory lock so workers starting together migrate once, and refused without
//! a change when the database was written by a newer version of this library.
//!
//! Every write of the store is one statement, most of them calls of the functions below:
//! a commit, a creation or a submission is one round trip to the server, checked and
//! applied whole inside it.

use sqlx::{Executor, PgConnection, Row};

use super::error::Target;
use workflow_core::store::StoreError;
use workflow_core::BoxFuture;

/// The migrations: entry `i` takes a schema from version `i` to version `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // Version 1: runs with leases and fencing tokens, their journals, inboxes, dead
    // letters and specs, and the functions that write them.
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

-- Creates a run with its first entries, or names the run its idempotency key already
-- names. Outcomes: new, existing, unknown (the superseded run), conflict (it is not
-- parked).
CREATE FUNCTION workflow_create(
    p_workflow text, p_fingerprint text, p_key text, p_events text[], p_parent bigint,
    p_owner text, p_lease_ms bigint, p_supersedes bigint, p_note text, p_at bigint,
    p_nonce text, p_channel text,
    OUT o_outcome text, OUT o_run bigint, OUT o_token bigint, OUT o_len bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    o_len := 0;
    o_token := 0;
    IF p_key IS NOT NULL THEN
        SELECT r.id INTO o_run FROM runs r
        WHERE r.workflow = p_workflow AND r.idempotency_key = p_key;
        IF FOUND THEN
            o_outcome := 'existing';
            RETURN;
        END IF;
    END IF;
    IF p_supersedes IS NOT NULL THEN
        SELECT r.status, r.journal_len INTO v_status, o_len FROM runs r
        WHERE r.id = p_supersedes FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            o_outcome := 'unknown';
            o_run := p_supersedes;
            RETURN;
        ELSIF v_status <> 'parked' THEN
            o_outcome := 'conflict';
            o_run := p_supersedes;
            RETURN;
        END IF;
    END IF;
    INSERT INTO runs (workflow, fingerprint, status, idempotency_key, parent, owner,
                      lease_token, lease_until, create_nonce, journal_len, created_at,
                      updated_at)
    VALUES (p_workflow, p_fingerprint, 'running', p_key, p_parent, p_owner,
            CASE WHEN p_owner IS NULL THEN 0 ELSE 1 END,
            CASE WHEN p_owner IS NULL THEN NULL
                 ELSE now() + p_lease_ms * interval '1 millisecond' END,
            p_nonce, coalesce(cardinality(p_events), 0), p_at, p_at)
    ON CONFLICT (workflow, idempotency_key) DO NOTHING
    RETURNING runs.id, runs.lease_token INTO o_run, o_token;
    IF o_run IS NULL THEN
        -- A concurrent start with the same key committed first.
        SELECT r.id INTO o_run FROM runs r
        WHERE r.workflow = p_workflow AND r.idempotency_key = p_key;
        o_outcome := 'existing';
        o_token := 0;
        RETURN;
    END IF;
    INSERT INTO journal (run_id, seq, event)
    SELECT o_run, t.ord - 1, t.event FROM unnest(p_events) WITH ORDINALITY AS t(event, ord);
    IF p_supersedes IS NOT NULL THEN
        UPDATE runs SET status = 'cancelled', note = p_note, owner = NULL, updated_at = p_at
        WHERE id = p_supersedes;
    END IF;
    IF p_owner IS NULL THEN
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    o_outcome := 'new';
    o_len := coalesce(cardinality(p_events), 0);
END
$$;

-- Appends entries and applies a run's changes, all or nothing. Outcomes: ok, unknown,
-- fenced (the owner or token is not the fence's), conflict (the journal is not p_seq
-- long).
CREATE FUNCTION workflow_commit(
    p_run bigint, p_seq bigint, p_events text[], p_inboxes bigint[], p_fence_owner text,
    p_fence_token bigint, p_status text, p_note text, p_letter smallint,
    p_letter_workflow text, p_letter_step text, p_letter_attempts bigint,
    p_letter_kind text, p_letter_message text, p_letter_trace text, p_letter_at bigint,
    p_cursor bigint, p_at bigint, p_channel text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_owner text;
    v_token bigint;
    v_len bigint;
    v_count bigint := coalesce(cardinality(p_events), 0);
BEGIN
    SELECT r.owner, r.lease_token, r.journal_len INTO v_owner, v_token, v_len
    FROM runs r WHERE r.id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 'unknown';
    END IF;
    IF p_fence_owner IS NOT NULL
       AND (v_owner IS DISTINCT FROM p_fence_owner OR v_token <> p_fence_token) THEN
        RETURN 'fenced';
    END IF;
    IF v_len <> p_seq THEN
        RETURN 'conflict';
    END IF;
    IF v_count > 0 THEN
        INSERT INTO journal (run_id, seq, event, inbox)
        SELECT p_run, p_seq + t.ord - 1, t.event, t.inbox
        FROM unnest(p_events, p_inboxes) WITH ORDINALITY AS t(event, inbox, ord);
    END IF;
    UPDATE runs SET
        journal_len = v_len + v_count,
        status = coalesce(p_status, status),
        note = CASE WHEN p_status IS NULL THEN note ELSE p_note END,
        updated_at = CASE WHEN p_status IS NULL THEN updated_at ELSE p_at END,
        owner = CASE WHEN p_status IS NULL OR p_status = 'running' THEN owner ELSE NULL END,
        inbox_cursor = greatest(inbox_cursor, coalesce(p_cursor, 0))
    WHERE id = p_run;
    IF p_status = 'running' AND v_owner IS NULL THEN
        -- An operator put the run back to work: any worker may claim it.
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    IF p_letter = 1 THEN
        INSERT INTO dead_letters (run_id, workflow, step, attempts, kind, message,
                                  trace_id, at)
        VALUES (p_run, p_letter_workflow, p_letter_step, p_letter_attempts, p_letter_kind,
                p_letter_message, p_letter_trace, p_letter_at)
        ON CONFLICT (run_id) DO UPDATE SET
            workflow = excluded.workflow, step = excluded.step,
            attempts = excluded.attempts, kind = excluded.kind,
            message = excluded.message, trace_id = excluded.trace_id, at = excluded.at;
    ELSIF p_letter = 2 THEN
        DELETE FROM dead_letters WHERE run_id = p_run;
    END IF;
    RETURN 'ok';
END
$$;

-- Puts a message in a run's inbox under the run's row lock, so one run's message ids
-- grow in the order their transactions commit. Outcomes: new, duplicate, unknown,
-- finished.
CREATE FUNCTION workflow_submit(
    p_run bigint, p_message text, p_key text, p_at bigint, p_channel text,
    OUT o_outcome text, OUT o_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    SELECT r.status INTO v_status FROM runs r WHERE r.id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'unknown';
        RETURN;
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT i.id INTO o_id FROM inbox i WHERE i.run_id = p_run AND i.key = p_key;
        IF FOUND THEN
            o_outcome := 'duplicate';
            RETURN;
        END IF;
    END IF;
    IF v_status IN ('completed', 'failed', 'cancelled') THEN
        o_outcome := 'finished';
        RETURN;
    END IF;
    INSERT INTO inbox (run_id, key, message, at) VALUES (p_run, p_key, p_message, p_at)
    RETURNING inbox.id INTO o_id;
    UPDATE runs SET inbox_last = o_id WHERE runs.id = p_run;
    PERFORM pg_notify(p_channel, 'inbox');
    o_outcome := 'new';
END
$$;
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

DROP FUNCTION workflow_create(text, text, text, text[], bigint, text, bigint, bigint, text,
                              bigint, text, text);
DROP FUNCTION workflow_commit(bigint, bigint, text[], bigint[], text, bigint, text, text,
                              smallint, text, text, bigint, text, text, text, bigint,
                              bigint, bigint, text);
DROP FUNCTION workflow_submit(bigint, text, text, bigint, text);

-- The checksum of a row under the id `p_key` the server just assigned: `p_base` is the
-- checksum computed with the id 0, `p_bits[i]` what bit i - 1 of the id changes (see
-- `Keyed` in the library's checksum module).
CREATE FUNCTION workflow_keyed_crc(p_base bigint, p_bits bigint[], p_key bigint)
RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_base # coalesce(bit_xor(b.bit), 0)
    FROM unnest(p_bits) WITH ORDINALITY AS b(bit, i)
    WHERE p_key & (1::bigint << (b.i::int - 1)) <> 0
$$;

-- Creates a run with its first entries, or names the run its idempotency key already
-- names. Outcomes: new, existing, unknown (the superseded run), conflict (it is not
-- parked), stale (the superseded run's row is not the one its new checksum was computed
-- from: read it again).
CREATE FUNCTION workflow_create(
    p_workflow text, p_fingerprint text, p_key text, p_events text[], p_parent bigint,
    p_owner text, p_lease_ms bigint, p_supersedes bigint, p_note text, p_at bigint,
    p_nonce text, p_channel text, p_run_crc bigint, p_run_bits bigint[],
    p_event_crcs bigint[], p_event_bits bigint[], p_old_seen bigint, p_old_crc bigint,
    OUT o_outcome text, OUT o_run bigint, OUT o_token bigint, OUT o_len bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_crc bigint;
BEGIN
    o_len := 0;
    o_token := 0;
    IF p_key IS NOT NULL THEN
        SELECT r.id INTO o_run FROM runs r
        WHERE r.workflow = p_workflow AND r.idempotency_key = p_key;
        IF FOUND THEN
            o_outcome := 'existing';
            RETURN;
        END IF;
    END IF;
    IF p_supersedes IS NOT NULL THEN
        SELECT r.status, r.journal_len, r.crc INTO v_status, o_len, v_crc FROM runs r
        WHERE r.id = p_supersedes FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            o_outcome := 'unknown';
            o_run := p_supersedes;
            RETURN;
        ELSIF v_status <> 'parked' THEN
            o_outcome := 'conflict';
            o_run := p_supersedes;
            RETURN;
        ELSIF v_crc IS DISTINCT FROM p_old_seen THEN
            o_outcome := 'stale';
            o_run := p_supersedes;
            RETURN;
        END IF;
    END IF;
    o_run := nextval(pg_get_serial_sequence('runs', 'id'));
    INSERT INTO runs (id, workflow, fingerprint, status, idempotency_key, parent, owner,
                      lease_token, lease_until, create_nonce, journal_len, created_at,
                      updated_at, crc)
    OVERRIDING SYSTEM VALUE
    VALUES (o_run, p_workflow, p_fingerprint, 'running', p_key, p_parent, p_owner,
            CASE WHEN p_owner IS NULL THEN 0 ELSE 1 END,
            CASE WHEN p_owner IS NULL THEN NULL
                 ELSE now() + p_lease_ms * interval '1 millisecond' END,
            p_nonce, coalesce(cardinality(p_events), 0), p_at, p_at,
            workflow_keyed_crc(p_run_crc, p_run_bits, o_run))
    ON CONFLICT (workflow, idempotency_key) DO NOTHING
    RETURNING runs.lease_token INTO o_token;
    IF NOT FOUND THEN
        -- A concurrent start with the same key committed first.
        SELECT r.id INTO o_run FROM runs r
        WHERE r.workflow = p_workflow AND r.idempotency_key = p_key;
        o_outcome := 'existing';
        o_token := 0;
        RETURN;
    END IF;
    INSERT INTO journal (run_id, seq, event, crc)
    SELECT o_run, t.ord - 1, t.event,
           workflow_keyed_crc(p_event_crcs[t.ord],
                              p_event_bits[(t.ord - 1) * 64 + 1 : t.ord * 64], o_run)
    FROM unnest(p_events) WITH ORDINALITY AS t(event, ord);
    IF p_supersedes IS NOT NULL THEN
        UPDATE runs SET status = 'cancelled', note = p_note, owner = NULL,
                        updated_at = p_at, crc = p_old_crc
        WHERE id = p_supersedes;
    END IF;
    IF p_owner IS NULL THEN
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    o_outcome := 'new';
    o_len := coalesce(cardinality(p_events), 0);
END
$$;

-- Appends entries and applies a run's changes, all or nothing. Outcomes: ok, unknown,
-- fenced (the owner or token is not the fence's), conflict (the journal is not p_seq
-- long), stale (the run's row is not the one p_run_crc was computed from: read it
-- again). p_run_crc is the row's new checksum, given when the status or the inbox
-- cursor changes.
CREATE FUNCTION workflow_commit(
    p_run bigint, p_seq bigint, p_events text[], p_inboxes bigint[], p_crcs bigint[],
    p_fence_owner text, p_fence_token bigint, p_status text, p_note text,
    p_run_seen bigint, p_run_crc bigint, p_letter smallint, p_letter_workflow text,
    p_letter_step text, p_letter_attempts bigint, p_letter_kind text,
    p_letter_message text, p_letter_trace text, p_letter_at bigint, p_letter_crc bigint,
    p_cursor bigint, p_at bigint, p_channel text)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    v_owner text;
    v_token bigint;
    v_len bigint;
    v_crc bigint;
    v_count bigint := coalesce(cardinality(p_events), 0);
BEGIN
    SELECT r.owner, r.lease_token, r.journal_len, r.crc INTO v_owner, v_token, v_len, v_crc
    FROM runs r WHERE r.id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN 'unknown';
    END IF;
    IF p_fence_owner IS NOT NULL
       AND (v_owner IS DISTINCT FROM p_fence_owner OR v_token <> p_fence_token) THEN
        RETURN 'fenced';
    END IF;
    IF v_len <> p_seq THEN
        RETURN 'conflict';
    END IF;
    IF p_run_crc IS NOT NULL AND v_crc IS DISTINCT FROM p_run_seen THEN
        RETURN 'stale';
    END IF;
    IF v_count > 0 THEN
        INSERT INTO journal (run_id, seq, event, inbox, crc)
        SELECT p_run, p_seq + t.ord - 1, t.event, t.inbox, t.crc
        FROM unnest(p_events, p_inboxes, p_crcs) WITH ORDINALITY AS t(event, inbox, crc, ord);
    END IF;
    UPDATE runs SET
        journal_len = v_len + v_count,
        status = coalesce(p_status, status),
        note = CASE WHEN p_status IS NULL THEN note ELSE p_note END,
        updated_at = CASE WHEN p_status IS NULL THEN updated_at ELSE p_at END,
        owner = CASE WHEN p_status IS NULL OR p_status = 'running' THEN owner ELSE NULL END,
        inbox_cursor = greatest(inbox_cursor, coalesce(p_cursor, 0)),
        crc = coalesce(p_run_crc, crc)
    WHERE id = p_run;
    IF p_status = 'running' AND v_owner IS NULL THEN
        -- An operator put the run back to work: any worker may claim it.
        PERFORM pg_notify(p_channel, 'run');
    END IF;
    IF p_letter = 1 THEN
        INSERT INTO dead_letters (run_id, workflow, step, attempts, kind, message,
                                  trace_id, at, crc)
        VALUES (p_run, p_letter_workflow, p_letter_step, p_letter_attempts, p_letter_kind,
                p_letter_message, p_letter_trace, p_letter_at, p_letter_crc)
        ON CONFLICT (run_id) DO UPDATE SET
            workflow = excluded.workflow, step = excluded.step,
            attempts = excluded.attempts, kind = excluded.kind,
            message = excluded.message, trace_id = excluded.trace_id, at = excluded.at,
            crc = excluded.crc;
    ELSIF p_letter = 2 THEN
        DELETE FROM dead_letters WHERE run_id = p_run;
    END IF;
    RETURN 'ok';
END
$$;

-- Puts a message in a run's inbox under the run's row lock, so one run's message ids
-- grow in the order their transactions commit. Outcomes: new, duplicate, unknown,
-- finished.
CREATE FUNCTION workflow_submit(
    p_run bigint, p_message text, p_key text, p_at bigint, p_channel text,
    p_crc bigint, p_bits bigint[],
    OUT o_outcome text, OUT o_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    SELECT r.status INTO v_status FROM runs r WHERE r.id = p_run FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        o_outcome := 'unknown';
        RETURN;
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT i.id INTO o_id FROM inbox i WHERE i.run_id = p_run AND i.key = p_key;
        IF FOUND THEN
            o_outcome := 'duplicate';
            RETURN;
        END IF;
    END IF;
    IF v_status IN ('completed', 'failed', 'cancelled') THEN
        o_outcome := 'finished';
        RETURN;
    END IF;
    o_id := nextval(pg_get_serial_sequence('inbox', 'id'));
    INSERT INTO inbox (id, run_id, key, message, at, crc) OVERRIDING SYSTEM VALUE
    VALUES (o_id, p_run, p_key, p_message, p_at, workflow_keyed_crc(p_crc, p_bits, o_id));
    UPDATE runs SET inbox_last = o_id WHERE runs.id = p_run;
    PERFORM pg_notify(p_channel, 'inbox');
    o_outcome := 'new';
END
$$;
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
    Ok(())
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

//! Flow-control rows in PostgreSQL: gated runs, step slots, rate buckets and waiting
//! steps. Each check-and-take is one transaction under an advisory lock: every admission
//! of the schema under one lock, every slot request under the locks of its keys, every
//! debounced start under its key's lock. A slot counts only while its run's lease is the
//! one it was taken under and has not lapsed by the server's clock, so a killed or paused
//! worker's slots free within one lease and a fenced worker holds none.

use std::sync::atomic::Ordering;

use sqlx::{Acquire, PgConnection, Row};

use super::read;
use super::sql::{self, int, uint, Answer, Failure};
use super::PgStore;
use workflow_core::journal::Timestamp;
use workflow_core::store::limits::{self, Gate, KeyUsage};
use workflow_core::store::{Created, NewRun, StoreError};
use workflow_core::RunId;

/// The migration that adds the flow-control tables.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE flow_gates (
    run_id bigint PRIMARY KEY REFERENCES runs (id),
    scope text,
    key text,
    priority bigint NOT NULL,
    debounce text,
    burst_at bigint NOT NULL,
    not_before bigint NOT NULL,
    admitted boolean NOT NULL DEFAULT false
);
CREATE INDEX flow_gates_waiting ON flow_gates (priority DESC, run_id) WHERE NOT admitted;
CREATE INDEX flow_gates_key ON flow_gates (scope, key) WHERE admitted;
CREATE INDEX flow_gates_debounce ON flow_gates (debounce) WHERE NOT admitted;
CREATE TABLE flow_slots (
    run_id bigint NOT NULL,
    holder text NOT NULL,
    scope text NOT NULL,
    key text NOT NULL,
    owner text NOT NULL,
    token bigint NOT NULL,
    at bigint NOT NULL,
    PRIMARY KEY (run_id, holder)
);
CREATE INDEX flow_slots_key ON flow_slots (scope, key);
CREATE TABLE flow_buckets (
    scope text NOT NULL,
    key text NOT NULL,
    units bigint NOT NULL,
    at bigint NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE TABLE flow_waits (
    run_id bigint NOT NULL,
    holder text NOT NULL,
    kind text NOT NULL,
    limit_name text NOT NULL,
    scope text NOT NULL,
    key text NOT NULL,
    since bigint NOT NULL,
    PRIMARY KEY (run_id, holder)
);
"#;

/// The migration that lets an admission read each key's best waiting runs from an index
/// instead of the whole queue: a gate's place in its queue (`queue_order`, see
/// [`limits::queue_order`]), whether it no longer counts (`done`: its run finished, or was
/// cancelled before its admission), an index per queue and one of all queues at once in
/// that order, one of the keys' holders, one of
/// debounced runs by time, and on `runs` whether a run waits for an admission (`waiting`),
/// so a claim of queued runs skips the gated ones by an index.
pub(super) const QUEUE_MIGRATION: &str = r#"
ALTER TABLE runs ADD COLUMN waiting boolean NOT NULL DEFAULT false;
ALTER TABLE flow_gates ADD COLUMN queue_order bigint NOT NULL DEFAULT 0;
ALTER TABLE flow_gates ADD COLUMN done boolean NOT NULL DEFAULT false;
UPDATE flow_gates g SET queue_order = r.created_at - g.priority * 60000
    FROM runs r WHERE r.id = g.run_id;
UPDATE flow_gates g SET done = true
    WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = g.run_id AND r.status = 'running');
UPDATE runs SET waiting = true WHERE status = 'running'
    AND id IN (SELECT run_id FROM flow_gates WHERE NOT admitted AND NOT done);
DROP INDEX flow_gates_waiting;
DROP INDEX flow_gates_key;
DROP INDEX flow_gates_debounce;
CREATE INDEX flow_gates_queue ON flow_gates (scope, key, queue_order, run_id)
    WHERE NOT admitted AND NOT done;
CREATE INDEX flow_gates_order ON flow_gates (queue_order, run_id) WHERE NOT admitted AND NOT done;
CREATE INDEX flow_gates_holding ON flow_gates (scope, key, run_id) WHERE admitted AND NOT done;
CREATE INDEX flow_gates_later ON flow_gates (not_before, run_id) WHERE NOT admitted AND NOT done;
CREATE INDEX flow_gates_debounce ON flow_gates (debounce) WHERE NOT admitted AND NOT done;
CREATE INDEX runs_queued ON runs (id) WHERE status = 'running' AND owner IS NULL AND NOT waiting;
"#;

/// The clause of a slot held under its run's current, unexpired lease.
pub(super) const VALID: &str = "EXISTS (SELECT 1 FROM runs r WHERE r.id = s.run_id
    AND r.status = 'running' AND r.owner = s.owner AND r.lease_token = s.token
    AND r.lease_until > now())";

/// Takes a transaction-scoped advisory lock on `what` within this schema.
pub(super) async fn lock(conn: &mut PgConnection, schema: &str, what: &str) -> Answer<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1 || ':' || $2))")
        .bind(schema)
        .bind(what)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Finishes a running run as cancelled with `note` (no journal entry), with its row's new
/// checksum. Returns whether it was running.
pub(super) async fn cancel_with_note(
    conn: &mut PgConnection,
    run: RunId,
    note: &str,
    at: Timestamp,
) -> Answer<bool> {
    let Some(raw) = read::run_row(conn, run).await? else {
        return Ok(false);
    };
    if raw.status != "running" {
        return Ok(false);
    }
    let (_, crc) = sql::cancelled(&raw, note, at);
    let done = sqlx::query(
        "UPDATE runs SET status = 'cancelled', note = $2, updated_at = $3, owner = NULL, crc = $4,
                journal_len = greatest(journal_len,
                    (SELECT coalesce(max(seq) + 1, 0) FROM journal WHERE run_id = $1))
         WHERE id = $1 AND status = 'running'",
    )
    .bind(int(run.0))
    .bind(note)
    .bind(int(at))
    .bind(crc)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The admitted, unfinished runs of a key.
pub(super) async fn in_flight(
    conn: &mut PgConnection,
    scope: &str,
    key: &str,
) -> Answer<Vec<RunId>> {
    let rows = sqlx::query(
        "SELECT g.run_id FROM flow_gates g JOIN runs r ON r.id = g.run_id
         WHERE g.scope = $1 AND g.key = $2 AND g.admitted AND NOT g.done
           AND r.status = 'running'
         ORDER BY g.run_id",
    )
    .bind(scope)
    .bind(key)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| Ok(RunId(uint(row.try_get(0)?))))
        .collect()
}

pub(super) async fn usage(conn: &mut PgConnection, scope: &str, key: &str) -> Answer<KeyUsage> {
    let rows = sqlx::query(&format!(
        "SELECT s.run_id, s.holder FROM flow_slots s WHERE s.scope = $1 AND s.key = $2
           AND {VALID} ORDER BY s.at, s.run_id"
    ))
    .bind(scope)
    .bind(key)
    .fetch_all(&mut *conn)
    .await?;
    let holders = rows
        .iter()
        .map(|row| Ok((RunId(uint(row.try_get(0)?)), row.try_get(1)?)))
        .collect::<Result<Vec<(RunId, String)>, sqlx::Error>>()?;
    Ok(KeyUsage {
        in_use: holders.len() as u32,
        holders: holders.into_iter().take(limits::HOLDERS_SHOWN).collect(),
    })
}

impl PgStore {
    /// [`Store::create_gated`](workflow_core::store::Store::create_gated).
    pub(super) async fn create_gated_run(
        &self,
        run: &NewRun<'_>,
        gate: &Gate<'_>,
    ) -> Result<Created, StoreError> {
        let events: Vec<String> = run
            .events
            .iter()
            .map(sql::to_json)
            .collect::<Result<_, _>>()?;
        let nonce = self.nonce();
        let sums = sql::CreateSums::new(run, &events);
        let mut retry = self.retry();
        let mut ambiguous = false;
        loop {
            let mut conn = retry.conn().await?;
            if ambiguous {
                self.sent();
                match sql::created_by(&mut conn, &nonce).await {
                    Ok(Some(lease)) => {
                        return Ok(Created::New {
                            run: lease.run,
                            token: lease.token,
                        })
                    }
                    Ok(None) => {}
                    Err(Failure::Store(error)) => return Err(error),
                    Err(Failure::Sql(error)) => {
                        retry.again(error).await?;
                        continue;
                    }
                }
            }
            self.sent();
            match self
                .gated_once(&mut conn, run, &events, &sums, &nonce, gate)
                .await
            {
                Ok((created, cancelled)) => {
                    for old in cancelled {
                        self.known.forget(old);
                    }
                    if let Created::New { run: id, .. } = created {
                        self.known.put(sql::created_row(run, &sums, id));
                        self.stats
                            .journal_writes
                            .fetch_add(events.len() as u64, Ordering::Relaxed);
                        self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(created);
                }
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) => {
                    ambiguous = true;
                    retry.again(error).await?;
                }
            }
        }
    }

    /// One try of a gated creation, in one transaction.
    async fn gated_once(
        &self,
        conn: &mut PgConnection,
        run: &NewRun<'_>,
        events: &[String],
        sums: &sql::CreateSums,
        nonce: &str,
        gate: &Gate<'_>,
    ) -> Answer<(Created, Vec<RunId>)> {
        let mut tx = conn.begin().await?;
        if let Some(debounce) = &gate.debounce {
            let what = format!("debounce:{}:{}", run.workflow, debounce.key);
            lock(&mut tx, &self.schema, &what).await?;
        }
        let answer = sql::create(&mut tx, run, events, sums, nonce, &self.channel).await?;
        let id = RunId(answer.run.map_or(0, |id| id as u64));
        match answer.outcome.as_str() {
            "new" => {}
            "existing" => return Ok((Created::Existing(id), Vec::new())),
            other => {
                return Err(Failure::Store(StoreError::Io(format!(
                    "workflow_create answered `{other}` for a gated run"
                ))))
            }
        }
        let mut cancelled = Vec::new();
        let mut burst_at = run.at;
        let mut not_before = run.at;
        if let Some(debounce) = &gate.debounce {
            let rows = sqlx::query(
                "SELECT g.run_id, g.burst_at FROM flow_gates g JOIN runs r ON r.id = g.run_id
                 WHERE NOT g.admitted AND NOT g.done AND g.debounce = $1 AND r.workflow = $2
                   AND r.status = 'running' AND g.run_id <> $3",
            )
            .bind(debounce.key)
            .bind(run.workflow)
            .bind(int(id.0))
            .fetch_all(&mut *tx)
            .await?;
            for row in rows {
                let old = RunId(uint(row.try_get(0)?));
                burst_at = burst_at.min(uint(row.try_get(1)?));
                if cancel_with_note(&mut tx, old, &limits::debounced_note(id), run.at).await? {
                    cancelled.push(old);
                }
                set_done(&mut tx, &[int(old.0)]).await?;
            }
            not_before = debounce.not_before(run.at, burst_at);
        }
        let (scope, key) = gate.concurrency.unzip();
        sqlx::query(
            "WITH gate AS (
                INSERT INTO flow_gates
                    (run_id, scope, key, priority, debounce, burst_at, not_before, queue_order)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8))
             UPDATE runs SET waiting = true WHERE id = $1",
        )
        .bind(int(id.0))
        .bind(scope)
        .bind(key)
        .bind(gate.priority)
        .bind(gate.debounce.map(|d| d.key))
        .bind(int(burst_at))
        .bind(int(not_before))
        .bind(limits::queue_order(gate.priority, run.at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok((
            Created::New {
                run: id,
                token: uint(answer.token),
            },
            cancelled,
        ))
    }
}

/// Marks gates as no longer counting: their runs finished, or were cancelled while waiting.
pub(super) async fn set_done(conn: &mut PgConnection, runs: &[i64]) -> Answer<()> {
    sqlx::query("UPDATE flow_gates SET done = true WHERE run_id = ANY($1)")
        .bind(runs)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

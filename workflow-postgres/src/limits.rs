//! Flow-control rows in PostgreSQL: gated runs, step slots, rate buckets and waiting
//! steps. Each check-and-take is one transaction under an advisory lock: every admission
//! of the schema under one lock, every slot request under the locks of its keys, every
//! debounced start under its key's lock. A slot counts only while its run's lease is the
//! one it was taken under and has not lapsed by the server's clock, so a killed or paused
//! worker's slots free within one lease and a fenced worker holds none.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use sqlx::{Acquire, PgConnection, Row};

use super::read;
use super::sql::{self, int, uint, Answer, Failure};
use super::PgStore;
use workflow_core::journal::Timestamp;
use workflow_core::store::limits::{
    self, Admission, Admit, AdmittedRun, Candidate, Gate, KeyUsage,
};
use workflow_core::store::{Created, Lease, NewRun, StoreError};
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
async fn cancel_with_note(
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
        "UPDATE runs SET status = 'cancelled', note = $2, updated_at = $3, owner = NULL, crc = $4
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
         WHERE g.scope = $1 AND g.key = $2 AND g.admitted AND r.status = 'running'
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
                 WHERE NOT g.admitted AND g.debounce = $1 AND r.workflow = $2
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
            }
            not_before = debounce.not_before(run.at, burst_at);
        }
        let (scope, key) = gate.concurrency.unzip();
        sqlx::query(
            "INSERT INTO flow_gates (run_id, scope, key, priority, debounce, burst_at, not_before)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(int(id.0))
        .bind(scope)
        .bind(key)
        .bind(gate.priority)
        .bind(gate.debounce.map(|d| d.key))
        .bind(int(burst_at))
        .bind(int(not_before))
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

    /// [`Store::admit`](workflow_core::store::Store::admit). An answer lost with the connection
    /// leaves its runs owned by this worker under tokens it never learnt: they are taken
    /// over once their lease lapses, and count against their keys meanwhile.
    pub(super) async fn admit_gated(&self, admit: &Admit<'_>) -> Result<Admission, StoreError> {
        let mut retry = self.retry();
        loop {
            let mut conn = retry.conn().await?;
            self.sent();
            match self.admit_once(&mut conn, admit).await {
                Ok((admission, cancelled)) => {
                    for run in cancelled {
                        self.known.forget(run);
                    }
                    return Ok(admission);
                }
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) => retry.again(error).await?,
            }
        }
    }

    async fn admit_once(
        &self,
        conn: &mut PgConnection,
        admit: &Admit<'_>,
    ) -> Answer<(Admission, Vec<RunId>)> {
        let mut tx = conn.begin().await?;
        lock(&mut tx, &self.schema, "admission").await?;
        let now = admit.claimant.now;
        let rows = sqlx::query(
            "SELECT g.run_id, r.workflow, g.scope, g.key, g.priority, r.created_at, g.not_before
             FROM flow_gates g JOIN runs r ON r.id = g.run_id
             WHERE NOT g.admitted AND g.not_before <= $1 AND r.status = 'running'
               AND r.owner IS NULL AND r.fingerprint = ANY($2)
             ORDER BY g.priority DESC, g.run_id LIMIT $3",
        )
        .bind(int(now))
        .bind(admit.versions.to_vec())
        .bind(limits::ADMISSION_WINDOW as i64)
        .fetch_all(&mut *tx)
        .await?;
        let candidates = rows
            .iter()
            .map(|row| {
                let scope: Option<String> = row.try_get(2)?;
                let key: Option<String> = row.try_get(3)?;
                let created_at = uint(row.try_get(5)?);
                Ok(Candidate {
                    run: RunId(uint(row.try_get(0)?)),
                    workflow: row.try_get(1)?,
                    key: scope.zip(key),
                    priority: row.try_get(4)?,
                    created_at,
                    ready_at: uint(row.try_get(6)?).max(created_at),
                })
            })
            .collect::<Result<Vec<Candidate>, sqlx::Error>>()?;
        let next_ready = sqlx::query(
            "SELECT g.not_before, g.run_id FROM flow_gates g JOIN runs r ON r.id = g.run_id
             WHERE NOT g.admitted AND g.not_before > $1 AND r.status = 'running'
               AND r.fingerprint = ANY($2)
             ORDER BY g.not_before, g.run_id LIMIT 1",
        )
        .bind(int(now))
        .bind(admit.versions.to_vec())
        .fetch_optional(&mut *tx)
        .await?
        .map(|row| Ok::<_, sqlx::Error>((uint(row.try_get(0)?), RunId(uint(row.try_get(1)?)))))
        .transpose()?;
        if candidates.is_empty() {
            return Ok((
                Admission {
                    next_ready,
                    ..Admission::default()
                },
                Vec::new(),
            ));
        }
        let mut held = HashMap::new();
        for key in candidates.iter().filter_map(|c| c.key.clone()) {
            if let std::collections::hash_map::Entry::Vacant(slot) = held.entry(key) {
                let (scope, value) = slot.key();
                let holders = in_flight(&mut tx, scope, value).await?;
                slot.insert(holders);
            }
        }
        let plan = limits::plan(
            &candidates,
            &held,
            admit.limits,
            now,
            admit.room,
            admit.aging_ms,
        );
        let mut admission = Admission {
            cancel: plan.cancel,
            next_ready,
            ..Admission::default()
        };
        for id in plan.admit {
            let Some(candidate) = candidates.iter().find(|c| c.run == id) else {
                continue;
            };
            let token: i64 = sqlx::query(
                "UPDATE runs SET owner = $2, lease_token = workflow_next_token(lease_token),
                        lease_until = now() + $3 * interval '1 millisecond'
                 WHERE id = $1 RETURNING lease_token",
            )
            .bind(int(id.0))
            .bind(admit.claimant.owner)
            .bind(int(admit.claimant.lease_ms))
            .fetch_one(&mut *tx)
            .await?
            .try_get(0)?;
            sqlx::query("UPDATE flow_gates SET admitted = true WHERE run_id = $1")
                .bind(int(id.0))
                .execute(&mut *tx)
                .await?;
            admission.admitted.push(AdmittedRun {
                lease: Lease {
                    run: id,
                    token: uint(token),
                },
                workflow: candidate.workflow.clone(),
                waited_ms: now.saturating_sub(candidate.ready_at),
            });
        }
        let mut cancelled = Vec::new();
        for (id, note) in plan.skip {
            if cancel_with_note(&mut tx, id, &note, now).await? {
                cancelled.push(id);
                admission.skipped.push((id, note));
            }
        }
        tx.commit().await?;
        Ok((admission, cancelled))
    }
}

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
    self, Admission, Admit, AdmittedRun, Candidate, Gate, KeyUsage, Queue,
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
        let scan = limits::scan_len(admit.room);
        let first = first_read(&mut tx, scan, admit).await?;
        let (next_ready, held, scanned, read) =
            (first.next_ready, first.held, first.scanned, first.read);
        let decide = |candidates: Vec<Candidate>| {
            let plan = limits::plan(
                &candidates,
                &held,
                admit.limits,
                now,
                admit.room,
                admit.aging_ms,
            );
            (candidates, plan)
        };
        let all = |read: &[(Vec<Candidate>, usize)]| -> Vec<Candidate> {
            read.iter().flat_map(|(c, _)| c.clone()).collect()
        };
        // First the best runs of every queue at once; queue by queue when they do not
        // decide the admission alone.
        let (candidates, plan) =
            match limits::heads(scanned, read < scan, &held, admit.limits, admit.room) {
                Some(candidates) => decide(candidates),
                None => {
                    let queues = queues(&mut tx).await?;
                    let reads = limits::reads(&queues, &held, admit.limits, admit.room);
                    let first: Vec<usize> = reads.iter().map(|n| n.first).collect();
                    let mut read = read_queues(&mut tx, &queues, &first, admit).await?;
                    let (mut candidates, mut plan) = decide(all(&read));
                    // The first reading took a share of the room from each queue; when that
                    // left room and some queue may have more, those are read up to their
                    // free slots.
                    let more: Vec<usize> = (0..queues.len())
                        .map(|i| {
                            match read[i].1 == reads[i].first && reads[i].all > reads[i].first {
                                true => reads[i].all,
                                false => 0,
                            }
                        })
                        .collect();
                    if plan.admit.len() < admit.room && more.iter().any(|n| *n > 0) {
                        let again = read_queues(&mut tx, &queues, &more, admit).await?;
                        for (i, fresh) in again.into_iter().enumerate() {
                            if more[i] > 0 {
                                read[i] = fresh;
                            }
                        }
                        (candidates, plan) = decide(all(&read));
                    }
                    (candidates, plan)
                }
            };
        let mut admission = Admission {
            cancel: plan.cancel,
            next_ready,
            ..Admission::default()
        };
        if !plan.admit.is_empty() || !first.done.is_empty() {
            // One statement: the gates found finished are marked done, the admitted ones
            // admitted, and their runs handed to the claimant.
            let ids: Vec<i64> = plan.admit.iter().map(|id| int(id.0)).collect();
            let rows = sqlx::query(
                "WITH finished AS (UPDATE flow_gates SET done = true WHERE run_id = ANY($4)),
                      gates AS (UPDATE flow_gates SET admitted = true WHERE run_id = ANY($1))
                 UPDATE runs SET owner = $2, lease_token = lease_token + 1,
                        lease_until = now() + $3 * interval '1 millisecond', waiting = false
                 WHERE id = ANY($1) RETURNING id, lease_token",
            )
            .bind(&ids)
            .bind(admit.claimant.owner)
            .bind(int(admit.claimant.lease_ms))
            .bind(&first.done)
            .fetch_all(&mut *tx)
            .await?;
            let mut tokens = HashMap::new();
            for row in &rows {
                tokens.insert(uint(row.try_get(0)?), uint(row.try_get(1)?));
            }
            for id in plan.admit {
                let (Some(candidate), Some(token)) =
                    (candidates.iter().find(|c| c.run == id), tokens.get(&id.0))
                else {
                    continue;
                };
                admission.admitted.push(AdmittedRun {
                    lease: Lease {
                        run: id,
                        token: *token,
                    },
                    workflow: candidate.workflow.clone(),
                    waited_ms: now.saturating_sub(candidate.ready_at),
                });
            }
        }
        let mut cancelled = Vec::new();
        for (id, note) in plan.skip {
            if cancel_with_note(&mut tx, id, &note, now).await? {
                set_done(&mut tx, &[int(id.0)]).await?;
                cancelled.push(id);
                admission.skipped.push((id, note));
            }
        }
        tx.commit().await?;
        Ok((admission, cancelled))
    }
}

/// Marks gates as no longer counting: their runs finished, or were cancelled while waiting.
async fn set_done(conn: &mut PgConnection, runs: &[i64]) -> Answer<()> {
    sqlx::query("UPDATE flow_gates SET done = true WHERE run_id = ANY($1)")
        .bind(runs)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// What an admission reads first, in one statement.
struct FirstRead {
    /// The soonest a debounced run of these versions may start.
    next_ready: Option<(Timestamp, RunId)>,
    /// The admitted, unfinished runs of each key.
    held: HashMap<(String, String), Vec<RunId>>,
    /// The best waiting runs of all queues at once that may start now.
    scanned: Vec<Candidate>,
    /// How many waiting runs were read for `scanned`.
    read: usize,
    /// Gates found finished (holders whose runs ended, waiting runs that were cancelled):
    /// to be marked done.
    done: Vec<i64>,
}

/// In one statement: the holders of keys (only the admitted gates not yet done, each run's
/// status by a lookup, so the plan never scans every run), the first `n` waiting runs of
/// all queues in [`limits::queue_order`], and the next debounced run's time.
async fn first_read(conn: &mut PgConnection, n: usize, admit: &Admit<'_>) -> Answer<FirstRead> {
    let rows = sqlx::query(&format!(
        "(SELECT 0::smallint, g.run_id, NULL::text, 0::bigint, 0::bigint, 0::bigint,
                 coalesce((SELECT r.status = 'running' FROM runs r WHERE r.id = g.run_id), false),
                 g.scope, g.key, 0::bigint
          FROM flow_gates g WHERE g.admitted AND NOT g.done)
         UNION ALL
         (SELECT 1::smallint, {QUEUE_COLUMNS}, g.queue_order
          FROM flow_gates g JOIN runs r ON r.id = g.run_id
          WHERE {QUEUE_FILTER}
          ORDER BY g.queue_order, g.run_id LIMIT $3)
         UNION ALL
         (SELECT 2::smallint, g.run_id, NULL::text, 0::bigint, 0::bigint, g.not_before, true,
                 NULL::text, NULL::text, 0::bigint
          FROM flow_gates g JOIN runs r ON r.id = g.run_id
          WHERE NOT g.admitted AND NOT g.done AND g.not_before > $1
            AND r.status = 'running' AND r.fingerprint = ANY($2)
          ORDER BY g.not_before, g.run_id LIMIT 1)"
    ))
    .bind(int(admit.claimant.now))
    .bind(admit.versions.to_vec())
    .bind(n as i64)
    .fetch_all(&mut *conn)
    .await?;
    let mut first = FirstRead {
        next_ready: None,
        held: HashMap::new(),
        scanned: Vec::new(),
        read: 0,
        done: Vec::new(),
    };
    let mut order = Vec::new();
    for row in &rows {
        let part: i16 = row.try_get(0)?;
        let run: i64 = row.try_get(1)?;
        let running: bool = row.try_get(6)?;
        let scope: Option<String> = row.try_get(7)?;
        let key: Option<String> = row.try_get(8)?;
        match part {
            0 if !running => first.done.push(run),
            0 => {
                if let Some(key) = scope.zip(key) {
                    first.held.entry(key).or_default().push(RunId(uint(run)));
                }
            }
            1 => {
                first.read += 1;
                if !running {
                    first.done.push(run);
                    continue;
                }
                let created_at = uint(row.try_get(4)?);
                order.push((row.try_get::<i64, _>(9)?, run));
                first.scanned.push(Candidate {
                    run: RunId(uint(run)),
                    workflow: row.try_get(2)?,
                    key: scope.zip(key),
                    priority: row.try_get(3)?,
                    created_at,
                    ready_at: uint(row.try_get(5)?).max(created_at),
                });
            }
            _ => first.next_ready = Some((uint(row.try_get(5)?), RunId(uint(run)))),
        }
    }
    for holders in first.held.values_mut() {
        holders.sort_unstable();
    }
    // A union keeps no order of its own: the scan's rows are put back in queue order.
    let mut scanned: Vec<((i64, i64), Candidate)> = order
        .into_iter()
        .zip(std::mem::take(&mut first.scanned))
        .collect();
    scanned.sort_unstable_by_key(|(order, _)| *order);
    first.scanned = scanned.into_iter().map(|(_, c)| c).collect();
    Ok(first)
}

/// The queues that have waiting runs: each key once (walked through the queue index one key
/// at a time, not run by run), then the runs gated without a key.
async fn queues(conn: &mut PgConnection) -> Answer<Vec<Queue>> {
    let rows = sqlx::query(
        "WITH RECURSIVE k AS (
            (SELECT scope, key FROM flow_gates
             WHERE NOT admitted AND NOT done AND scope IS NOT NULL AND key IS NOT NULL
             ORDER BY scope, key LIMIT 1)
            UNION ALL
            SELECT n.scope, n.key FROM k CROSS JOIN LATERAL (
                SELECT g.scope, g.key FROM flow_gates g
                WHERE NOT g.admitted AND NOT g.done AND g.scope IS NOT NULL
                  AND g.key IS NOT NULL AND (g.scope, g.key) > (k.scope, k.key)
                ORDER BY g.scope, g.key LIMIT 1) n)
         SELECT scope, key FROM k
         UNION ALL
         SELECT NULL, NULL WHERE EXISTS (
            SELECT 1 FROM flow_gates
            WHERE NOT admitted AND NOT done AND scope IS NULL AND key IS NULL)",
    )
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|row| {
            let scope: Option<String> = row.try_get(0)?;
            let key: Option<String> = row.try_get(1)?;
            Ok(scope.zip(key))
        })
        .collect::<Result<Vec<Queue>, sqlx::Error>>()
        .map_err(Into::into)
}

/// The columns of a waiting run a reading returns, and the filter of those that may start
/// now (`$1`: now, `$2`: the versions).
const QUEUE_COLUMNS: &str = "g.run_id, r.workflow, g.priority, r.created_at, g.not_before,
    r.status = 'running', g.scope, g.key";
const QUEUE_FILTER: &str = "NOT g.admitted AND NOT g.done AND g.not_before <= $1
    AND r.owner IS NULL AND r.fingerprint = ANY($2)";

/// The candidates of rows read with [`QUEUE_COLUMNS`] (after the index of their queue, of
/// `queues` read), by queue, each with how many rows were read; gates of runs that finished
/// while they waited are marked done.
async fn candidates(
    conn: &mut PgConnection,
    rows: &[sqlx::postgres::PgRow],
    queues: usize,
) -> Answer<Vec<(Vec<Candidate>, usize)>> {
    let mut read: Vec<(Vec<Candidate>, usize)> = vec![(Vec::new(), 0); queues];
    let mut finished = Vec::new();
    for row in rows {
        let i = usize::try_from(row.try_get::<i64, _>(0)?).unwrap_or(usize::MAX);
        let Some((candidates, count)) = read.get_mut(i) else {
            continue;
        };
        *count += 1;
        let run: i64 = row.try_get(1)?;
        if !row.try_get::<bool, _>(6)? {
            finished.push(run);
            continue;
        }
        let created_at = uint(row.try_get(4)?);
        let scope: Option<String> = row.try_get(7)?;
        let key: Option<String> = row.try_get(8)?;
        candidates.push(Candidate {
            run: RunId(uint(run)),
            workflow: row.try_get(2)?,
            key: scope.zip(key),
            priority: row.try_get(3)?,
            created_at,
            ready_at: uint(row.try_get(5)?).max(created_at),
        });
    }
    if !finished.is_empty() {
        set_done(conn, &finished).await?;
    }
    Ok(read)
}

/// Up to `n[i]` waiting runs of each queue `queues[i]` that may start now, best first, in
/// two statements (the keyed queues in one, through the queue index per key, and the runs
/// without a key); each with how many rows it read. Gates whose runs finished while they
/// waited are marked done (they counted against `n`).
async fn read_queues(
    conn: &mut PgConnection,
    queues: &[Queue],
    n: &[usize],
    admit: &Admit<'_>,
) -> Answer<Vec<(Vec<Candidate>, usize)>> {
    let (mut index, mut scopes, mut keys, mut counts) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut keyless = None;
    for (i, (queue, n)) in queues.iter().zip(n).enumerate() {
        if *n == 0 {
            continue;
        }
        match queue {
            Some((scope, key)) => {
                index.push(i as i64);
                scopes.push(scope.as_str());
                keys.push(key.as_str());
                counts.push(*n as i64);
            }
            None => keyless = Some((i, *n)),
        }
    }
    let mut rows = Vec::new();
    if !index.is_empty() {
        rows.extend(
            sqlx::query(&format!(
                "SELECT q.i, c.* FROM unnest($3::bigint[], $4::text[], $5::text[], $6::bigint[])
                     AS q(i, scope, key, n)
                 CROSS JOIN LATERAL (
                    SELECT {QUEUE_COLUMNS} FROM flow_gates g JOIN runs r ON r.id = g.run_id
                    WHERE g.scope = q.scope AND g.key = q.key AND {QUEUE_FILTER}
                    ORDER BY g.queue_order, g.run_id LIMIT q.n) c"
            ))
            .bind(int(admit.claimant.now))
            .bind(admit.versions.to_vec())
            .bind(&index)
            .bind(&scopes)
            .bind(&keys)
            .bind(&counts)
            .fetch_all(&mut *conn)
            .await?,
        );
    }
    if let Some((i, n)) = keyless {
        rows.extend(
            sqlx::query(&format!(
                "SELECT $3::bigint, {QUEUE_COLUMNS} FROM flow_gates g
                 JOIN runs r ON r.id = g.run_id
                 WHERE g.scope IS NULL AND g.key IS NULL AND {QUEUE_FILTER}
                 ORDER BY g.queue_order, g.run_id LIMIT $4"
            ))
            .bind(int(admit.claimant.now))
            .bind(admit.versions.to_vec())
            .bind(i as i64)
            .bind(n as i64)
            .fetch_all(&mut *conn)
            .await?,
        );
    }
    candidates(conn, &rows, queues.len()).await
}

//! Admission of gated runs in PostgreSQL: in one transaction under the schema's admission
//! lock, one statement reads the holders of keys, the best waiting runs of all queues at
//! once and the next debounced time; key by key reading follows only when those cannot
//! decide ([`limits::heads`], [`limits::reads`]); one statement admits. The rule that
//! decides is the machine's ([`limits::plan`]).

use std::collections::HashMap;

use sqlx::{Acquire, PgConnection, Row};

use super::limits::{cancel_with_note, lock, set_done};
use super::sql::{int, uint, Answer, Failure};
use super::PgStore;
use workflow_core::journal::Timestamp;
use workflow_core::store::limits::{self, Admission, Admit, AdmittedRun, Candidate, Queue};
use workflow_core::store::{Lease, StoreError};
use workflow_core::RunId;

impl PgStore {
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
                 UPDATE runs SET owner = $2, lease_token = workflow_next_token(lease_token),
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

/// In one statement: the holders of keys (only the admitted gates not yet done), the first
/// `n` waiting runs of all queues in [`limits::queue_order`], and the next debounced run's
/// time. Each gate's run is looked up by its id (a scalar subquery, or a lateral one the
/// planner cannot turn into a join), so the gates' indexes drive every part whatever the
/// statistics say, and no part scans every run.
async fn first_read(conn: &mut PgConnection, n: usize, admit: &Admit<'_>) -> Answer<FirstRead> {
    let rows = sqlx::query(&format!(
        "(SELECT 0::smallint, g.run_id, NULL::text, 0::bigint, 0::bigint, 0::bigint,
                 coalesce((SELECT r.status = 'running' FROM runs r WHERE r.id = g.run_id), false),
                 g.scope, g.key, 0::bigint
          FROM flow_gates g WHERE g.admitted AND NOT g.done)
         UNION ALL
         (SELECT 1::smallint, {QUEUE_COLUMNS}, g.queue_order
          FROM flow_gates g CROSS JOIN LATERAL (
              SELECT r.workflow, r.created_at, r.status, r.owner, r.fingerprint
              FROM runs r WHERE r.id = g.run_id OFFSET 0) r
          WHERE {QUEUE_FILTER}
          ORDER BY g.queue_order, g.run_id LIMIT $3)
         UNION ALL
         (SELECT 2::smallint, g.run_id, NULL::text, 0::bigint, 0::bigint, g.not_before, true,
                 NULL::text, NULL::text, 0::bigint
          FROM flow_gates g CROSS JOIN LATERAL (
              SELECT r.status, r.fingerprint FROM runs r WHERE r.id = g.run_id OFFSET 0) r
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

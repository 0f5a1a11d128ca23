//! Step slots and rate buckets in PostgreSQL: a request takes its key's advisory locks,
//! checks the run's lease by the server's clock, and takes the slot and the token in one
//! transaction, or neither; and what a run waits for or holds.

use sqlx::{Acquire, PgConnection, Row};

use super::limits::{in_flight, lock, usage, VALID};
use super::sql::{int, uint, Answer, Failure};
use super::PgStore;
use workflow_core::journal::Timestamp;
use workflow_core::store::limits::{
    self, Acquired, Bucket, GateState, KeyUsage, RateBucket, RunFlow, SlotRequest, StepWait,
};
use workflow_core::store::StoreError;
use workflow_core::RunId;

impl PgStore {
    /// [`Store::acquire_slot`](workflow_core::store::Store::acquire_slot).
    pub(super) async fn acquire(&self, request: &SlotRequest<'_>) -> Result<Acquired, StoreError> {
        let mut retry = self.retry();
        loop {
            let mut conn = retry.conn().await?;
            self.sent();
            match self.acquire_once(&mut conn, request).await {
                Ok(acquired) => return Ok(acquired),
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) => retry.again(error).await?,
            }
        }
    }

    async fn acquire_once(
        &self,
        conn: &mut PgConnection,
        request: &SlotRequest<'_>,
    ) -> Answer<Acquired> {
        let mut tx = conn.begin().await?;
        if let Some(slot) = &request.concurrency {
            lock(
                &mut tx,
                &self.schema,
                &format!("slot:{}:{}", slot.scope, slot.key),
            )
            .await?;
        }
        if let Some(rate) = &request.rate {
            lock(
                &mut tx,
                &self.schema,
                &format!("rate:{}:{}", rate.scope, rate.key),
            )
            .await?;
        }
        let run = sqlx::query(
            "SELECT owner, lease_token, status = 'running' AND lease_until > now(),
                    (extract(epoch from now()) * 1000)::bigint
             FROM runs WHERE id = $1",
        )
        .bind(int(request.run.0))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(run) = run else {
            return Err(Failure::Store(StoreError::UnknownRun(request.run)));
        };
        let owner: Option<String> = run.try_get(0)?;
        let token = uint(run.try_get(1)?);
        let live: bool = run.try_get(2)?;
        // The bucket keeps the server's time: every worker refills it by one clock.
        let now = uint(run.try_get(3)?);
        if owner.as_deref() != Some(request.fence.owner) || token != request.fence.token || !live {
            return Err(Failure::Store(StoreError::Fenced {
                run: request.run,
                owner: request.fence.owner.to_owned(),
            }));
        }
        sqlx::query("DELETE FROM flow_slots WHERE run_id = $1 AND holder = $2")
            .bind(int(request.run.0))
            .bind(request.holder)
            .execute(&mut *tx)
            .await?;
        if let Some(slot) = &request.concurrency {
            sqlx::query(&format!(
                "DELETE FROM flow_slots s WHERE s.scope = $1 AND s.key = $2 AND NOT {VALID}"
            ))
            .bind(slot.scope)
            .bind(slot.key)
            .execute(&mut *tx)
            .await?;
            let usage = usage(&mut tx, slot.scope, slot.key).await?;
            if usage.in_use >= slot.limit {
                wait(
                    &mut tx,
                    request,
                    "slot",
                    slot.name,
                    (slot.scope, slot.key),
                    now,
                )
                .await?;
                tx.commit().await?;
                return Ok(Acquired::Busy(usage));
            }
        }
        if let Some(rate) = &request.rate {
            let stored =
                sqlx::query("SELECT units, at FROM flow_buckets WHERE scope = $1 AND key = $2")
                    .bind(rate.scope)
                    .bind(rate.key)
                    .fetch_optional(&mut *tx)
                    .await?;
            let bucket = match stored {
                Some(row) => Bucket {
                    units: uint(row.try_get(0)?),
                    at: uint(row.try_get(1)?),
                },
                None => Bucket::full(rate, now),
            };
            let (next, taken) = bucket.take(rate, now);
            sqlx::query(
                "INSERT INTO flow_buckets (scope, key, units, at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (scope, key) DO UPDATE SET units = excluded.units, at = excluded.at",
            )
            .bind(rate.scope)
            .bind(rate.key)
            .bind(int(next.units))
            .bind(int(next.at))
            .execute(&mut *tx)
            .await?;
            if let Err(wait_ms) = taken {
                wait(
                    &mut tx,
                    request,
                    "rate",
                    rate.name,
                    (rate.scope, rate.key),
                    now,
                )
                .await?;
                tx.commit().await?;
                return Ok(Acquired::Throttled { wait_ms });
            }
        }
        if let Some(slot) = &request.concurrency {
            sqlx::query(
                "INSERT INTO flow_slots (run_id, holder, scope, key, owner, token, at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(int(request.run.0))
            .bind(request.holder)
            .bind(slot.scope)
            .bind(slot.key)
            .bind(request.fence.owner)
            .bind(int(request.fence.token))
            .bind(int(now))
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("DELETE FROM flow_waits WHERE run_id = $1 AND holder = $2")
            .bind(int(request.run.0))
            .bind(request.holder)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Acquired::Granted)
    }

    /// [`Store::release_slot`](workflow_core::store::Store::release_slot).
    pub(super) async fn release_holder(&self, run: RunId, holder: &str) -> Result<(), StoreError> {
        self.idempotent(move |mut conn| {
            Box::pin(async move {
                sqlx::query(
                    "WITH a AS (DELETE FROM flow_slots WHERE run_id = $1 AND holder = $2)
                     DELETE FROM flow_waits WHERE run_id = $1 AND holder = $2",
                )
                .bind(int(run.0))
                .bind(holder)
                .execute(&mut *conn)
                .await?;
                Ok(())
            })
        })
        .await
    }

    /// [`Store::flow_of`](workflow_core::store::Store::flow_of).
    pub(super) async fn flow(&self, run: RunId) -> Result<RunFlow, StoreError> {
        self.idempotent(move |mut conn| Box::pin(async move { flow_of(&mut conn, run).await }))
            .await
    }

    /// [`Store::rate_buckets`](workflow_core::store::Store::rate_buckets).
    pub(super) async fn buckets(&self, limit: usize) -> Result<Vec<RateBucket>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.idempotent(move |mut conn| {
            Box::pin(async move {
                let rows = sqlx::query(
                    "SELECT scope, key, units, at FROM flow_buckets
                     ORDER BY scope COLLATE \"C\", key COLLATE \"C\" LIMIT $1",
                )
                .bind(limit)
                .fetch_all(&mut *conn)
                .await?;
                rows.iter()
                    .map(|row| {
                        Ok(RateBucket {
                            scope: row.try_get(0)?,
                            key: row.try_get(1)?,
                            bucket: Bucket {
                                units: uint(row.try_get(2)?),
                                at: uint(row.try_get(3)?),
                            },
                        })
                    })
                    .collect::<Result<Vec<_>, sqlx::Error>>()
                    .map_err(Failure::from)
            })
        })
        .await
    }
}

/// Records that a step waits (keeping when it began waiting for the same thing).
async fn wait(
    conn: &mut PgConnection,
    request: &SlotRequest<'_>,
    kind: &str,
    limit: &str,
    (scope, key): (&str, &str),
    now: Timestamp,
) -> Answer<()> {
    sqlx::query(
        "INSERT INTO flow_waits (run_id, holder, kind, limit_name, scope, key, since)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (run_id, holder) DO UPDATE SET
            since = CASE WHEN flow_waits.kind = excluded.kind THEN flow_waits.since
                         ELSE excluded.since END,
            kind = excluded.kind, limit_name = excluded.limit_name,
            scope = excluded.scope, key = excluded.key",
    )
    .bind(int(request.run.0))
    .bind(request.holder)
    .bind(kind)
    .bind(limit)
    .bind(scope)
    .bind(key)
    .bind(int(now))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn flow_of(conn: &mut PgConnection, run: RunId) -> Answer<RunFlow> {
    let row = sqlx::query(
        "SELECT g.scope, g.key, g.priority, g.not_before, g.admitted, r.created_at
         FROM flow_gates g JOIN runs r ON r.id = g.run_id WHERE g.run_id = $1",
    )
    .bind(int(run.0))
    .fetch_optional(&mut *conn)
    .await?;
    let gate = match row {
        None => None,
        Some(row) => {
            let scope: Option<String> = row.try_get(0)?;
            let key: Option<String> = row.try_get(1)?;
            let priority: i64 = row.try_get(2)?;
            let not_before = uint(row.try_get(3)?);
            let admitted: bool = row.try_get(4)?;
            let created_at = uint(row.try_get(5)?);
            let key = scope.zip(key);
            let usage = match &key {
                Some((scope, value)) => {
                    let holders = in_flight(conn, scope, value).await?;
                    KeyUsage {
                        in_use: holders.len() as u32,
                        holders: holders
                            .into_iter()
                            .take(limits::HOLDERS_SHOWN)
                            .map(|r| (r, String::new()))
                            .collect(),
                    }
                }
                None => KeyUsage::default(),
            };
            let (scope, value) = key.clone().unzip();
            let ahead: i64 = sqlx::query(
                "SELECT COUNT(*) FROM flow_gates g JOIN runs r ON r.id = g.run_id
                 WHERE NOT g.admitted AND r.status = 'running' AND g.run_id <> $4
                   AND g.scope IS NOT DISTINCT FROM $1 AND g.key IS NOT DISTINCT FROM $2
                   AND (g.priority > $3 OR (g.priority = $3 AND g.run_id < $4))",
            )
            .bind(scope)
            .bind(value)
            .bind(priority)
            .bind(int(run.0))
            .fetch_one(&mut *conn)
            .await?
            .try_get(0)?;
            Some(GateState {
                key,
                priority,
                not_before: (not_before > created_at).then_some(not_before),
                admitted,
                usage,
                ahead: uint(ahead),
            })
        }
    };
    let rows = sqlx::query(
        "SELECT holder, kind, limit_name, scope, key, since FROM flow_waits
         WHERE run_id = $1 ORDER BY holder",
    )
    .bind(int(run.0))
    .fetch_all(&mut *conn)
    .await?;
    let mut waits = Vec::with_capacity(rows.len());
    for row in rows {
        let mut wait = StepWait {
            step: row.try_get(0)?,
            kind: row.try_get(1)?,
            limit: row.try_get(2)?,
            scope: row.try_get(3)?,
            key: row.try_get(4)?,
            since: uint(row.try_get(5)?),
            usage: KeyUsage::default(),
        };
        if wait.kind == "slot" {
            wait.usage = usage(conn, &wait.scope, &wait.key).await?;
        }
        waits.push(wait);
    }
    let rows = sqlx::query(&format!(
        "SELECT s.holder, s.scope, s.key FROM flow_slots s WHERE s.run_id = $1 AND {VALID}
         ORDER BY s.holder"
    ))
    .bind(int(run.0))
    .fetch_all(&mut *conn)
    .await?;
    let held = rows
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect::<Result<Vec<_>, sqlx::Error>>()?;
    Ok(RunFlow { gate, waits, held })
}

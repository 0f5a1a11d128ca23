//! Flow-control rows in SQLite: gated runs, step slots, rate buckets and waiting steps.
//! Every check-and-take runs in the single writer's transaction, so admissions and slot
//! requests are serialized with each other and with every other write.

use rusqlite::{params, OptionalExtension};

use super::schema::{db_error, Db};
use workflow_core::journal::Timestamp;
use workflow_core::store::limits::{
    self, Acquired, Bucket, DebounceStart, Gate, GateState, KeyUsage, RateBucket, RateLimit,
    RunFlow, SlotLimit, SlotRequest, StepWait,
};
use workflow_core::store::{Fence, StoreError};
use workflow_core::RunId;

/// The migration that adds the flow-control tables.
pub(super) const MIGRATION: &str = "CREATE TABLE flow_gates (
        run_id INTEGER PRIMARY KEY REFERENCES runs (id),
        scope TEXT,
        key TEXT,
        priority INTEGER NOT NULL,
        debounce TEXT,
        burst_at INTEGER NOT NULL,
        not_before INTEGER NOT NULL,
        admitted INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX flow_gates_waiting ON flow_gates (priority DESC, run_id) WHERE admitted = 0;
    CREATE INDEX flow_gates_key ON flow_gates (scope, key, admitted) WHERE key IS NOT NULL;
    CREATE INDEX flow_gates_debounce ON flow_gates (debounce) WHERE admitted = 0;
    CREATE TABLE flow_slots (
        run_id INTEGER NOT NULL,
        holder TEXT NOT NULL,
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        owner TEXT NOT NULL,
        token INTEGER NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (run_id, holder)
    ) WITHOUT ROWID;
    CREATE INDEX flow_slots_key ON flow_slots (scope, key);
    CREATE TABLE flow_buckets (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        units INTEGER NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (scope, key)
    ) WITHOUT ROWID;
    CREATE TABLE flow_waits (
        run_id INTEGER NOT NULL,
        holder TEXT NOT NULL,
        kind TEXT NOT NULL,
        limit_name TEXT NOT NULL,
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        since INTEGER NOT NULL,
        PRIMARY KEY (run_id, holder)
    ) WITHOUT ROWID;";

/// The migration that lets an admission read each key's best waiting runs from an index
/// instead of the whole queue: a gate's place in its queue (`queue_order`, see
/// [`limits::queue_order`]), whether it no longer counts (`done`: its run finished, or was
/// cancelled before its admission), an index per queue and one of all queues at once in
/// that order, one of the keys' holders, one of
/// debounced runs by time, and on `runs` whether a run waits for an admission (`waiting`),
/// so a claim of queued runs skips the gated ones by an index.
pub(super) const QUEUE_MIGRATION: &str = "ALTER TABLE runs ADD COLUMN waiting INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE flow_gates ADD COLUMN queue_order INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE flow_gates ADD COLUMN done INTEGER NOT NULL DEFAULT 0;
    UPDATE flow_gates SET queue_order = coalesce(
        (SELECT r.created_at FROM runs r WHERE r.id = flow_gates.run_id), 0) - priority * 60000;
    UPDATE flow_gates SET done = 1 WHERE NOT EXISTS (
        SELECT 1 FROM runs r WHERE r.id = flow_gates.run_id AND r.status = 'running');
    UPDATE runs SET waiting = 1 WHERE status = 'running'
        AND id IN (SELECT run_id FROM flow_gates WHERE admitted = 0 AND done = 0);
    DROP INDEX flow_gates_waiting;
    DROP INDEX flow_gates_key;
    DROP INDEX flow_gates_debounce;
    CREATE INDEX flow_gates_queue ON flow_gates (scope, key, queue_order, run_id)
        WHERE admitted = 0 AND done = 0;
    CREATE INDEX flow_gates_order ON flow_gates (queue_order, run_id)
        WHERE admitted = 0 AND done = 0;
    CREATE INDEX flow_gates_holding ON flow_gates (scope, key, run_id)
        WHERE admitted = 1 AND done = 0;
    CREATE INDEX flow_gates_later ON flow_gates (not_before, run_id)
        WHERE admitted = 0 AND done = 0;
    CREATE INDEX flow_gates_debounce ON flow_gates (debounce) WHERE admitted = 0 AND done = 0;
    CREATE INDEX runs_queued ON runs (id) WHERE status = 'running' AND owner IS NULL AND waiting = 0;";

/// A [`Gate`] moved to the writer thread.
#[derive(Debug, Clone)]
pub(super) struct GateRow {
    concurrency: Option<(String, String)>,
    priority: i64,
    debounce: Option<(String, u64, Option<u64>)>,
}

impl GateRow {
    pub(super) fn new(gate: &Gate<'_>) -> GateRow {
        GateRow {
            concurrency: gate
                .concurrency
                .map(|(scope, key)| (scope.to_owned(), key.to_owned())),
            priority: gate.priority,
            debounce: gate
                .debounce
                .map(|d| (d.key.to_owned(), d.window_ms, d.max_wait_ms)),
        }
    }
}

/// Inside a creation's write, after the run was created: its gate, and the debounce
/// burst it joins (the earlier runs of the burst cancelled).
pub(super) fn insert_gate(
    db: &Db,
    run: RunId,
    workflow: &str,
    at: Timestamp,
    gate: &GateRow,
) -> Result<(), StoreError> {
    let fail = db_error(db);
    let mut burst_at = at;
    let mut not_before = at;
    if let Some((key, window_ms, max_wait_ms)) = &gate.debounce {
        let earlier: Vec<(u64, u64)> = db
            .conn
            .prepare_cached(
                "SELECT g.run_id, g.burst_at FROM flow_gates g JOIN runs r ON r.id = g.run_id
                 WHERE g.admitted = 0 AND g.done = 0 AND g.debounce = ?1 AND r.workflow = ?2
                   AND r.status = 'running' AND g.run_id <> ?3",
            )
            .and_then(|mut s| {
                s.query_map(params![key, workflow, run.0], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })?
                .collect()
            })
            .map_err(&fail)?;
        for (old, old_burst) in earlier {
            burst_at = burst_at.min(old_burst);
            super::sql::cancel_with_note(db, RunId(old), &limits::debounced_note(run), at)?;
            set_done(db, RunId(old))?;
        }
        let debounce = DebounceStart {
            key,
            window_ms: *window_ms,
            max_wait_ms: *max_wait_ms,
        };
        not_before = debounce.not_before(at, burst_at);
    }
    let (scope, key) = gate.concurrency.clone().unzip();
    db.conn
        .prepare_cached(
            "INSERT INTO flow_gates
                (run_id, scope, key, priority, debounce, burst_at, not_before, queue_order)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .and_then(|mut s| {
            s.execute(params![
                run.0,
                scope,
                key,
                gate.priority,
                gate.debounce.as_ref().map(|d| &d.0),
                burst_at,
                not_before,
                limits::queue_order(gate.priority, at)
            ])
        })
        .map_err(&fail)?;
    db.conn
        .prepare_cached("UPDATE runs SET waiting = 1 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![run.0]))
        .map(drop)
        .map_err(&fail)
}

/// Marks a gate as no longer counting: its run finished, or was cancelled while it waited.
pub(super) fn set_done(db: &Db, run: RunId) -> Result<(), StoreError> {
    db.conn
        .prepare_cached("UPDATE flow_gates SET done = 1 WHERE run_id = ?1")
        .and_then(|mut s| s.execute(params![run.0]))
        .map(drop)
        .map_err(db_error(db))
}

/// The admitted, unfinished runs of a key.
pub(super) fn in_flight(db: &Db, scope: &str, key: &str) -> Result<Vec<RunId>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT g.run_id FROM flow_gates g JOIN runs r ON r.id = g.run_id
             WHERE g.scope = ?1 AND g.key = ?2 AND g.admitted = 1 AND g.done = 0
               AND r.status = 'running'
             ORDER BY g.run_id",
        )
        .and_then(|mut s| {
            s.query_map(params![scope, key], |row| Ok(RunId(row.get(0)?)))?
                .collect()
        })
        .map_err(db_error(db))
}

/// A [`SlotRequest`] moved to the writer thread.
#[derive(Debug, Clone)]
pub(super) struct SlotRow {
    run: RunId,
    holder: String,
    owner: String,
    token: u64,
    /// Name, scope, key, limit.
    concurrency: Option<(String, String, String, u32)>,
    /// Name, scope, key, limit, per, burst.
    rate: Option<(String, String, String, u32, u64, u32)>,
    now: Timestamp,
}

impl SlotRow {
    pub(super) fn new(request: &SlotRequest<'_>) -> SlotRow {
        SlotRow {
            run: request.run,
            holder: request.holder.to_owned(),
            owner: request.fence.owner.to_owned(),
            token: request.fence.token,
            concurrency: request.concurrency.map(|c| {
                (
                    c.name.to_owned(),
                    c.scope.to_owned(),
                    c.key.to_owned(),
                    c.limit,
                )
            }),
            rate: request.rate.map(|r| {
                (
                    r.name.to_owned(),
                    r.scope.to_owned(),
                    r.key.to_owned(),
                    r.limit,
                    r.per_ms,
                    r.burst,
                )
            }),
            now: request.now,
        }
    }
}

/// The clause of a slot held under its run's current lease.
const VALID: &str = "EXISTS (SELECT 1 FROM runs r WHERE r.id = flow_slots.run_id
    AND r.status = 'running' AND r.owner = flow_slots.owner
    AND r.lease_token = flow_slots.token)";

fn usage(db: &Db, scope: &str, key: &str) -> Result<KeyUsage, StoreError> {
    let holders: Vec<(RunId, String)> = db
        .conn
        .prepare_cached(&format!(
            "SELECT run_id, holder FROM flow_slots WHERE scope = ?1 AND key = ?2 AND {VALID}
             ORDER BY at, run_id"
        ))
        .and_then(|mut s| {
            s.query_map(params![scope, key], |row| {
                Ok((RunId(row.get(0)?), row.get(1)?))
            })?
            .collect()
        })
        .map_err(db_error(db))?;
    Ok(KeyUsage {
        in_use: holders.len() as u32,
        holders: holders.into_iter().take(limits::HOLDERS_SHOWN).collect(),
    })
}

/// Inside the writer's transaction: one slot request.
pub(super) fn acquire(db: &Db, request: &SlotRow) -> Result<(Acquired, u64), StoreError> {
    let fail = db_error(db);
    let lease: Option<(Option<String>, u64, String)> = db
        .conn
        .prepare_cached("SELECT owner, lease_token, status FROM runs WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row(params![request.run.0], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .optional()
        })
        .map_err(&fail)?;
    let Some((owner, token, status)) = lease else {
        return Err(StoreError::UnknownRun(request.run));
    };
    if owner.as_deref() != Some(request.owner.as_str())
        || token != request.token
        || status != "running"
    {
        return Err(StoreError::Fenced {
            run: request.run,
            owner: request.owner.clone(),
        });
    }
    db.conn
        .prepare_cached("DELETE FROM flow_slots WHERE run_id = ?1 AND holder = ?2")
        .and_then(|mut s| s.execute(params![request.run.0, request.holder]))
        .map_err(&fail)?;
    let fence = Fence {
        owner: &request.owner,
        token: request.token,
    };
    let concurrency = request
        .concurrency
        .as_ref()
        .map(|(name, scope, key, limit)| SlotLimit {
            name,
            scope,
            key,
            limit: *limit,
        });
    let rate = request
        .rate
        .as_ref()
        .map(|(name, scope, key, limit, per_ms, burst)| RateLimit {
            name,
            scope,
            key,
            limit: *limit,
            per_ms: *per_ms,
            burst: *burst,
        });
    let borrowed = SlotRequest {
        run: request.run,
        holder: &request.holder,
        fence,
        concurrency,
        rate,
        now: request.now,
    };
    if let Some(slot) = &concurrency {
        db.conn
            .prepare_cached(&format!(
                "DELETE FROM flow_slots WHERE scope = ?1 AND key = ?2 AND NOT {VALID}"
            ))
            .and_then(|mut s| s.execute(params![slot.scope, slot.key]))
            .map_err(&fail)?;
        let usage = usage(db, slot.scope, slot.key)?;
        if usage.in_use >= slot.limit {
            wait(db, &borrowed, "slot", slot.name, slot.scope, slot.key)?;
            return Ok((Acquired::Busy(usage), 0));
        }
    }
    if let Some(rate) = &rate {
        let stored: Option<(u64, u64)> = db
            .conn
            .prepare_cached("SELECT units, at FROM flow_buckets WHERE scope = ?1 AND key = ?2")
            .and_then(|mut s| {
                s.query_row(params![rate.scope, rate.key], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()
            })
            .map_err(&fail)?;
        let bucket = stored.map_or_else(
            || Bucket::full(rate, request.now),
            |(units, at)| Bucket { units, at },
        );
        let (next, taken) = bucket.take(rate, request.now);
        db.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO flow_buckets (scope, key, units, at) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut s| s.execute(params![rate.scope, rate.key, next.units, next.at]))
            .map_err(&fail)?;
        if let Err(wait_ms) = taken {
            wait(db, &borrowed, "rate", rate.name, rate.scope, rate.key)?;
            return Ok((Acquired::Throttled { wait_ms }, 0));
        }
    }
    if let Some(slot) = &concurrency {
        db.conn
            .prepare_cached(
                "INSERT INTO flow_slots (run_id, holder, scope, key, owner, token, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    request.run.0,
                    request.holder,
                    slot.scope,
                    slot.key,
                    request.owner,
                    request.token,
                    request.now
                ])
            })
            .map_err(&fail)?;
    }
    db.conn
        .prepare_cached("DELETE FROM flow_waits WHERE run_id = ?1 AND holder = ?2")
        .and_then(|mut s| s.execute(params![request.run.0, request.holder]))
        .map_err(&fail)?;
    Ok((Acquired::Granted, 0))
}

/// Records that a step waits (keeping when it began waiting for the same thing).
fn wait(
    db: &Db,
    request: &SlotRequest<'_>,
    kind: &str,
    limit: &str,
    scope: &str,
    key: &str,
) -> Result<(), StoreError> {
    db.conn
        .prepare_cached(
            "INSERT INTO flow_waits (run_id, holder, kind, limit_name, scope, key, since)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (run_id, holder) DO UPDATE SET
                since = CASE WHEN kind = excluded.kind THEN since ELSE excluded.since END,
                kind = excluded.kind, limit_name = excluded.limit_name,
                scope = excluded.scope, key = excluded.key",
        )
        .and_then(|mut s| {
            s.execute(params![
                request.run.0,
                request.holder,
                kind,
                limit,
                scope,
                key,
                request.now
            ])
        })
        .map(drop)
        .map_err(db_error(db))
}

/// Inside a write: gives back a holder's slot and forgets that it waits.
pub(super) fn release(db: &Db, run: RunId, holder: &str) -> Result<((), u64), StoreError> {
    for table in ["flow_slots", "flow_waits"] {
        db.conn
            .prepare_cached(&format!(
                "DELETE FROM {table} WHERE run_id = ?1 AND holder = ?2"
            ))
            .and_then(|mut s| s.execute(params![run.0, holder]))
            .map_err(db_error(db))?;
    }
    Ok(((), 0))
}

/// What a run waits for or holds.
/// [`Store::rate_buckets`](workflow_core::store::Store::rate_buckets).
pub(super) fn rate_buckets(db: &Db, limit: usize) -> Result<Vec<RateBucket>, StoreError> {
    db.conn
        .prepare_cached(
            "SELECT scope, key, units, at FROM flow_buckets ORDER BY scope, key LIMIT ?1",
        )
        .and_then(|mut s| {
            s.query_map(params![i64::try_from(limit).unwrap_or(i64::MAX)], |row| {
                Ok(RateBucket {
                    scope: row.get(0)?,
                    key: row.get(1)?,
                    bucket: Bucket {
                        units: row.get(2)?,
                        at: row.get(3)?,
                    },
                })
            })?
            .collect()
        })
        .map_err(db_error(db))
}

pub(super) fn flow_of(db: &Db, run: RunId) -> Result<RunFlow, StoreError> {
    let fail = db_error(db);
    type GateRead = (Option<String>, Option<String>, i64, u64, bool, u64);
    let gate: Option<GateRead> = db
        .conn
        .prepare_cached(
            "SELECT g.scope, g.key, g.priority, g.not_before, g.admitted, r.created_at
             FROM flow_gates g JOIN runs r ON r.id = g.run_id WHERE g.run_id = ?1",
        )
        .and_then(|mut s| {
            s.query_row(params![run.0], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            })
            .optional()
        })
        .map_err(&fail)?;
    let gate = match gate {
        None => None,
        Some((scope, key, priority, not_before, admitted, created_at)) => {
            let key = scope.zip(key);
            let usage = match &key {
                Some((scope, key)) => {
                    let holders = in_flight(db, scope, key)?;
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
            let ahead: u64 = db
                .conn
                .prepare_cached(
                    "SELECT COUNT(*) FROM flow_gates g JOIN runs r ON r.id = g.run_id
                     WHERE g.admitted = 0 AND g.done = 0 AND r.status = 'running'
                       AND g.run_id <> ?5 AND g.scope IS ?1 AND g.key IS ?2
                       AND (g.priority > ?3 OR (g.priority = ?3 AND g.run_id < ?4))",
                )
                .and_then(|mut s| {
                    s.query_row(params![scope, value, priority, run.0, run.0], |row| {
                        row.get(0)
                    })
                })
                .map_err(&fail)?;
            Some(GateState {
                key,
                priority,
                not_before: (not_before > created_at).then_some(not_before),
                admitted,
                usage,
                ahead,
            })
        }
    };
    let waits: Vec<StepWait> = db
        .conn
        .prepare_cached(
            "SELECT holder, kind, limit_name, scope, key, since FROM flow_waits
             WHERE run_id = ?1 ORDER BY holder",
        )
        .and_then(|mut s| {
            s.query_map(params![run.0], |row| {
                Ok(StepWait {
                    step: row.get(0)?,
                    kind: row.get(1)?,
                    limit: row.get(2)?,
                    scope: row.get(3)?,
                    key: row.get(4)?,
                    since: row.get(5)?,
                    usage: KeyUsage::default(),
                })
            })?
            .collect()
        })
        .map_err(&fail)?;
    let mut filled = Vec::with_capacity(waits.len());
    for mut wait in waits {
        if wait.kind == "slot" {
            wait.usage = usage(db, &wait.scope, &wait.key)?;
        }
        filled.push(wait);
    }
    let held = db
        .conn
        .prepare_cached(&format!(
            "SELECT holder, scope, key FROM flow_slots WHERE run_id = ?1 AND {VALID}
             ORDER BY holder"
        ))
        .and_then(|mut s| {
            s.query_map(params![run.0], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?
            .collect()
        })
        .map_err(&fail)?;
    Ok(RunFlow {
        gate,
        waits: filled,
        held,
    })
}

//! Admission of gated runs in SQLite: which waiting runs an admission reads (the holders
//! of keys, the best runs of all queues at once, then key by key) and what it writes, all
//! in the single writer's transaction, so admissions are serialized with each other and
//! with every other write. The rule that decides is the machine's
//! ([`limits::plan`]); what is read is planned by [`limits::heads`] and [`limits::reads`].

use std::collections::HashMap;

use rusqlite::{params, OptionalExtension};

use super::limits::set_done;
use super::schema::{db_error, Db};
use workflow_core::journal::Timestamp;
use workflow_core::store::limits::{
    self, Admission, Admit, AdmittedRun, Candidate, OnLimit, Queue, RunLimit,
};
use workflow_core::store::{Lease, StoreError};
use workflow_core::RunId;

/// An [`Admit`] moved to the writer thread.
#[derive(Debug, Clone)]
pub(super) struct AdmitRow {
    owner: String,
    lease_ms: u64,
    now: Timestamp,
    versions: Vec<String>,
    limits: Vec<(String, u32, OnLimit)>,
    room: usize,
    aging_ms: u64,
}

impl AdmitRow {
    pub(super) fn new(admit: &Admit<'_>) -> AdmitRow {
        AdmitRow {
            owner: admit.claimant.owner.to_owned(),
            lease_ms: admit.claimant.lease_ms,
            now: admit.claimant.now,
            versions: admit.versions.iter().map(|v| (*v).to_owned()).collect(),
            limits: admit
                .limits
                .iter()
                .map(|l| (l.workflow.to_owned(), l.limit, l.on_limit))
                .collect(),
            room: admit.room,
            aging_ms: admit.aging_ms,
        }
    }
}

/// On the read connection: whether any gated run waits for an admission (an admission
/// pass without one costs the writer nothing).
pub(super) fn any_gated(db: &Db) -> Result<bool, StoreError> {
    db.conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM flow_gates WHERE admitted = 0 AND done = 0)")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(db_error(db))
}

/// Inside the writer's transaction: the admitted gates that still count, by key; those
/// whose runs finished are marked done on the way (so this reads only what is in flight).
fn holders(db: &Db) -> Result<HashMap<(String, String), Vec<RunId>>, StoreError> {
    let fail = db_error(db);
    let rows: Vec<(u64, Option<String>, Option<String>, bool)> = db
        .conn
        .prepare_cached(
            "SELECT g.run_id, g.scope, g.key, r.status = 'running'
             FROM flow_gates g INDEXED BY flow_gates_holding JOIN runs r ON r.id = g.run_id
             WHERE g.admitted = 1 AND g.done = 0
             ORDER BY g.run_id",
        )
        .and_then(|mut s| {
            s.query_map([], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?
            .collect()
        })
        .map_err(&fail)?;
    let mut held: HashMap<(String, String), Vec<RunId>> = HashMap::new();
    for (run, scope, key, running) in rows {
        if !running {
            set_done(db, RunId(run))?;
        } else if let Some(key) = scope.zip(key) {
            held.entry(key).or_default().push(RunId(run));
        }
    }
    Ok(held)
}

/// The first key with waiting runs, in (scope, key) order.
const FIRST_KEY: &str = "SELECT scope, key FROM flow_gates
     WHERE admitted = 0 AND done = 0 AND scope IS NOT NULL AND key IS NOT NULL
     ORDER BY scope, key LIMIT 1";

/// The next key with waiting runs in the same scope. Written as `scope = ? AND key > ?`,
/// not as the row value `(scope, key) > (?, ?)`: SQLite seeks past every entry of the key
/// for the former, but walks them for the latter (the whole queue of a deep key, on every
/// admission).
const NEXT_KEY: &str = "SELECT scope, key FROM flow_gates
     WHERE admitted = 0 AND done = 0 AND scope = ?1 AND key > ?2
     ORDER BY scope, key LIMIT 1";

/// The first key with waiting runs in the scopes after one.
const NEXT_SCOPE: &str = "SELECT scope, key FROM flow_gates
     WHERE admitted = 0 AND done = 0 AND scope > ?1 AND key IS NOT NULL
     ORDER BY scope, key LIMIT 1";

/// The queues that have waiting runs: each key once (walked through the queue index one key
/// at a time, seeking past each key's runs), then the runs gated without a key.
fn queues(db: &Db) -> Result<Vec<Queue>, StoreError> {
    let fail = db_error(db);
    let key_at = |sql: &str, bound: &[&dyn rusqlite::ToSql]| {
        db.conn
            .prepare_cached(sql)
            .and_then(|mut s| {
                s.query_row(bound, |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()
            })
            .map_err(&fail)
    };
    let mut queues: Vec<Queue> = Vec::new();
    let mut next: Option<(String, String)> = key_at(FIRST_KEY, &[])?;
    while let Some((scope, key)) = next {
        next = match key_at(NEXT_KEY, &[&scope, &key])? {
            Some(found) => Some(found),
            None => key_at(NEXT_SCOPE, &[&scope])?,
        };
        queues.push(Some((scope, key)));
    }
    let keyless: bool = db
        .conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM flow_gates
             WHERE admitted = 0 AND done = 0 AND scope IS NULL AND key IS NULL)",
        )
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(&fail)?;
    if keyless {
        queues.push(None);
    }
    Ok(queues)
}

/// A waiting run as a queue's reading returns it: run, workflow, scope, key, priority,
/// creation, not before, whether it runs.
type QueueRow = (
    u64,
    String,
    Option<String>,
    Option<String>,
    i64,
    u64,
    u64,
    bool,
);

/// Up to `n` waiting runs of one queue (`None`: of every queue at once) that may start now,
/// best first, with how many rows were read. Gates whose runs finished while they waited
/// are marked done (they counted against `n`).
fn read_queue(
    db: &Db,
    queue: Option<&Queue>,
    n: usize,
    admit: &AdmitRow,
    versions: &str,
) -> Result<(Vec<Candidate>, usize), StoreError> {
    let fail = db_error(db);
    let columns = "g.run_id, r.workflow, g.scope, g.key, g.priority, r.created_at, g.not_before,
                   r.status = 'running'";
    let filter = "g.admitted = 0 AND g.done = 0 AND g.not_before <= ?1 AND r.owner IS NULL
                  AND r.fingerprint IN (SELECT value FROM json_each(?2))";
    let map = |row: &rusqlite::Row<'_>| -> rusqlite::Result<QueueRow> {
        Ok((
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
            row.get(6)?,
            row.get(7)?,
        ))
    };
    let rows: Vec<QueueRow> = match queue {
        Some(queue) => {
            let (scope, key) = queue.clone().unzip();
            db.conn
                .prepare_cached(&format!(
                    "SELECT {columns} FROM flow_gates g JOIN runs r ON r.id = g.run_id
                     WHERE g.scope IS ?4 AND g.key IS ?5 AND {filter}
                     ORDER BY g.queue_order, g.run_id LIMIT ?3"
                ))
                .and_then(|mut s| {
                    s.query_map(params![admit.now, versions, n as i64, scope, key], map)?
                        .collect()
                })
        }
        None => db
            .conn
            .prepare_cached(&format!(
                "SELECT {columns} FROM flow_gates g INDEXED BY flow_gates_order
                 JOIN runs r ON r.id = g.run_id
                 WHERE {filter}
                 ORDER BY g.queue_order, g.run_id LIMIT ?3"
            ))
            .and_then(|mut s| {
                s.query_map(params![admit.now, versions, n as i64], map)?
                    .collect()
            }),
    }
    .map_err(&fail)?;
    let read = rows.len();
    let mut candidates = Vec::with_capacity(read);
    for (run, workflow, scope, key, priority, created_at, not_before, running) in rows {
        if !running {
            set_done(db, RunId(run))?;
            continue;
        }
        candidates.push(Candidate {
            run: RunId(run),
            workflow,
            key: scope.zip(key),
            priority,
            created_at,
            ready_at: not_before.max(created_at),
        });
    }
    Ok((candidates, read))
}

/// The candidates of an admission read queue by queue: a share of the room from each
/// queue with free slots, then, when that left room, more from the queues that had more.
fn by_queue(
    db: &Db,
    admit: &AdmitRow,
    versions: &str,
    held: &HashMap<(String, String), Vec<workflow_core::RunId>>,
    run_limits: &[RunLimit<'_>],
    decide: impl Fn(Vec<Candidate>) -> (Vec<Candidate>, limits::Plan),
) -> Result<(Vec<Candidate>, limits::Plan), StoreError> {
    let queues = queues(db)?;
    let reads = limits::reads(&queues, held, run_limits, admit.room);
    let mut read: Vec<(Vec<Candidate>, usize)> = Vec::with_capacity(queues.len());
    for (queue, n) in queues.iter().zip(&reads) {
        read.push(match n.first {
            0 => (Vec::new(), 0),
            first => read_queue(db, Some(queue), first, admit, versions)?,
        });
    }
    let all = |read: &[(Vec<Candidate>, usize)]| read.iter().flat_map(|(c, _)| c.clone()).collect();
    let (mut candidates, mut plan) = decide(all(&read));
    let more: Vec<usize> = (0..queues.len())
        .filter(|i| read[*i].1 == reads[*i].first && reads[*i].all > reads[*i].first)
        .collect();
    if plan.admit.len() < admit.room && !more.is_empty() {
        for i in more {
            read[i] = read_queue(db, Some(&queues[i]), reads[i].all, admit, versions)?;
        }
        (candidates, plan) = decide(all(&read));
    }
    Ok((candidates, plan))
}

/// Inside the writer's transaction: one admission. It reads the keys' holders (what is in
/// flight) and the best waiting runs of all queues at once ([`limits::heads`]); when those
/// do not decide it, the keys that have waiting runs and of each key that is not at its
/// limit only its best runs ([`limits::reads`]): never every queued run.
pub(super) fn admit(db: &Db, admit: &AdmitRow) -> Result<(Admission, u64), StoreError> {
    let fail = db_error(db);
    let versions = serde_json::to_string(&admit.versions).unwrap_or_else(|_| "[]".to_owned());
    let next_ready: Option<(u64, u64)> = db
        .conn
        .prepare_cached(
            "SELECT g.not_before, g.run_id FROM flow_gates g INDEXED BY flow_gates_later
             JOIN runs r ON r.id = g.run_id
             WHERE g.admitted = 0 AND g.done = 0 AND g.not_before > ?1
               AND r.status = 'running'
               AND r.fingerprint IN (SELECT value FROM json_each(?2))
             ORDER BY g.not_before, g.run_id LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row(params![admit.now, versions], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })
            .optional()
        })
        .map_err(&fail)?;
    let next_ready = next_ready.map(|(at, run)| (at, RunId(run)));
    let run_limits: Vec<RunLimit<'_>> = admit
        .limits
        .iter()
        .map(|(workflow, limit, on_limit)| RunLimit {
            workflow,
            limit: *limit,
            on_limit: *on_limit,
        })
        .collect();
    let held = holders(db)?;
    let decide = |candidates: Vec<Candidate>| {
        let plan = limits::plan(
            &candidates,
            &held,
            &run_limits,
            admit.now,
            admit.room,
            admit.aging_ms,
        );
        (candidates, plan)
    };
    // First the best runs of every queue at once; queue by queue when they do not decide
    // the admission alone.
    let scan = limits::scan_len(admit.room);
    let (scanned, read) = read_queue(db, None, scan, admit, &versions)?;
    let (candidates, plan) =
        match limits::heads(scanned, read < scan, &held, &run_limits, admit.room) {
            Some(candidates) => decide(candidates),
            None => by_queue(db, admit, &versions, &held, &run_limits, decide)?,
        };
    if candidates.is_empty() {
        return Ok((
            Admission {
                next_ready,
                ..Admission::default()
            },
            0,
        ));
    }
    let mut admission = Admission {
        cancel: plan.cancel,
        next_ready,
        ..Admission::default()
    };
    for id in plan.admit {
        let Some(candidate) = candidates.iter().find(|c| c.run == id) else {
            continue;
        };
        let token: u64 = db
            .conn
            .prepare_cached(
                "UPDATE runs SET owner = ?2, lease_token = lease_token + 1, lease_until = ?3,
                        waiting = 0
                 WHERE id = ?1 RETURNING lease_token",
            )
            .and_then(|mut s| {
                s.query_row(
                    params![id.0, admit.owner, admit.now.saturating_add(admit.lease_ms)],
                    |row| row.get(0),
                )
            })
            .map_err(&fail)?;
        db.conn
            .prepare_cached("UPDATE flow_gates SET admitted = 1 WHERE run_id = ?1")
            .and_then(|mut s| s.execute(params![id.0]))
            .map_err(&fail)?;
        admission.admitted.push(AdmittedRun {
            lease: Lease { run: id, token },
            workflow: candidate.workflow.clone(),
            waited_ms: admit.now.saturating_sub(candidate.ready_at),
        });
    }
    for (id, note) in plan.skip {
        if super::sql::cancel_with_note(db, id, &note, admit.now)? {
            set_done(db, id)?;
            admission.skipped.push((id, note));
        }
    }
    Ok((admission, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use workflow_core::store::{Claim, Claimable, Claimant, Store};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_queue_migration_orders_gated_runs_and_keeps_their_holders() {
        let (path, conn) = crate::schema::file_before(
            super::super::limits::QUEUE_MIGRATION,
            "workflow-queue-order",
        );
        {
            // A file as the version before queue orders left it: run 1 holds key `a`, runs
            // 2 and 3 wait for it, run 4 (priority 5, newer) waits without a key, run 5
            // waited and was cancelled, run 6 is a plain queued run.
            let now = 10 * limits::AGING_STEP_MS;
            for (id, status, owner, created_at) in [
                (1, "running", Some("w"), now),
                (2, "running", None, now),
                (3, "running", None, now + 1),
                (4, "running", None, now + 2),
                (5, "cancelled", None, now),
                (6, "running", None, now),
            ] {
                conn.execute(
                    "INSERT INTO runs (id, workflow, fingerprint, status, created_at, updated_at,
                                       owner, lease_until)
                     VALUES (?1, 'W', 'fp', ?2, ?3, ?3, ?4, ?5)",
                    params![id, status, created_at, owner, u64::MAX / 2],
                )
                .expect("a run");
            }
            for (run, key, priority, admitted) in [
                (1, Some("a"), 0, true),
                (2, Some("a"), 0, false),
                (3, Some("a"), 0, false),
                (4, None, 5, false),
                (5, Some("a"), 9, false),
            ] {
                conn.execute(
                    "INSERT INTO flow_gates (run_id, scope, key, priority, burst_at, not_before,
                                             admitted)
                     VALUES (?1, CASE WHEN ?2 IS NULL THEN NULL ELSE 'W' END, ?2, ?3, 0, 0, ?4)",
                    params![run, key, priority, admitted],
                )
                .expect("a gate");
            }
        }
        drop(conn);
        let store = SqliteStore::open(&path).expect("open and migrate");
        let claimant = Claimant {
            owner: "v",
            lease_ms: 60_000,
            now: 20 * limits::AGING_STEP_MS,
        };
        // The plain queued run is claimed; none of the gated ones is.
        let claimed = store
            .claim(Claim {
                claimant,
                workflows: &["W"],
                run: None,
                reclaim_own: false,
                limit: Some(10),
                claimable: Claimable::Queued,
                versions: None,
            })
            .await
            .expect("claim");
        assert_eq!(
            claimed.iter().map(|l| l.run).collect::<Vec<_>>(),
            [RunId(6)]
        );
        let limits = [RunLimit {
            workflow: "W",
            limit: 2,
            on_limit: OnLimit::Queue,
        }];
        let admit = Admit {
            claimant,
            versions: &["fp"],
            limits: &limits,
            room: 10,
            aging_ms: limits::AGING_STEP_MS,
        };
        let admission = store.admit(admit).await.expect("admit");
        let admitted: Vec<RunId> = admission.admitted.iter().map(|a| a.lease.run).collect();
        // Key `a` is held by run 1, so one more of it starts, the oldest (2, not 3); the
        // keyless run of higher priority first; the cancelled run 5, whatever its
        // priority, is not a candidate.
        assert_eq!(admitted, [RunId(4), RunId(2)]);
        drop(store);
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    /// The walk over the keys that have waiting runs costs a seek per key, not a step per
    /// waiting run: a key with 2 000 waiting runs is passed over without reading them.
    #[test]
    fn the_key_walk_seeks_past_each_keys_runs() {
        let dir = std::env::temp_dir().join(format!("workflow-key-walk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("walk.db");
        let _ = std::fs::remove_file(&path);
        drop(SqliteStore::open(&path).expect("a store"));
        let flags = rusqlite::OpenFlags::default();
        let timeout = std::time::Duration::from_secs(5);
        let db = Db::open(&path, "walk.db", flags, timeout).expect("open");
        let gated = [("W", "a", 2_000), ("W", "b", 1), ("X", "a", 1)];
        let mut id = 0;
        for (scope, key, runs) in gated {
            for _ in 0..runs {
                id += 1;
                db.conn
                    .execute(
                        "INSERT INTO runs (id, workflow, fingerprint, status, created_at,
                                           updated_at, waiting)
                         VALUES (?1, ?2, 'fp', 'running', ?1, ?1, 1)",
                        params![id, scope],
                    )
                    .expect("a run");
                db.conn
                    .execute(
                        "INSERT INTO flow_gates (run_id, scope, key, priority, burst_at,
                                                 not_before, queue_order)
                         VALUES (?1, ?2, ?3, 0, 0, 0, ?1)",
                        params![id, scope, key],
                    )
                    .expect("a gate");
            }
        }
        let walked = queues(&db).expect("the queues");
        let key = |scope: &str, key: &str| Some((scope.to_owned(), key.to_owned()));
        assert_eq!(walked, [key("W", "a"), key("W", "b"), key("X", "a")]);
        let steps: i32 = [FIRST_KEY, NEXT_KEY, NEXT_SCOPE]
            .iter()
            .map(|sql| {
                let statement = db.conn.prepare_cached(sql).expect("cached");
                statement.get_status(rusqlite::StatementStatus::VmStep)
            })
            .sum();
        assert!(
            steps < 500,
            "the walk stepped through the queue: {steps} steps"
        );
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Gated runs' queue order on PostgreSQL: a database from before it migrates with each
//! waiting run in its place, its holders still counted, cancelled waiting runs no longer
//! candidates, and gated runs no longer claimable as queued ones.

use workflow_core::store::limits::{Admit, OnLimit, RunLimit, AGING_STEP_MS};
use workflow_core::store::{Claim, Claimable, Claimant, Store};
use workflow_core::RunId;
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_queue_orders_migrates_with_them() {
    let Some(url) = pg_testing::server("a_database_from_before_queue_orders").await else {
        return;
    };
    let schema = Schema::new(&url, "queue_order");
    schema.create_before_queue_order().await;
    // Run 1 holds key `a`, runs 2 and 3 wait for it, run 4 (priority 5, newer) waits
    // without a key, run 5 waited and was cancelled, run 6 is a plain queued run.
    let now = 10 * AGING_STEP_MS;
    let mut sql = String::new();
    for (id, status, owner, created_at) in [
        (1, "running", "'w'", now),
        (2, "running", "NULL", now),
        (3, "running", "NULL", now + 1),
        (4, "running", "NULL", now + 2),
        (5, "cancelled", "NULL", now),
        (6, "running", "NULL", now),
    ] {
        sql.push_str(&format!(
            "INSERT INTO runs (id, workflow, fingerprint, status, owner, lease_until,
                               journal_len, created_at, updated_at, crc)
             OVERRIDING SYSTEM VALUE
             VALUES ({id}, 'W', 'fp', '{status}', {owner}, now() + interval '1 hour', 1,
                     {created_at}, {created_at}, 0);\n"
        ));
    }
    for (run, key, priority, admitted) in [
        (1, "'a'", 0, true),
        (2, "'a'", 0, false),
        (3, "'a'", 0, false),
        (4, "NULL", 5, false),
        (5, "'a'", 9, false),
    ] {
        let scope = if key == "NULL" { "NULL" } else { "'W'" };
        sql.push_str(&format!(
            "INSERT INTO flow_gates (run_id, scope, key, priority, burst_at, not_before, admitted)
             VALUES ({run}, {scope}, {key}, {priority}, 0, 0, {admitted});\n"
        ));
    }
    schema.execute(&sql).await.expect("the older rows");

    let store: PgStore = schema.store().await;
    let claimant = Claimant {
        owner: "v",
        lease_ms: 60_000,
        now: 20 * AGING_STEP_MS,
    };
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
        [RunId(6)],
        "the plain queued run is claimed, none of the gated ones"
    );
    let limits = [RunLimit {
        workflow: "W",
        limit: 2,
        on_limit: OnLimit::Queue,
    }];
    let admission = store
        .admit(Admit {
            claimant,
            versions: &["fp"],
            limits: &limits,
            room: 10,
            aging_ms: AGING_STEP_MS,
        })
        .await
        .expect("admit");
    let admitted: Vec<RunId> = admission.admitted.iter().map(|a| a.lease.run).collect();
    // Key `a` is held by run 1, so one more of it starts, the oldest (2, not 3); the
    // keyless run of higher priority first; the cancelled run 5 is not a candidate.
    assert_eq!(admitted, [RunId(4), RunId(2)]);
    drop(store);
    schema.drop().await;
}

//! The database itself fails: a primary and a streaming standby the test makes from the
//! machine's PostgreSQL binaries (`tests::cluster`), and `PgStore`s given both hosts in one
//! URL (`postgres://…@h1:p1,h2:p2/db?target_session_attrs=read-write`).
//!
//! - fences never go back, even when the failover lost the last claims of a run;
//! - crash and restart (`pg_ctl stop -m immediate` mid-load, then start): the workers
//!   reconnect, nothing acknowledged is lost, nothing is applied twice;
//! - failover under synchronous and asynchronous replication: the primary killed with
//!   SIGKILL under load from three workers, the standby promoted, the workers find it.
//!
//! Where the binaries are missing each test prints a line and passes; under `CI=true` it
//! fails. The long mode (many failovers back and forth) is
//! `FAILOVER_ROUNDS=10 cargo test -p tests --test failover_pg -- --nocapture`.

use std::time::Duration;

use tests::cluster::{Cluster, Replication};
use workflow_core::journal::Event;
use workflow_core::store::{Claim, Claimable, Claimant, Commit, Fence, NewRun, Store, StoreError};
use workflow_postgres::{PgOptions, PgStore};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

fn options(schema: &str) -> PgOptions {
    PgOptions {
        schema: schema.to_owned(),
        max_connections: 4,
        connect_timeout: Duration::from_secs(3),
        retry_for: Duration::from_secs(30),
        ..PgOptions::default()
    }
}

fn started(at: u64) -> Event {
    Event::RunStarted {
        workflow: "onboard".to_owned(),
        fingerprint: "fp1".to_owned(),
        input: serde_json::json!({ "user": "ada" }),
        seed: 1,
        trace_id: "t".to_owned(),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at,
    }
}

async fn claim(store: &PgStore, owner: &str, lease_ms: u64) -> Vec<workflow_core::store::Lease> {
    store
        .claim(Claim {
            claimant: Claimant {
                owner,
                lease_ms,
                now: 0,
            },
            workflows: &["onboard"],
            run: None,
            reclaim_own: false,
            limit: None,
            claimable: Claimable::Any,
            versions: None,
        })
        .await
        .expect("claim")
}

/// A run claimed by `a` (replicated), then, with the standby stopped, claimed again and
/// again by others: those claims exist on the primary only. The primary is killed, the
/// standby (which never saw them) promoted: the run's claim counter on it went back, and
/// still the next fence is higher than every fence handed out before, because the epoch
/// (the timeline) above the counter grew.
#[test]
fn fences_never_go_back_when_a_failover_loses_the_last_claims() {
    let Some(cluster) = Cluster::start("failover_pg fences", Replication::Asynchronous) else {
        return;
    };
    let rt = runtime();
    rt.block_on(async {
        let store = PgStore::connect_with(&cluster.url("fences"), options("fences"))
            .await
            .expect("open the store on both hosts");
        let events = [started(1_000)];
        let run = store
            .create_run(NewRun {
                workflow: "onboard",
                fingerprint: "fp1",
                idempotency_key: None,
                events: &events,
                parent: None,
                owner: None,
                supersedes: None,
                at: 1_000,
                search: &[],
            })
            .await
            .expect("create")
            .id();
        let first = claim(&store, "a", 100).await;
        assert_eq!(first.len(), 1);
        let first = first[0].token;
        cluster.wait_replayed(Duration::from_secs(10)).await;

        // The standby stops; claims go on on the primary alone.
        cluster.stop_fast(&cluster.standby);
        let mut highest = first;
        for owner in ["b", "c", "b"] {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let leases = claim(&store, owner, 100).await;
            assert_eq!(leases.len(), 1, "{owner} claims the lapsed run");
            assert!(leases[0].token > highest);
            highest = leases[0].token;
        }

        // The primary dies; the standby, which never saw those claims, is promoted.
        cluster.kill(&cluster.primary);
        cluster.start_node(&cluster.standby);
        cluster.promote();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let after = claim(&store, "d", 60_000).await;
        assert_eq!(after.len(), 1, "the store found the promoted server");
        let after = after[0].token;
        assert!(
            after & 0xffff_ffff <= highest & 0xffff_ffff,
            "the run's claim counter went back ({:#x} after {:#x}): the claims were lost",
            after,
            highest
        );
        assert!(
            after > highest,
            "the fence after the failover ({after:#x}) is higher than every fence before it ({highest:#x})"
        );
        assert!(after >> 32 > highest >> 32, "a new epoch: {after:#x}");
        // The worker whose claim was lost cannot write.
        let next = [Event::Retried {
            by: "x".into(),
            at: 2_000,
        }];
        let refused = store
            .commit(Commit {
                fence: Some(Fence {
                    owner: "b",
                    token: highest,
                }),
                ..Commit::events(run, 1, &next, 2_000)
            })
            .await;
        assert!(
            matches!(refused, Err(StoreError::Fenced { .. })),
            "{refused:?}"
        );
        println!(
            "fences: before the failover up to {highest:#x} (counter {}), after it {after:#x} (counter {})",
            highest & 0xffff_ffff,
            after & 0xffff_ffff
        );
    });
}

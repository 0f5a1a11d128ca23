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

/// What happens to the database mid-load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Incident {
    /// `pg_ctl stop -m immediate` of the primary, then start it again.
    Restart,
    /// SIGKILL of the primary, then the standby promoted.
    Failover,
    /// The standby falls behind (it is stopped for a moment), the primary goes on
    /// acknowledging commits, then is killed; the standby is started and promoted without
    /// them: what asynchronous replication loses when its standby lags.
    FailoverLagging,
}

/// What a scenario saw.
#[derive(Debug)]
struct Outcome {
    /// Journal entries the workers saw acknowledged that the database no longer has.
    lost_entries: usize,
    /// Runs whose acknowledged creation the database no longer has (started again under
    /// their key).
    lost_runs: usize,
    /// Per worker: from the server's death to its first commit on the server back up.
    first_commit: Vec<Option<Duration>>,
    audit: tests::failover::Audit,
    runs: usize,
}

const LEASE: Duration = Duration::from_secs(4);

fn runs_per_scenario() -> u64 {
    std::env::var("FAILOVER_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(45)
}

fn rounds() -> usize {
    std::env::var("FAILOVER_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Three workers (engines with stores of their own on both hosts) start and drive
/// transfers while `incident` happens to the database `rounds()` times; then every key's
/// run is driven to its end and the database, the journals and the service's ledger are
/// checked.
fn scenario(test: &str, replication: Replication, incident: Incident) -> Option<Outcome> {
    use std::collections::{HashMap, HashSet};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    use tests::failover::{Bank, Transfer, TransferInput};
    use workflow_core::prelude::*;
    use workflow_core::store::RunStatus;

    let mut cluster = Cluster::start(test, replication)?;
    let rt = runtime();
    let service_url = rt.block_on(workflow_postgres::testing::server(test))?;
    let service = workflow_postgres::testing::Schema::new(&service_url, "bank");
    let name = service.name().to_owned();
    rt.block_on(service.execute(&format!("CREATE SCHEMA {name}")))
        .expect("the bank's schema");
    let bank = rt
        .block_on(Bank::open(&service_url, service.name()))
        .expect("the bank");
    let schema = "transfers";
    let url = cluster.url(schema);

    // The workers, each with the entries it saw acknowledged (and when).
    type Acked = Arc<Mutex<Vec<(usize, RunId, String, Instant)>>>;
    let acked: Acked = Arc::default();
    let engines: Vec<Engine> = rt.block_on(async {
        let mut engines = Vec::new();
        for worker in 0..3 {
            let store = PgStore::connect_with(&url, options(schema))
                .await
                .expect("open the store");
            let engine = Engine::builder()
                .store(store)
                .owner(format!("w{worker}"))
                .lease(LEASE)
                .build();
            engine.register::<Transfer>(bank.clone()).expect("register");
            engine.resume_all().await.expect("resume");
            let mut events = engine.subscribe();
            let acked = Arc::clone(&acked);
            tokio::spawn(async move {
                loop {
                    match events.recv().await {
                        Ok((run, event)) => {
                            let text = serde_json::to_string(&event).unwrap_or_default();
                            acked
                                .lock()
                                .unwrap()
                                .push((worker, run, text, Instant::now()));
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            panic!("the test lost {n} acknowledgements")
                        }
                        Err(_) => return,
                    }
                }
            });
            engines.push(engine);
        }
        engines
    });

    let total = runs_per_scenario();
    let started: Arc<Mutex<HashMap<u64, RunId>>> = Arc::default();
    let start_one = |engine: Engine, k: u64| async move {
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            match engine
                .start_with::<Transfer>(
                    TransferInput { amount: k },
                    StartOptions::key(format!("t-{k}")),
                )
                .await
            {
                Ok(run) => return run.id(),
                Err(error) => {
                    assert!(Instant::now() < until, "start t-{k}: {error}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    };
    let mut incidents = Vec::new();
    for round in 0..rounds() {
        let first = round as u64 * total;
        let starter = {
            let engines = engines.clone();
            let started = Arc::clone(&started);
            rt.spawn(async move {
                for k in first..first + total {
                    let run = start_one(engines[(k % 3) as usize].clone(), k).await;
                    started.lock().unwrap().insert(k, run);
                    tokio::time::sleep(Duration::from_millis(40)).await;
                }
            })
        };
        std::thread::sleep(Duration::from_millis(1_200));
        let at = Instant::now();
        match incident {
            Incident::Restart => {
                cluster.stop_immediate(&cluster.primary);
                std::thread::sleep(Duration::from_millis(500));
                cluster.start_node(&cluster.primary);
            }
            Incident::Failover => {
                cluster.kill(&cluster.primary);
                cluster.promote();
            }
            Incident::FailoverLagging => {
                cluster.stop_fast(&cluster.standby);
                std::thread::sleep(Duration::from_millis(700));
                cluster.kill(&cluster.primary);
                cluster.start_node(&cluster.standby);
                cluster.promote();
            }
        }
        println!(
            "{test}: round {round}: {incident:?}: the server was back {} ms after it died",
            at.elapsed().as_millis()
        );
        // (when the server died, when the writable one was back)
        incidents.push((at, Instant::now()));
        rt.block_on(starter).expect("the starts");
        if incident != Incident::Restart && round + 1 < rounds() {
            cluster.rebuild_old_primary_as_standby(replication);
        }
    }

    // Every key's run to its end: a run whose creation the failover lost is started again
    // under its key, as the sender of a webhook that was not answered would.
    let store = engines[0].store().clone();
    let mut lost_runs = HashSet::new();
    // Keys whose run completed with another key's effect (an idempotency key reused).
    let mut wrong: HashMap<u64, Option<u64>> = HashMap::new();
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let keys: Vec<(u64, RunId)> = started
            .lock()
            .unwrap()
            .iter()
            .map(|(k, r)| (*k, *r))
            .collect();
        let mut done = 0;
        for (k, run) in keys {
            match rt.block_on(store.load(run)).expect("load") {
                Some(stored) if stored.record.status == RunStatus::Completed => {
                    done += 1;
                    let settled = stored.events.iter().find_map(|e| match e {
                        Event::StepSucceeded {
                            step: 2, output, ..
                        } => output.as_u64(),
                        _ => None,
                    });
                    if settled != Some(k * 2 + 2) {
                        wrong.insert(k, settled);
                    }
                }
                Some(stored) => assert_ne!(
                    stored.record.status,
                    RunStatus::Failed,
                    "t-{k} failed: {:?}",
                    stored.record.note
                ),
                None => {
                    lost_runs.insert(k);
                    let again = rt.block_on(start_one(engines[(k % 3) as usize].clone(), k));
                    started.lock().unwrap().insert(k, again);
                }
            }
        }
        if done == started.lock().unwrap().len() {
            break;
        }
        wrong.clear();
        assert!(
            Instant::now() < until,
            "{test}: {done} of {} runs completed",
            started.lock().unwrap().len()
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    // Every entry a worker saw acknowledged is in its run's journal (or counted lost).
    let acked = acked.lock().unwrap().clone();
    let mut journals: HashMap<RunId, HashSet<String>> = HashMap::new();
    let mut lost_entries = 0;
    for (_, run, text, _) in &acked {
        let journal = journals.entry(*run).or_insert_with(|| {
            rt.block_on(store.load(*run))
                .expect("load")
                .map(|s| {
                    s.events
                        .iter()
                        .map(|e| serde_json::to_string(e).unwrap_or_default())
                        .collect()
                })
                .unwrap_or_default()
        });
        if !journal.contains(text) {
            lost_entries += 1;
        }
    }
    // From the server's death to each worker's first commit on the server that came back
    // (acknowledged after it was back: the dead one took no more), every round.
    for (round, (died, back)) in incidents.iter().enumerate() {
        let next = incidents.get(round + 1).map(|(died, _)| *died);
        let times: Vec<String> = (0..3)
            .map(|worker| {
                acked
                    .iter()
                    .filter(|(w, _, _, at)| {
                        *w == worker && at >= back && next.is_none_or(|next| *at < next)
                    })
                    .map(|(_, _, _, at)| *at - *died)
                    .min()
                    .map_or(format!("w{worker} none"), |t| {
                        format!("w{worker} {} ms", t.as_millis())
                    })
            })
            .collect();
        println!(
            "{test}: round {round}: from the server's death to each worker's first commit: {}",
            times.join(", ")
        );
    }
    let (died, back) = *incidents.last().expect("an incident");
    let first_commit = (0..3)
        .map(|worker| {
            acked
                .iter()
                .filter(|(w, _, _, at)| *w == worker && *at >= back)
                .map(|(_, _, _, at)| *at - died)
                .min()
        })
        .collect();
    let verification = rt.block_on(store.verify()).expect("verify");
    assert!(
        verification.is_clean(),
        "{test}: `workflow check` finds damage: {verification:?}"
    );
    let audit = rt.block_on(bank.audit()).expect("audit");
    let runs = started.lock().unwrap().len();
    assert!(
        wrong.is_empty(),
        "{test}: runs completed with another run's effect (key, settled): {wrong:?}"
    );
    drop(engines);
    rt.block_on(service.drop());
    Some(Outcome {
        lost_entries,
        lost_runs: lost_runs.len(),
        first_commit,
        audit,
        runs,
    })
}

fn report(test: &str, outcome: &Outcome) {
    let times: Vec<String> = outcome
        .first_commit
        .iter()
        .enumerate()
        .map(|(w, t)| match t {
            Some(t) => format!("w{w} {} ms", t.as_millis()),
            None => format!("w{w} none"),
        })
        .collect();
    println!(
        "{test}: {} runs completed; lost: {} acknowledged entries, {} runs; \
         effects of lost runs applied again by their new runs: {}; \
         from the server's death to the first commit on the one back up: {}; ledger: {:?}",
        outcome.runs,
        outcome.lost_entries,
        outcome.lost_runs,
        outcome.audit.applied - outcome.runs as i64,
        times.join(", "),
        outcome.audit
    );
}

/// Checks that hold in every scenario: no key applied twice,
/// no lower fence admitted after a higher one, no legitimate owner refused.
fn assert_ledger(test: &str, outcome: &Outcome) {
    let audit = &outcome.audit;
    assert_eq!(audit.applied_twice, 0, "{test}: {audit:?}");
    // Every run's effect applied once under its key; a run whose creation the failover
    // lost and that was started again has a new id, so its effect's key is new too: the
    // effect of the lost run, applied before the failover, is applied again (at most once
    // per lost run).
    let again = audit.applied - outcome.runs as i64;
    assert!(
        (0..=outcome.lost_runs as i64).contains(&again),
        "{test}: every key applied once, plus at most one per lost run: {audit:?}"
    );
    assert_eq!(audit.admitted_lower_after_higher, 0, "{test}: {audit:?}");
    assert_eq!(
        audit.refused_highest, 0,
        "{test}: a request with its key's highest fence was refused: {audit:?}"
    );
}

#[test]
fn a_crash_and_restart_of_the_server_loses_nothing_and_applies_nothing_twice() {
    let test = "failover_pg restart";
    let Some(outcome) = scenario(test, Replication::Asynchronous, Incident::Restart) else {
        return;
    };
    report(test, &outcome);
    assert_eq!(outcome.lost_entries, 0, "{outcome:?}");
    assert_eq!(outcome.lost_runs, 0, "{outcome:?}");
    assert_eq!(outcome.audit.applied, outcome.runs as i64, "{outcome:?}");
    assert_ledger(test, &outcome);
    assert!(
        outcome.first_commit.iter().all(Option::is_some),
        "every worker commits again: {outcome:?}"
    );
}

#[test]
fn a_failover_under_synchronous_replication_keeps_every_acknowledged_commit() {
    let test = "failover_pg sync";
    let Some(outcome) = scenario(test, Replication::Synchronous, Incident::Failover) else {
        return;
    };
    report(test, &outcome);
    assert_eq!(outcome.lost_entries, 0, "{outcome:?}");
    assert_eq!(outcome.lost_runs, 0, "{outcome:?}");
    assert_eq!(outcome.audit.applied, outcome.runs as i64, "{outcome:?}");
    assert_ledger(test, &outcome);
    assert!(
        outcome.first_commit.iter().all(Option::is_some),
        "every worker commits again: {outcome:?}"
    );
}

#[test]
fn a_failover_under_asynchronous_replication_applies_nothing_twice_and_strands_no_run() {
    let test = "failover_pg async";
    let Some(outcome) = scenario(test, Replication::Asynchronous, Incident::Failover) else {
        return;
    };
    // What asynchronous replication lost is reported, not forbidden; what must hold is
    // the ledger (nothing applied twice, no fence that went back) and that every key's
    // run completed (none stuck behind a fence).
    report(test, &outcome);
    assert_ledger(test, &outcome);
    assert!(
        outcome.first_commit.iter().all(Option::is_some),
        "every worker commits again: {outcome:?}"
    );
}

#[test]
fn a_failover_to_a_lagging_standby_reports_what_it_lost_and_strands_no_run() {
    let test = "failover_pg async lagging";
    let Some(outcome) = scenario(test, Replication::Asynchronous, Incident::FailoverLagging) else {
        return;
    };
    report(test, &outcome);
    assert_ledger(test, &outcome);
    assert!(
        outcome.lost_entries > 0,
        "the commits acknowledged while the standby lagged are gone: {outcome:?}"
    );
}

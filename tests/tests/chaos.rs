//! Many workers on one PostgreSQL database, under fire: three worker processes
//! (`src/bin/chaos_worker.rs`) drive at least 200 runs of a workflow with retries, two
//! keyed external effects and a human step (`src/chaos.rs`), while this test kills random
//! workers with SIGKILL (and starts a new one in its place) and every fifth kill freezes
//! another with SIGSTOP for longer than its lease before letting it go on (SIGCONT),
//! whatever it was doing, often inside an effect. The ledger the effects apply to checks
//! fences (`ctx.fence()`): a call from a worker that lost its run is refused. Half the runs
//! get their human decision from this test through the store (as the CLI sends one); the
//! other half wait out the step's deadline.
//!
//! Asserted at the end: one run per order however many workers started it; every run
//! completed once, each step once, with the right outputs; no keyed effect applied twice;
//! every human task decided once, and every deadline that decided one fired once; and no
//! write from a worker that had lost its run was accepted: for every run, the fencing
//! tokens of accepted commits never go down along the journal (the refused writes are
//! counted and reported).
//!
//! `cargo test -p tests --test chaos` makes at least 30 kills over 200 runs (about a
//! minute). The long mode makes 300:
//! `CHAOS_KILLS=300 CHAOS_RUNS=1000 cargo test -p tests --release --test chaos -- --nocapture`.
//! The server comes from `WORKFLOW_TEST_DATABASE_URL`; without one the test is skipped
//! with a line saying so (under `CI=true` it fails).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use tests::chaos::{self, ChaosOrder, Ledger};
use tests::workers::{now_ms, setting, Rng, Workers};
use workflow_core::admin;
use workflow_core::journal::Event;
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_core::{Approval, RunId, TIMEOUT_DECIDER};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

const WORKERS: usize = 3;
const LEASE_MS: u64 = 1_500;
/// The human step's index in `ChaosOrder`.
const APPROVE: usize = 3;

/// Over how long the test spreads the decisions of even orders: order `n` of `runs` is
/// decided once `n / runs` of it has passed, so runs move on all through the kills.
const DECISION_SPREAD: Duration = Duration::from_secs(20);

/// Sends the human decision of every even order whose task is open and whose turn came,
/// once per run.
async fn decide_open_tasks(
    store: &PgStore,
    decided: &mut HashSet<RunId>,
    elapsed: Duration,
    runs: u64,
) -> usize {
    let running = store
        .runs(RunFilter {
            status: Some(RunStatus::Running),
            ..RunFilter::default()
        })
        .await
        .expect("list runs");
    let mut sent = 0;
    let fresh: Vec<_> = running
        .into_iter()
        .filter(|r| !decided.contains(&r.id))
        .collect();
    for record in fresh {
        let Ok(Some(stored)) = store.load(record.id).await else {
            continue;
        };
        let Some(Event::RunStarted { input, .. }) = stored.events.first() else {
            continue;
        };
        let Some(order) = input["order"].as_u64() else {
            continue;
        };
        if order % 2 == 1 {
            decided.insert(record.id);
            continue;
        }
        if elapsed.as_secs_f64() < DECISION_SPREAD.as_secs_f64() * order as f64 / runs as f64 {
            continue;
        }
        let open = stored
            .events
            .iter()
            .any(|e| matches!(e, Event::TaskOpened { step: APPROVE, .. }));
        if !open {
            continue;
        }
        let approval = Approval {
            approved: true,
            by: String::new(),
            comment: Some("checked".into()),
        };
        let now = now_ms();
        let result = admin::submit_decision(
            store,
            record.id,
            ChaosOrder::spec(),
            "approve",
            "ana@ops",
            serde_json::to_value(approval).unwrap(),
            None,
            now,
        )
        .await;
        // Refused (expired, already decided, finished) is fine: the deadline was first.
        decided.insert(record.id);
        sent += usize::from(result.is_ok());
    }
    sent
}

#[test]
fn killed_and_paused_workers_lose_repeat_and_double_nothing() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let Some(url) = runtime.block_on(pg_testing::server("chaos")) else {
        return;
    };
    let kills_wanted = setting("CHAOS_KILLS", 30) as usize;
    let runs = setting("CHAOS_RUNS", chaos::DEFAULT_RUNS);
    let mut rng = Rng::from_clock();
    println!(
        "chaos test seed {}: {WORKERS} workers, {runs} runs, {kills_wanted} kills, lease {LEASE_MS} ms",
        rng.seed()
    );
    let schema = Schema::new(&url, "chaos");
    let store = runtime.block_on(schema.store());
    let ledger = runtime.block_on(Ledger::open(&url, schema.name())).unwrap();

    let args = [
        url.clone(),
        schema.name().to_owned(),
        runs.to_string(),
        LEASE_MS.to_string(),
    ];
    let mut workers = Workers::start(
        env!("CARGO_BIN_EXE_chaos_worker"),
        WORKERS,
        true,
        move |_| args.to_vec(),
    );
    let started = Instant::now();
    let (mut kills, mut pauses, mut decisions) = (0usize, 0usize, 0usize);
    let mut decided = HashSet::new();
    while kills < kills_wanted {
        decisions += runtime.block_on(decide_open_tasks(
            &store,
            &mut decided,
            started.elapsed(),
            runs,
        ));
        std::thread::sleep(Duration::from_millis(150 + rng.below(800)));
        workers.check_alive();
        let victim = workers.kill_any(&mut rng);
        kills += 1;
        if kills % 5 == 3 {
            // Freeze another worker past its lease, then let it go on.
            let frozen = workers.other_than(victim, &mut rng);
            workers.freeze(frozen);
            let until = Instant::now() + Duration::from_millis(LEASE_MS + 1_500);
            while Instant::now() < until {
                decisions += runtime.block_on(decide_open_tasks(
                    &store,
                    &mut decided,
                    started.elapsed(),
                    runs,
                ));
                std::thread::sleep(Duration::from_millis(200));
            }
            workers.thaw(frozen);
            pauses += 1;
        }
    }
    let killing = started.elapsed();
    // Let the workers finish every run.
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        decisions += runtime.block_on(decide_open_tasks(
            &store,
            &mut decided,
            started.elapsed(),
            runs,
        ));
        let records = runtime
            .block_on(store.runs(RunFilter::default()))
            .expect("runs");
        let unfinished = records.iter().filter(|r| !r.status.is_finished()).count();
        if records.len() as u64 == runs && unfinished == 0 {
            break;
        }
        workers.check_alive();
        assert!(
            Instant::now() < deadline,
            "{unfinished} of {} runs unfinished after {:?}",
            records.len(),
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    workers.stop_all();
    println!(
        "{kills} kills and {pauses} pauses in {killing:?}, all runs done after {:?}; {} worker processes; {decisions} decisions sent",
        started.elapsed(),
        workers.started()
    );
    let lines = workers.lines();
    runtime.block_on(verify(&store, &ledger, runs, &lines));
    runtime.block_on(schema.drop());
}

async fn verify(store: &PgStore, ledger: &Ledger, runs: u64, lines: &[String]) {
    let records = store.runs(RunFilter::default()).await.unwrap();
    assert_eq!(
        records.len() as u64,
        runs,
        "one run per order, never a second"
    );
    let mut orders = HashSet::new();
    let (mut by_person, mut by_deadline) = (0, 0);
    for record in &records {
        assert_eq!(
            record.status,
            RunStatus::Completed,
            "{} did not complete",
            record.id
        );
        let events = store.load(record.id).await.unwrap().unwrap().events;
        let Some(Event::RunStarted { input, .. }) = events.first() else {
            panic!("{} has no start", record.id)
        };
        let order = input["order"].as_u64().unwrap();
        assert!(orders.insert(order), "order {order} has two runs");
        assert_eq!(
            record.idempotency_key.as_deref(),
            Some(format!("order-{order}").as_str())
        );
        let mut outputs: BTreeMap<usize, u64> = BTreeMap::new();
        let mut opened = 0;
        let mut decisions = Vec::new();
        for event in &events {
            match event {
                Event::StepSucceeded { step, output, .. } if *step != APPROVE => {
                    let previous = outputs.insert(*step, output.as_u64().unwrap());
                    assert!(
                        previous.is_none(),
                        "{}: step #{step} completed twice",
                        record.id
                    );
                }
                Event::TaskOpened { step: APPROVE, .. } => opened += 1,
                Event::TaskDecided {
                    step: APPROVE, by, ..
                } => decisions.push(by.clone()),
                Event::TaskEscalated { .. } | Event::TaskExpired { .. } => {
                    panic!("{}: unexpected {event:?}", record.id)
                }
                _ => {}
            }
        }
        let expected = chaos::expected(order);
        let want: BTreeMap<usize, u64> = [0, 1, 2, 4, 5].into_iter().zip(expected).collect();
        assert_eq!(outputs, want, "{}: outputs of order {order}", record.id);
        assert_eq!(opened, 1, "{}: the review opened once", record.id);
        assert_eq!(
            decisions.len(),
            1,
            "{}: decided once: {decisions:?}",
            record.id
        );
        if decisions[0] == TIMEOUT_DECIDER {
            by_deadline += 1;
        } else {
            assert_eq!(
                order % 2,
                0,
                "{}: only even orders get a person's decision",
                record.id
            );
            by_person += 1;
        }
        if order % 2 == 1 {
            assert_eq!(
                decisions[0], TIMEOUT_DECIDER,
                "{}: odd orders wait out the deadline",
                record.id
            );
        }
    }

    let (twice, applied, executions, stale) = ledger.totals().await.unwrap();
    assert_eq!(twice, 0, "a keyed effect was applied twice");
    assert_eq!(
        applied as u64,
        runs * 2,
        "each run applies its two effects once"
    );

    // Fencing: along each run's journal, accepted commits never go back to an older token.
    let mut accepted: HashMap<u64, Vec<(u64, u64, u64)>> = HashMap::new();
    let mut refused = 0;
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["W", run, _owner, token, seq, n] => {
                accepted.entry(run.parse().unwrap()).or_default().push((
                    seq.parse().unwrap(),
                    n.parse().unwrap(),
                    token.parse().unwrap(),
                ))
            }
            ["F", ..] => refused += 1,
            _ => {}
        }
    }
    let mut takeovers = 0;
    for (run, mut commits) in accepted {
        commits.sort_unstable();
        for pair in commits.windows(2) {
            let ((seq_a, n_a, token_a), (seq_b, _, token_b)) = (pair[0], pair[1]);
            assert!(
                seq_b >= seq_a + n_a,
                "run {run}: two accepted commits overlap at entry {seq_b}"
            );
            assert!(
                token_b >= token_a,
                "run {run}: a write under token {token_b} was accepted after token {token_a}'s at entry {seq_b}"
            );
            takeovers += usize::from(token_b > token_a);
        }
    }
    println!(
        "{runs} runs completed once with the right outputs; {by_deadline} reviews decided by their \
         deadline (once each), {by_person} by a person; {applied} effects applied once each \
         ({executions} executions, re-runs deduplicated by key, {stale} stale calls refused by \
         their fence); {refused} writes from fenced workers refused; {takeovers} changes of \
         owner seen along journals"
    );
}

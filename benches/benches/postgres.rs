//! Benchmarks of `PgStore` on a PostgreSQL server (BENCHMARKS.md, "Many workers on
//! PostgreSQL"). A `harness = false` bench target, so `cargo test` never builds it:
//!
//! ```text
//! cargo bench -p benches --bench postgres -- b9       [--runs 2000] [--in-flight 16]
//! cargo bench -p benches --bench postgres -- takeover [--trials 5] [--leases 1000,2000,5000]
//! cargo bench -p benches --bench postgres -- b5       [--runs 200] [--concurrency 32] [--warmup 10]
//! cargo bench -p benches --bench postgres -- b19      --database-url URL [--runs 1000] [--concurrency 32] [--warmup 20]
//! cargo bench -p benches --bench postgres -- watch    [--commits 500] [--rounds 7]
//! ```
//!
//! The server comes from `WORKFLOW_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); every phase works in a fresh schema, dropped
//! afterwards.
//!
//! - `b9`: throughput of the 10-step durable chain with 1, 2 and 4 workers (engines, each
//!   with its own store and connection pool, `--in-flight` runs each) on one database,
//!   next to the same run's baseline: the same writes as plain one-statement inserts with
//!   the same concurrency (the server's rate for this write pattern), and the journal
//!   round trips per step.
//! - `takeover`: a worker is stopped as a crash would stop it (nothing released) while it
//!   drives a run; the time until another worker has claimed the run and runs its next
//!   attempt, against the lease (target: lease + 1 s).
//! - `b5`: the shape of `dbos_pg_compare.sh`'s comparison: the chain sequentially and with
//!   `--concurrency` in flight on one engine, with `RESULT {json}` for the script.
//! - `b19`: the shape of `dbos_rust_compare.sh`'s comparison with DBOS Transact for Rust:
//!   each phase (sequential, `--concurrency` in flight) on a fresh store after a warm-up on
//!   another, in a database of its own (`--database-url`, which the script creates), so
//!   its `xact_commit` in `pg_stat_database` counts this phase's commits alone (read once
//!   every connection to it has closed); round trips by the store's count of statements;
//!   the server's autocommit insert (the floor) before and after, on the default server.
//! - `watch`: what watched runs cost a step's commit (one statement either way): commits
//!   per second to a run nobody watches, to a run a console watches (each commit then
//!   notifies), and through `workflow_commit` without the watch's lines (the baseline: the
//!   function before watched runs), one run each on its own store, each first in turn.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor};
use workflow_core::journal::Event;
use workflow_core::store::{Claim, Claimable, Claimant, Commit, Fence, NewRun, Store};
use workflow_postgres::{PgOptions, PgStore};

#[path = "common/pg.rs"]
mod pg;

use pg::{server, Schema};
use workflow_core::{workflow, Engine, StepError};

/// Step `s0`.
async fn join0() -> Result<u32, StepError> {
    Ok(1)
}

/// Steps `s1` to `s9`: the input plus one.
async fn join1(x: u32) -> Result<u32, StepError> {
    Ok(x.wrapping_add(1))
}

workflow! {
    /// Ten no-op steps in a chain, each reading the previous one's output.
    workflow PgChain10() {
        step s0 -> u32 { action: join0(), }
        step s1 -> u32 { action: join1(s0), }
        step s2 -> u32 { action: join1(s1), }
        step s3 -> u32 { action: join1(s2), }
        step s4 -> u32 { action: join1(s3), }
        step s5 -> u32 { action: join1(s4), }
        step s6 -> u32 { action: join1(s5), }
        step s7 -> u32 { action: join1(s6), }
        step s8 -> u32 { action: join1(s7), }
        step s9 -> u32 { action: join1(s8), }
    }
}

const STEPS: u32 = 10;

/// Long enough for a worker to be stopped while it runs.
async fn slow(x: u32) -> Result<u32, StepError> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(x + 1)
}

workflow! {
    /// A chain of steps slow enough to stop a worker in the middle of a run.
    workflow PgSlow() {
        step a -> u32 { action: slow(0), }
        step b -> u32 { action: slow(a), }
        step c -> u32 { action: slow(b), }
        step d -> u32 { action: slow(c), }
    }
}

fn flag(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_owned())
}

fn number(name: &str, default: usize) -> usize {
    flag(name, &default.to_string())
        .parse()
        .unwrap_or_else(|_| panic!("{name} takes a number"))
}

async fn store(schema: &Schema, connections: u32) -> PgStore {
    schema
        .store_with(PgOptions {
            max_connections: connections,
            ..PgOptions::default()
        })
        .await
}

fn engine(store: Arc<dyn Store>, owner: &str, lease: Duration) -> Engine {
    let engine = Engine::builder()
        .shared_store(store)
        .owner(owner)
        .lease(lease)
        .build();
    engine.register::<PgChain10>(()).expect("register");
    engine.register::<PgSlow>(()).expect("register");
    engine
}

/// One run: `start`, then its outputs; the time between the two.
async fn one_run(engine: &Engine) -> Duration {
    let started = Instant::now();
    let run = engine
        .start::<PgChain10>(PgChain10Input {})
        .await
        .expect("start");
    let outputs = run.outputs().await.expect("outputs");
    assert_eq!(outputs.s9, STEPS);
    started.elapsed()
}

/// `runs` runs on `engine`, `in_flight` at a time; the latencies.
async fn drive(engine: Engine, runs: usize, in_flight: usize) -> Vec<Duration> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..in_flight.max(1) {
        let (engine, next) = (engine.clone(), Arc::clone(&next));
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < runs {
                latencies.push(one_run(&engine).await);
            }
            latencies
        });
    }
    let mut all = Vec::with_capacity(runs);
    while let Some(done) = tasks.join_next().await {
        all.extend(done.expect("a driver task"));
    }
    all
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64 + 0.5).round() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

/// The baseline: per workflow, the rows the engine writes for a 10-step chain (a run row,
/// then 21 journal rows in 11 commits), as plain one-statement inserts, `in_flight`
/// workflows at a time over `connections` connections.
async fn raw_inserts(url: &str, runs: usize, in_flight: usize) -> f64 {
    let schema = Schema::new(url, "raw");
    schema
        .execute(&format!(
            "CREATE SCHEMA {0};
             CREATE TABLE {0}.runs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, status text, len bigint);
             CREATE TABLE {0}.journal (run_id bigint REFERENCES {0}.runs (id), seq bigint, event text, PRIMARY KEY (run_id, seq));",
            schema.name()
        ))
        .await
        .expect("baseline tables");
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let event = "{\"event\":\"step_succeeded\",\"step\":3,\"output\":4,\"at\":1764525600000}";
    for _ in 0..in_flight {
        let next = Arc::clone(&next);
        let url = url.to_owned();
        let name = schema.name().to_owned();
        tasks.spawn(async move {
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
            conn.execute(format!("SET search_path TO {name}").as_str())
                .await
                .expect("search_path");
            while next.fetch_add(1, Ordering::Relaxed) < runs {
                let id: i64 = sqlx::query_scalar(
                    "INSERT INTO runs (status, len) VALUES ('running', 1) RETURNING id",
                )
                .fetch_one(&mut conn)
                .await
                .expect("insert run");
                let mut seq = 0i64;
                for commit in 0..11 {
                    let rows: i64 = if commit == 0 || commit == 10 { 1 } else { 2 };
                    sqlx::query(
                        "INSERT INTO journal (run_id, seq, event)
                         SELECT $1, $2 + g, $3 FROM generate_series(0, $4 - 1) g",
                    )
                    .bind(id)
                    .bind(seq)
                    .bind(event)
                    .bind(rows)
                    .execute(&mut conn)
                    .await
                    .expect("insert journal");
                    seq += rows;
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a baseline task");
    }
    let rate = runs as f64 / started.elapsed().as_secs_f64();
    schema.drop().await;
    rate
}

async fn b9(url: &str) {
    let runs = number("--runs", 2000);
    let in_flight = number("--in-flight", 16);
    println!(
        "B9: {runs} runs of a 10-step chain per configuration, {in_flight} in flight per worker"
    );
    println!("| workers | in flight | workflows/s | vs 1 worker | raw inserts, same writes and concurrency | ours / raw | p50 ms | p99 ms | round trips per step |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut single = None;
    for workers in [1usize, 2, 4] {
        let schema = Schema::new(url, "b9");
        let mut stores = Vec::new();
        let mut engines = Vec::new();
        for w in 0..workers {
            let store = Arc::new(store(&schema, 8).await);
            engines.push(engine(
                Arc::clone(&store) as Arc<dyn Store>,
                &format!("b9-{w}"),
                Duration::from_secs(30),
            ));
            stores.push(store);
        }
        for engine in &engines {
            drive(engine.clone(), 20, 4).await;
        }
        let trips: u64 = stores.iter().map(|s| s.round_trips()).sum();
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for engine in &engines {
            tasks.spawn(drive(engine.clone(), runs / workers, in_flight));
        }
        let mut latencies = Vec::new();
        while let Some(done) = tasks.join_next().await {
            latencies.extend(done.expect("a worker"));
        }
        let rate = latencies.len() as f64 / started.elapsed().as_secs_f64();
        let trips = stores.iter().map(|s| s.round_trips()).sum::<u64>() - trips;
        latencies.sort_unstable();
        drop(engines);
        drop(stores);
        schema.drop().await;
        let raw = raw_inserts(url, runs, workers * in_flight).await;
        let single = *single.get_or_insert(rate);
        println!(
            "| {workers} | {} | {rate:.0} | {:.2}× | {raw:.0} | {:.2}× | {:.2} | {:.2} | {:.2} |",
            workers * in_flight,
            rate / single,
            rate / raw,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            trips as f64 / (latencies.len() as f64 * f64::from(STEPS)),
        );
    }
}

async fn takeover(url: &str) {
    let trials = number("--trials", 5);
    let leases: Vec<u64> = flag("--leases", "1000,2000,5000")
        .split(',')
        .map(|l| l.parse().expect("--leases takes ms"))
        .collect();
    println!("Takeover: a worker stopped mid-run (nothing released); time until another worker claimed the run and started its next attempt");
    println!("| lease | trials | takeover min | median | max | max − lease | target lease + 1 s |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for lease_ms in leases {
        let lease = Duration::from_millis(lease_ms);
        let mut times = Vec::new();
        for trial in 0..trials {
            let schema = Schema::new(url, "takeover");
            let a_store: Arc<dyn Store> = Arc::new(store(&schema, 4).await);
            let b_store: Arc<dyn Store> = Arc::new(store(&schema, 4).await);
            let a = engine(a_store, &format!("a{trial}"), lease);
            let b = engine(Arc::clone(&b_store), &format!("b{trial}"), lease);
            b.resume_all().await.expect("b polls");
            let mut b_events = b.subscribe();
            let run = a.start::<PgSlow>(PgSlowInput {}).await.expect("start");
            // Let `a` renew once or twice: the lease it leaves behind is a fresh one.
            tokio::time::sleep(lease / 2).await;
            a.shutdown();
            let stopped = Instant::now();
            loop {
                match b_events.recv().await {
                    Ok((id, Event::AttemptStarted { .. })) if id == run.id() => break,
                    Ok(_) => {}
                    Err(error) => panic!("b's events: {error}"),
                }
            }
            times.push(stopped.elapsed());
            let outputs = b
                .handle::<PgSlow>(run.id())
                .await
                .expect("handle")
                .outputs()
                .await
                .expect("b finishes the run");
            assert_eq!(outputs.d, 4);
            drop((a, b, b_store));
            schema.drop().await;
        }
        times.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let max = ms(times[times.len() - 1]);
        println!(
            "| {lease_ms} ms | {trials} | {:.0} ms | {:.0} ms | {max:.0} ms | {:.0} ms | {} |",
            ms(times[0]),
            ms(times[times.len() / 2]),
            max - lease_ms as f64,
            if max <= lease_ms as f64 + 1000.0 {
                "met"
            } else {
                "NOT met"
            }
        );
    }
}

/// The server's latency for one durable write: the median of `n` autocommit inserts on one
/// connection, in ms. The floor under every sequential commit.
async fn raw_commit_ms(url: &str, n: usize) -> f64 {
    let schema = Schema::new(url, "fsync");
    schema
        .execute(&format!(
            "CREATE SCHEMA {0}; CREATE TABLE {0}.t (x bigint)",
            schema.name()
        ))
        .await
        .expect("baseline table");
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let insert = format!("INSERT INTO {}.t (x) VALUES ($1)", schema.name());
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        sqlx::query(&insert)
            .bind(i as i64)
            .execute(&mut conn)
            .await
            .expect("insert");
        times.push(started.elapsed());
    }
    let _ = conn.close().await;
    schema.drop().await;
    times.sort_unstable();
    percentile(&times, 0.5)
}

async fn b5(url: &str) {
    let runs = number("--runs", 200);
    let concurrency = number("--concurrency", 32);
    let warmup = number("--warmup", 10);
    let schema = Schema::new(url, "b5");
    let store = Arc::new(store(&schema, 16).await);
    let engine = engine(
        Arc::clone(&store) as Arc<dyn Store>,
        "b5",
        Duration::from_secs(30),
    );
    drive(engine.clone(), warmup, 1).await;
    let raw_before = raw_commit_ms(url, 200).await;
    let mut phases = Vec::new();
    for (name, in_flight) in [("sequential", 1), ("concurrent", concurrency)] {
        let (writes, commits, trips) =
            (store.journal_writes(), store.commits(), store.round_trips());
        let started = Instant::now();
        let mut latencies = drive(engine.clone(), runs, in_flight).await;
        let seconds = started.elapsed().as_secs_f64();
        latencies.sort_unstable();
        let per_run = |n: u64| n as f64 / runs as f64;
        let phase = format!(
            "{{\"phase\": \"{name}\", \"runs\": {runs}, \"in_flight\": {in_flight}, \"seconds\": {seconds}, \
             \"workflows_per_s\": {}, \"p50_ms\": {}, \"p99_ms\": {}, \"journal_writes_per_run\": {}, \
             \"commits_per_run\": {}, \"round_trips_per_run\": {}}}",
            runs as f64 / seconds,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            per_run(store.journal_writes() - writes),
            per_run(store.commits() - commits),
            per_run(store.round_trips() - trips),
        );
        println!(
            "ours {name:<10} runs={runs:<5} in_flight={in_flight:<3} {:9.1} workflows/s  p50 {:8.3} ms  p99 {:8.3} ms  round trips/run {:.2}",
            runs as f64 / seconds,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            per_run(store.round_trips() - trips),
        );
        phases.push(phase);
    }
    let raw = (raw_before + raw_commit_ms(url, 200).await) / 2.0;
    println!(
        "server: one autocommit insert takes {raw:.3} ms (median, before and after the phases)"
    );
    println!(
        "RESULT {{\"sequential\": {}, \"concurrent\": {}, \"raw_commit_ms\": {raw}}}",
        phases[0], phases[1]
    );
    drop(engine);
    schema.drop().await;
}

/// The committed transactions of `database`, read over `psql` on `stats_url` once no
/// connection to `database` is left (so every backend has reported its counts).
async fn commits_when_quiet(stats_url: &str, database: &str) -> u64 {
    let out = |sql: String| {
        let output = std::process::Command::new("psql")
            .args([stats_url, "-XAtc", &sql])
            .output()
            .expect("psql");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    for _ in 0..200 {
        let left = out(format!(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}'"
        ));
        if left == "0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    out(format!(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = '{database}'"
    ))
    .parse()
    .expect("xact_commit")
}

async fn b19(url: &str) {
    let db_url = flag("--database-url", url);
    let database = db_url
        .rsplit('/')
        .next()
        .and_then(|d| d.split('?').next())
        .unwrap_or_default()
        .to_owned();
    let runs = number("--runs", 1000);
    let concurrency = number("--concurrency", 32);
    let warmup = number("--warmup", 20);
    let schema = Schema::new(&db_url, "b19");
    let raw_before = raw_commit_ms(url, 300).await;
    let mut phases = Vec::new();
    for (name, in_flight) in [("sequential", 1), ("concurrent", concurrency)] {
        {
            let store = Arc::new(store(&schema, 16).await);
            let engine = engine(store as Arc<dyn Store>, "b19", Duration::from_secs(30));
            drive(engine.clone(), warmup, in_flight).await;
            engine.shutdown();
        }
        let before = commits_when_quiet(url, &database).await;
        let store = Arc::new(store(&schema, 16).await);
        let engine = engine(
            Arc::clone(&store) as Arc<dyn Store>,
            "b19",
            Duration::from_secs(30),
        );
        let trips = store.round_trips();
        let started = Instant::now();
        let mut latencies = drive(engine.clone(), runs, in_flight).await;
        let seconds = started.elapsed().as_secs_f64();
        let trips = store.round_trips() - trips;
        engine.shutdown();
        drop(engine);
        drop(store);
        let commits = commits_when_quiet(url, &database).await - before;
        latencies.sort_unstable();
        let per_run = |n: u64| n as f64 / runs as f64;
        println!(
            "ours {name:<10} runs={runs:<5} in_flight={in_flight:<3} {:9.1} workflows/s  p50 {:8.3} ms  p99 {:8.3} ms  commits/run {:.2}  round trips/run {:.2}",
            runs as f64 / seconds,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            per_run(commits),
            per_run(trips),
        );
        phases.push(format!(
            "{{\"phase\": \"{name}\", \"runs\": {runs}, \"in_flight\": {in_flight}, \"seconds\": {seconds}, \
             \"workflows_per_s\": {}, \"p50_ms\": {}, \"p99_ms\": {}, \"commits_per_run\": {}, \
             \"round_trips_per_run\": {}}}",
            runs as f64 / seconds,
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            per_run(commits),
            per_run(trips),
        ));
    }
    let raw = (raw_before + raw_commit_ms(url, 300).await) / 2.0;
    println!("server: one autocommit insert takes {raw:.3} ms (median, before and after)");
    println!(
        "RESULT {{\"sequential\": {}, \"concurrent\": {}, \"raw_commit_ms\": {raw}}}",
        phases[0], phases[1]
    );
    schema.drop().await;
}

/// `workflow_commit` without the watch's lines: the function as it was before.
fn commit_without_watch() -> String {
    let mut sql =
        include_str!("../../workflow-postgres/sql/functions/workflow_commit.sql").to_owned();
    for (with, without) in [
        ("    v_watched timestamptz;\n", ""),
        (
            "RETURNING r.status, r.watched_until INTO v_status, v_watched;",
            "RETURNING r.status INTO v_status;",
        ),
        (", r.watched_until\n", "\n"),
        (", v_status, v_watched\n", ", v_status\n"),
        (
            "        IF v_watched > now() THEN\n            PERFORM pg_notify(p_channel, 'commit ' || p_run);\n        END IF;\n",
            "",
        ),
        (
            "    IF v_watched > now() THEN\n        PERFORM pg_notify(p_channel, 'commit ' || p_run);\n    END IF;\n",
            "",
        ),
    ] {
        assert!(sql.contains(with), "the function changed: update the baseline");
        sql = sql.replace(with, without);
    }
    assert!(!sql.contains("v_watched"), "{sql}");
    sql
}

/// One run, claimed, on its own store: `seq` is its journal's length.
struct Target {
    store: PgStore,
    run: workflow_core::RunId,
    token: u64,
    seq: u64,
}

impl Target {
    async fn new(schema: &Schema) -> Target {
        let store = store(schema, 2).await;
        let events = [Event::RunStarted {
            workflow: "w".into(),
            fingerprint: "fp".into(),
            input: serde_json::json!({}),
            seed: 1,
            trace_id: "t".into(),
            parent_span: None,
            dry_run: false,
            deadline: None,
            at: 1,
        }];
        let run = store
            .create_run(NewRun {
                workflow: "w",
                fingerprint: "fp",
                idempotency_key: None,
                events: &events,
                parent: None,
                owner: None,
                supersedes: None,
                at: 1,
                search: &[],
            })
            .await
            .expect("create")
            .id();
        let lease = store
            .claim(Claim {
                claimant: Claimant {
                    owner: "b",
                    lease_ms: 3_600_000,
                    now: 1,
                },
                workflows: &["w"],
                run: Some(run),
                reclaim_own: false,
                limit: None,
                claimable: Claimable::Any,
                versions: None,
            })
            .await
            .expect("claim")[0];
        Target {
            store,
            run,
            token: lease.token,
            seq: 1,
        }
    }

    /// Commits per second over `n` step commits, one after another.
    async fn rate(&mut self, n: usize) -> f64 {
        let started = Instant::now();
        for _ in 0..n {
            let events = [Event::AttemptStarted {
                step: 0,
                attempt: 1,
                at: 2,
            }];
            self.store
                .commit(Commit {
                    fence: Some(Fence {
                        owner: "b",
                        token: self.token,
                    }),
                    ..Commit::events(self.run, self.seq, &events, 2)
                })
                .await
                .expect("commit");
            self.seq += 1;
        }
        n as f64 / started.elapsed().as_secs_f64()
    }
}

async fn watch_cost(url: &str) {
    let (commits, rounds) = (number("--commits", 500), number("--rounds", 7));
    let schemas = [
        Schema::new(url, "unwatched"),
        Schema::new(url, "watched"),
        Schema::new(url, "before"),
    ];
    let mut targets = Vec::new();
    for schema in &schemas {
        targets.push(Target::new(schema).await);
    }
    let baseline = format!(
        "SET search_path TO {};\n{}",
        schemas[2].name(),
        commit_without_watch()
    );
    schemas[2]
        .execute(&baseline)
        .await
        .expect("the baseline function");
    let mut rates = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..rounds {
        // The console's mark, made again each round as a watching page would.
        let _watch = targets[1].store.watch(targets[1].run).await.expect("watch");
        // Each contender goes first in turn.
        for i in (0..3).map(|k| (k + round) % 3) {
            rates[i].push(targets[i].rate(commits).await);
        }
    }
    let median = |rates: &mut Vec<f64>| {
        rates.sort_by(f64::total_cmp);
        rates[rates.len() / 2]
    };
    let [unwatched, watched, before] = rates.each_mut().map(median);
    println!("step commits/s, median of {rounds} rounds of {commits}:");
    println!("  before watched runs (baseline)   {before:8.0}");
    println!(
        "  a run nobody watches             {unwatched:8.0}   {:.3} of the baseline",
        unwatched / before
    );
    println!(
        "  a run a console watches          {watched:8.0}   {:.3} of the baseline",
        watched / before
    );
    for schema in &schemas {
        schema.drop().await;
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mode = std::env::args()
        .skip(1)
        .find(|a| {
            !a.starts_with("--") && ["b9", "takeover", "b5", "b19", "watch"].contains(&a.as_str())
        })
        .unwrap_or_else(|| "b9".to_owned());
    runtime.block_on(async {
        let Some(url) = server().await else {
            return;
        };
        match mode.as_str() {
            "takeover" => takeover(&url).await,
            "b5" => b5(&url).await,
            "b19" => b19(&url).await,
            "watch" => watch_cost(&url).await,
            _ => b9(&url).await,
        }
    });
}

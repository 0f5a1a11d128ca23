//! B20: the console on a large store. 1 000 000 finished and 10 000 running runs (each
//! with a search value `customer`), and one running run with a journal of 10 000
//! entries (a map of 5 000 items); the median latency of the console's runs page and of `GET /api/runs`, each
//! filtered by status and by a search key, and of that run's page, over loopback HTTP,
//! on SQLite and on PostgreSQL.
//!
//! The store is filled through the `Store` API directly (each run created with its
//! journal, a finished one finished in the same batch of concurrent writes), not by running
//! the workflows. The server's engine registers no workflow (as `workflow serve`).
//!
//! Run with `cargo bench -p benches --bench console`. Environment: `B20_FINISHED`
//! (default 1000000), `B20_RUNNING` (10000), `B20_JOURNAL` (10000 entries in the long
//! run), `B20_REQUESTS` (25 per measure), `B20_STORES` (`sqlite,postgres`),
//! `WORKFLOW_TEST_DATABASE_URL` (PostgreSQL, default
//! `postgres://postgres@127.0.0.1:5432/test`; a schema of its own, dropped after).
//! Targets: each list ≤ 50 ms median, the run page ≤ 100 ms.

#[path = "support/http.rs"]
mod http;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::{get, median, ms};

use serde_json::json;
use sqlx::{Connection, Executor};
use workflow_core::journal::Event;
use workflow_core::store::{Commit, NewRun, RunStatus, Store};
use workflow_core::{Engine, RunId, Workflow};
use workflow_postgres::{PgOptions, PgStore};
use workflow_server::{Roles, Server, TrustedHeader};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

mod flows {
    use workflow_core::{workflow, StepError};

    /// What a charge is for.
    #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    pub struct Order {
        pub customer: String,
    }

    pub async fn charge(amount: u64) -> Result<u64, StepError> {
        Ok(amount)
    }

    workflow! {
        /// Charges each amount of an order, found by its customer.
        pub workflow Charge(order: Order, amounts: Vec<u64>) {
            search: [order.customer],
            step charge -> u64 {
                for_each: x in amounts,
                action: charge(x),
                concurrency: 4,
            }
        }
    }
}

use flows::Charge;

/// Who reads the console: a viewer of every workflow, with payloads (searches read them).
const READER: &str = "ana@ops";

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The customer of run `n`: 1 000 customers, so a search finds about 1 in 1 000 runs.
fn customer(n: usize) -> String {
    format!("c-{}", n % 1000)
}

fn started(n: usize, items: usize, at: u64) -> Event {
    Event::RunStarted {
        workflow: Charge::NAME.to_owned(),
        fingerprint: Charge::FINGERPRINT.to_owned(),
        input: json!({ "order": { "customer": customer(n) }, "amounts": vec![n; items] }),
        seed: n as u64,
        trace_id: format!("{n:032x}"),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at,
    }
}

/// Run `n`'s journal: its map of `items` items listed, each started and (all but the last
/// of a running run) succeeded, and a finished run's step succeeded; about two entries
/// per item.
fn journal(n: usize, at: u64, finished: bool, items: usize) -> Vec<Event> {
    let items = items.max(1);
    let mut events = vec![
        started(n, items, at),
        Event::MapStarted {
            step: 0,
            count: items,
            at,
        },
    ];
    for item in 0..items {
        events.push(Event::ItemStarted {
            step: 0,
            item,
            attempt: 1,
            at: at + item as u64,
        });
        if finished || item + 1 < items {
            events.push(Event::ItemSucceeded {
                step: 0,
                item,
                output: json!(n),
                at: at + item as u64,
            });
        }
    }
    if finished {
        events.push(Event::StepSucceeded {
            step: 0,
            output: json!(vec![n; items]),
            at,
        });
    }
    events
}

/// Creates the runs, 64 writes in flight at a time; the last one has the long journal.
async fn fill(store: Arc<dyn Store>, finished: usize, running: usize, long: usize) -> RunId {
    let spec = serde_json::to_string(Charge::spec()).unwrap_or_default();
    let at = now();
    if let Err(error) = store
        .put_spec(Charge::FINGERPRINT, Charge::NAME, &spec, at)
        .await
    {
        panic!("put_spec: {error}");
    }
    let total = finished + running;
    let started = Instant::now();
    let batch = 64;
    let mut n = 0;
    while n < total {
        let mut writes = tokio::task::JoinSet::new();
        for n in n..(n + batch).min(total) {
            let store = Arc::clone(&store);
            let done = n < finished;
            writes.spawn(async move {
                let events = journal(n, at, done, 1);
                let search = [("customer".to_owned(), customer(n))];
                let created = store
                    .create_run(NewRun {
                        workflow: Charge::NAME,
                        fingerprint: Charge::FINGERPRINT,
                        idempotency_key: None,
                        events: &events,
                        parent: None,
                        owner: None,
                        supersedes: None,
                        search: &search,
                        at,
                    })
                    .await
                    .unwrap_or_else(|e| panic!("create: {e}"));
                if done {
                    let commit = Commit {
                        status: Some((RunStatus::Completed, None)),
                        ..Commit::events(created.id(), events.len() as u64, &[], at)
                    };
                    store
                        .commit(commit)
                        .await
                        .unwrap_or_else(|e| panic!("finish: {e}"));
                }
            });
        }
        while let Some(done) = writes.join_next().await {
            if let Err(error) = done {
                panic!("a write failed: {error}");
            }
        }
        n += batch;
        if n % 100_000 < batch {
            eprintln!("  {n} runs written");
        }
    }
    let events = journal(total, at, false, long / 2);
    let search = [("customer".to_owned(), customer(total))];
    let created = store
        .create_run(NewRun {
            workflow: Charge::NAME,
            fingerprint: Charge::FINGERPRINT,
            idempotency_key: None,
            events: &events,
            parent: None,
            owner: None,
            supersedes: None,
            search: &search,
            at,
        })
        .await
        .unwrap_or_else(|e| panic!("create the long run: {e}"));
    eprintln!(
        "  filled {} runs (one with {} journal entries) in {:.1} s",
        total + 1,
        events.len(),
        started.elapsed().as_secs_f64()
    );
    created.id()
}

async fn serve(engine: &Engine) -> SocketAddr {
    let roles = Roles::parse(&format!("{READER} viewer:* payloads:*"))
        .unwrap_or_else(|e| panic!("roles: {e}"));
    let router = Server::new(engine.clone())
        .authenticator(TrustedHeader::new())
        .permissions(roles)
        .router();
    http::serve(router).await
}

/// The median of `requests` GETs of `path`, each answer checked by `check`.
async fn timed(addr: SocketAddr, path: &str, requests: usize, check: impl Fn(&str) -> bool) -> f64 {
    let mut samples = Vec::with_capacity(requests);
    for _ in 0..requests {
        let (took, body) = get(addr, READER, path).await;
        assert!(check(&body), "{path}: an unexpected answer: {body:.2000}");
        samples.push(took);
    }
    ms(median(samples))
}

async fn measure(label: &str, store: Arc<dyn Store>, long: RunId, requests: usize) {
    let engine = Engine::builder().shared_store(store).intake_only().build();
    let addr = serve(&engine).await;
    let search = "where=customer:c-42";
    let runs_status = timed(addr, "/console/runs?status=completed", requests, |b| {
        b.contains("id=\"runs\"")
    })
    .await;
    let runs_search = timed(addr, &format!("/console/runs?{search}"), requests, |b| {
        b.contains("id=\"runs\"")
    })
    .await;
    let api_status = timed(addr, "/api/runs?status=completed", requests, |b| {
        b.contains("\"runs\":[{")
    })
    .await;
    let api_search = timed(addr, &format!("/api/runs?{search}"), requests, |b| {
        b.contains("\"runs\":[{")
    })
    .await;
    let run_page = timed(addr, &format!("/console/runs/{long}"), requests, |b| {
        b.contains("id=\"journal-entries\"")
    })
    .await;
    let verdict = |took: f64, target: f64| if took <= target { "meets" } else { "misses" };
    println!(
        "B20 {label}: console runs by status {runs_status:.1} ms ({}), by search key \
         {runs_search:.1} ms ({}); GET /api/runs by status {api_status:.1} ms ({}), by \
         search key {api_search:.1} ms ({}); a run page of {long} {run_page:.1} ms ({}); \
         medians of {requests}",
        verdict(runs_status, 50.0),
        verdict(runs_search, 50.0),
        verdict(api_status, 50.0),
        verdict(api_search, 50.0),
        verdict(run_page, 100.0),
    );
    engine.shutdown();
}

async fn sqlite(finished: usize, running: usize, long: usize, requests: usize) {
    let dir = option_env!("CARGO_TARGET_TMPDIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("b20-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let run = {
        // Filled without syncing (the measure reads only), then reopened as served.
        let options = SqliteOptions {
            synchronous: Synchronous::Off,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open_with(&path, options)
            .unwrap_or_else(|e| panic!("open the store: {e}"));
        fill(Arc::new(store), finished, running, long).await
    };
    let store = SqliteStore::open(&path).unwrap_or_else(|e| panic!("reopen the store: {e}"));
    measure("SQLite", Arc::new(store), run, requests).await;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

async fn postgres(finished: usize, running: usize, long: usize, requests: usize) {
    let url = std::env::var("WORKFLOW_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let schema = format!("wfb_b20_{}", std::process::id());
    let options = PgOptions {
        schema: schema.clone(),
        max_connections: 16,
        ..PgOptions::default()
    };
    match PgStore::connect_with(&url, options).await {
        Ok(store) => {
            let store: Arc<dyn Store> = Arc::new(store);
            let run = fill(Arc::clone(&store), finished, running, long).await;
            measure("PostgreSQL", store, run, requests).await;
        }
        Err(error) => eprintln!("B20 PostgreSQL skipped: no server at {url}: {error}"),
    }
    if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
        let _ = conn
            .execute(format!("DROP SCHEMA IF EXISTS {schema} CASCADE").as_str())
            .await;
        let _ = conn.close().await;
    }
}

fn main() {
    let finished = env("B20_FINISHED", 1_000_000);
    let running = env("B20_RUNNING", 10_000);
    let long = env("B20_JOURNAL", 10_000);
    let requests = env("B20_REQUESTS", 25).max(1);
    let stores = std::env::var("B20_STORES").unwrap_or_else(|_| "sqlite,postgres".to_owned());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(async {
        if stores.contains("sqlite") {
            sqlite(finished, running, long, requests).await;
        }
        if stores.contains("postgres") {
            postgres(finished, running, long, requests).await;
        }
    });
}

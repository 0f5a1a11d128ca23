//! H1 and H2: signed webhook intake through `workflow-server` on SQLite, with a Rust load
//! client on loopback, against the engine's own start rate measured in the same run.
//!
//! - `direct`: `CLIENTS` tasks call `Engine::start_json` with a fresh idempotency key each,
//!   `HTTP_RUNS` starts in all: starts per second and the latency of one start.
//! - `http`: the same starts as Standard Webhooks deliveries (signed by the client before
//!   the clock starts) over `CLIENTS` keep-alive HTTP/1.1 connections: the server reads the
//!   body, verifies the HMAC, parses the JSON, maps it and calls `start_json` with the
//!   `webhook-id` as key. Requests per second, p50 and p99 of one request.
//! - `repeats`: `HTTP_RUNS` deliveries of which 30 % repeat an earlier event id (drawn
//!   from the ids sent so far, so repeats race their originals on other connections).
//!   Checked: every answer for one event id names the same run, as many runs were created
//!   (201) as there are distinct ids, and the store holds exactly that many runs.
//!
//! Each phase runs on a fresh SQLite file (the durable default: WAL, `synchronous =
//! FULL`) and waits for its runs to complete before the next; the engine, the server and
//! the clients share one two-worker tokio runtime. Phases alternate for `ROUNDS` rounds
//! (which goes first alternates too); the ratio http/direct is taken per round and its
//! median reported, after one unreported warm-up round of each.
//!
//! Run with `cargo bench -p benches --bench http`. Environment: `HTTP_RUNS` (default
//! 5000), `CLIENTS` (16), `ROUNDS` (9), `HTTP_DIR` (where the files go).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use workflow_core::store::{RunFilter, RunStatus};
use workflow_core::{Engine, StartOptions};
use workflow_server::{Server, WebhookConfig};
use workflow_sqlite::SqliteStore;

mod flows {
    use serde::{Deserialize, Serialize};
    use workflow_core::{workflow, StepError};

    /// A ticket as the webhook carries it.
    #[derive(Clone, Debug, Serialize, Deserialize)]
    pub struct Ticket {
        pub ticket_id: String,
        pub text: String,
    }

    pub async fn note(ticket: Ticket) -> Result<usize, StepError> {
        Ok(ticket.text.len())
    }

    workflow! {
        /// One step: what an intake workflow does before anything slow.
        pub workflow Intake(ticket: Ticket) {
            step note -> usize { action: note(ticket), }
        }
    }
}

use flows::{Intake, IntakeInput, Ticket};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn dir() -> PathBuf {
    let dir = std::env::var_os("HTTP_DIR")
        .map(PathBuf::from)
        .or_else(|| option_env!("CARGO_TARGET_TMPDIR").map(PathBuf::from))
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("http-bench-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        panic!("cannot create {}: {error}", dir.display());
    }
    dir
}

fn engine(path: &std::path::Path) -> Engine {
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    let store = SqliteStore::open(path).unwrap_or_else(|e| panic!("open the store: {e}"));
    let engine = Engine::builder().store(store).build();
    if let Err(error) = engine.register::<Intake>(()) {
        panic!("register: {error}");
    }
    engine
}

fn body(id: &str, n: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": id,
        "ticket_id": format!("T-{n}"),
        "text": "Maybe locked out; payroll closes today",
    }))
    .unwrap_or_default()
}

/// Latencies, sorted.
struct Sample {
    latencies: Vec<Duration>,
    elapsed: Duration,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        let index = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies.get(index).copied().unwrap_or_default()
    }
}

async fn wait_completed(engine: &Engine, runs: usize) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let done = engine
            .runs(RunFilter {
                status: Some(RunStatus::Completed),
                ..RunFilter::default()
            })
            .await
            .map_or(0, |r| r.len());
        if done >= runs || Instant::now() > deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn direct(engine: &Engine, runs: usize, clients: usize) -> Sample {
    let next = Arc::new(AtomicUsize::new(0));
    let input = serde_json::to_value(IntakeInput {
        ticket: Ticket {
            ticket_id: "T-1".into(),
            text: "Maybe locked out; payroll closes today".into(),
        },
    })
    .unwrap_or_default();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (engine, next, input) = (engine.clone(), Arc::clone(&next), input.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= runs {
                    return latencies;
                }
                let t = Instant::now();
                let key = StartOptions::key(format!("evt_{n}"));
                if let Err(error) = engine.start_json("Intake", input.clone(), key).await {
                    panic!("start: {error}");
                }
                latencies.push(t.elapsed());
            }
        });
    }
    collect(tasks, started).await
}

async fn collect(mut tasks: tokio::task::JoinSet<Vec<Duration>>, started: Instant) -> Sample {
    let mut latencies = Vec::new();
    while let Some(done) = tasks.join_next().await {
        latencies.extend(done.unwrap_or_default());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    Sample { latencies, elapsed }
}

async fn serve(engine: &Engine, config: WebhookConfig) -> SocketAddr {
    let router = Server::new(engine.clone())
        .webhook::<Intake, Ticket>("/hooks/tickets", config, |ticket| IntakeInput { ticket })
        .router();
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(error) => panic!("bind: {error}"),
    };
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

/// A delivery, signed before the clock starts.
#[derive(Clone)]
struct Delivery {
    id: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

/// What the server answered for one delivery.
#[derive(Debug, Deserialize, Serialize)]
struct Answer {
    run: String,
    created: bool,
}

/// Sends `deliveries` over `clients` keep-alive connections (delivery i on connection
/// i % clients): latencies, and each delivery's answer.
async fn send(
    addr: SocketAddr,
    deliveries: Vec<Delivery>,
    clients: usize,
) -> (Sample, Vec<(String, Answer)>) {
    let deliveries = Arc::new(deliveries);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..clients {
        let deliveries = Arc::clone(&deliveries);
        tasks.spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr)
                .await
                .unwrap_or_else(|e| panic!("connect: {e}"));
            let _ = stream.set_nodelay(true);
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap_or_else(|e| panic!("handshake: {e}"));
            tokio::spawn(connection);
            let mut out = Vec::new();
            for delivery in deliveries.iter().skip(client).step_by(clients) {
                let mut request = Request::post("/hooks/tickets")
                    .header("host", "bench")
                    .header("content-type", "application/json");
                for (name, value) in &delivery.headers {
                    request = request.header(*name, value);
                }
                let request = request
                    .body(Full::new(Bytes::from(delivery.body.clone())))
                    .unwrap_or_else(|e| panic!("request: {e}"));
                let t = Instant::now();
                let response = sender
                    .send_request(request)
                    .await
                    .unwrap_or_else(|e| panic!("send: {e}"));
                let status = response.status();
                let bytes = response
                    .into_body()
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let latency = t.elapsed();
                assert!(
                    status.is_success(),
                    "{status}: {}",
                    String::from_utf8_lossy(&bytes)
                );
                let answer: Answer =
                    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("answer: {e}"));
                out.push((latency, delivery.id.clone(), answer));
            }
            out
        });
    }
    let mut latencies = Vec::new();
    let mut answers = Vec::new();
    while let Some(done) = tasks.join_next().await {
        for (latency, id, answer) in done.unwrap_or_default() {
            latencies.push(latency);
            answers.push((id, answer));
        }
    }
    let elapsed = started.elapsed();
    latencies.sort();
    (Sample { latencies, elapsed }, answers)
}

fn deliveries(config: &WebhookConfig, now: i64, ids: &[String]) -> Vec<Delivery> {
    ids.iter()
        .enumerate()
        .map(|(n, id)| {
            let body = body(id, n);
            Delivery {
                id: id.clone(),
                headers: config.sign(id, now, &body),
                body,
            }
        })
        .collect()
}

/// Event ids of which `share` repeat an earlier one (a seeded xorshift picks which).
fn with_repeats(count: usize, share: f64, seed: u64) -> Vec<String> {
    let mut state = seed;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut ids: Vec<String> = Vec::with_capacity(count);
    let mut fresh = 0;
    for _ in 0..count {
        let repeat = !ids.is_empty() && (next() % 1000) as f64 / 1000.0 < share;
        if repeat {
            let earlier = (next() as usize) % ids.len();
            ids.push(ids[earlier].clone());
        } else {
            ids.push(format!("evt_{fresh}"));
            fresh += 1;
        }
    }
    ids
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let runs = benches::setting("HTTP_RUNS", 5000);
    let clients = benches::setting("CLIENTS", 16);
    let rounds = benches::setting("ROUNDS", 9);
    let dir = dir();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let config = match WebhookConfig::standard(SECRET) {
        Ok(config) => config,
        Err(error) => panic!("{error}"),
    };

    println!(
        "## H1: signed webhook intake on SQLite ({runs} starts, {clients} clients, {rounds} rounds)\n"
    );
    println!("| round | direct starts/s | direct p50 | direct p99 | HTTP req/s | HTTP p50 | HTTP p99 | HTTP/direct |");
    println!("|---|---|---|---|---|---|---|---|");
    // One unreported round first: the first server, connections and files of a process
    // are slower than the rest.
    rt.block_on(async {
        measure_direct(&dir, 0, runs / 5, clients).await;
        measure_http(&dir, 0, runs / 5, clients, &config).await;
    });
    let mut ratios = Vec::new();
    for round in 1..=rounds {
        // The order alternates between rounds, so neither side always goes first.
        let (direct, http) = rt.block_on(async {
            if round % 2 == 1 {
                let direct = measure_direct(&dir, round, runs, clients).await;
                let http = measure_http(&dir, round, runs, clients, &config).await;
                (direct, http)
            } else {
                let http = measure_http(&dir, round, runs, clients, &config).await;
                let direct = measure_direct(&dir, round, runs, clients).await;
                (direct, http)
            }
        });
        let ratio = http.rate() / direct.rate();
        ratios.push(ratio);
        println!(
            "| {round} | {:.0} | {} | {} | {:.0} | {} | {} | {ratio:.2} |",
            direct.rate(),
            ms(direct.percentile(0.5)),
            ms(direct.percentile(0.99)),
            http.rate(),
            ms(http.percentile(0.5)),
            ms(http.percentile(0.99)),
        );
    }
    println!("\nmedian HTTP/direct: {:.2}\n", median(ratios));

    println!("## H2: {runs} deliveries, 30 % repeated\n");
    let ids = with_repeats(runs, 0.3, 0x9E37_79B9_7F4A_7C15);
    let distinct: std::collections::BTreeSet<&String> = ids.iter().collect();
    let (sample, answers, stored) = rt.block_on(async {
        let engine = engine(&dir.join("repeats.db"));
        let addr = serve(&engine, config.clone()).await;
        let now = (engine.now() / 1000) as i64;
        let (sample, answers) = send(addr, deliveries(&config, now, &ids), clients).await;
        let stored = engine
            .runs(RunFilter::default())
            .await
            .map_or(0, |r| r.len());
        wait_completed(&engine, distinct.len()).await;
        engine.shutdown();
        (sample, answers, stored)
    });
    let mut run_of: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    let mut conflicts = 0;
    for (id, answer) in &answers {
        let first = run_of.entry(id.as_str()).or_insert(answer.run.as_str());
        if *first != answer.run {
            conflicts += 1;
        }
    }
    let created = answers.iter().filter(|(_, a)| a.created).count();
    let distinct_runs: std::collections::BTreeSet<&str> = run_of.values().copied().collect();
    println!("| deliveries | distinct event ids | 201 (created) | runs in the store | distinct runs answered | ids answered with two runs | req/s | p50 | p99 |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {created} | {stored} | {} | {conflicts} | {:.0} | {} | {} |",
        ids.len(),
        distinct.len(),
        distinct_runs.len(),
        sample.rate(),
        ms(sample.percentile(0.5)),
        ms(sample.percentile(0.99)),
    );
    let ok = created == distinct.len()
        && stored == distinct.len()
        && distinct_runs.len() == distinct.len()
        && conflicts == 0;
    println!(
        "\nno run lost or duplicated: {}",
        if ok { "yes" } else { "NO" }
    );
    let _ = std::fs::remove_dir_all(&dir);
    if !ok {
        std::process::exit(1);
    }
}

async fn measure_direct(
    dir: &std::path::Path,
    round: usize,
    runs: usize,
    clients: usize,
) -> Sample {
    let engine = engine(&dir.join(format!("direct-{round}.db")));
    let sample = direct(&engine, runs, clients).await;
    wait_completed(&engine, runs).await;
    engine.shutdown();
    sample
}

async fn measure_http(
    dir: &std::path::Path,
    round: usize,
    runs: usize,
    clients: usize,
    config: &WebhookConfig,
) -> Sample {
    let engine = engine(&dir.join(format!("http-{round}.db")));
    let addr = serve(&engine, config.clone()).await;
    let ids: Vec<String> = (0..runs).map(|n| format!("evt_{n}")).collect();
    let now = (engine.now() / 1000) as i64;
    let (sample, answers) = send(addr, deliveries(config, now, &ids), clients).await;
    assert!(
        answers.iter().all(|(_, a)| a.created),
        "every delivery is new"
    );
    wait_completed(&engine, runs).await;
    engine.shutdown();
    sample
}

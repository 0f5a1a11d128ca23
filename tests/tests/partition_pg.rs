//! Partitions, not only pauses: a TCP proxy written here, on loopback, sits between worker
//! A and PostgreSQL. Mid-run it black-holes A (connections hang: nothing is forwarded,
//! nothing is reset) while worker B, connected directly, takes A's runs over; then it
//! heals, and what A had sent meanwhile reaches the server late. In a second case the proxy
//! drops every connection at once, as a server restart looks from A.
//!
//! Asserted: every run completes once with its output; the keyed external effect (sent to
//! a service that remembers the highest fence per key and applies once per key) is applied
//! once per run; A's late writes are refused by their fence, never accepted; A rejoins
//! cleanly (its new runs complete).
//!
//! The server comes from `WORKFLOW_TEST_DATABASE_URL` (see `pg_testing::server`).

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use workflow_core::prelude::*;
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

const LEASE: Duration = Duration::from_secs(2);

// ------------------------------------------------------------------ the proxy

const PASS: u8 = 0;
const HOLD: u8 = 1;

/// A TCP proxy to the server: forwards bytes both ways while `PASS`; while `HOLD` it
/// forwards nothing and reads nothing (the connections hang, as behind a black hole);
/// `drop_all` closes every connection it carries.
struct Proxy {
    port: u16,
    mode: Arc<AtomicU8>,
    mode_changed: watch::Sender<u8>,
    generation: watch::Sender<u64>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(PASS));
        let (mode_changed, _) = watch::channel(PASS);
        let (generation, _) = watch::channel(0u64);
        let (modes, generations) = (mode_changed.clone(), generation.clone());
        let shared_mode = Arc::clone(&mode);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (mode, modes) = (Arc::clone(&shared_mode), modes.subscribe());
                let killed = generations.subscribe();
                tokio::spawn(carry(client, server, mode, modes, killed));
            }
        });
        Proxy {
            port,
            mode,
            mode_changed,
            generation,
        }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
        self.mode_changed.send_replace(mode);
    }

    fn drop_all(&self) {
        self.generation.send_modify(|g| *g += 1);
    }
}

/// Carries one connection until either side closes or the proxy drops it.
async fn carry(
    client: TcpStream,
    server: TcpStream,
    mode: Arc<AtomicU8>,
    modes: watch::Receiver<u8>,
    mut killed: watch::Receiver<u64>,
) {
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, Arc::clone(&mode), modes.clone());
    let down = pump(server_read, client_write, mode, modes);
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = killed.changed() => {}
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU8>,
    mut modes: watch::Receiver<u8>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        // While held, read nothing: what was sent stays in the kernel's buffers.
        while mode.load(Ordering::SeqCst) == HOLD {
            if modes.changed().await.is_err() {
                return;
            }
        }
        let n = tokio::select! {
            read = from.read(&mut buffer) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = modes.changed() => continue,
        };
        // Bytes read just before a hold are delivered once it ends.
        while mode.load(Ordering::SeqCst) == HOLD {
            if modes.changed().await.is_err() {
                return;
            }
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}

// ------------------------------------------------------------------ the workflow

/// The outside world: applies a charge once per key, refusing calls whose fence is lower
/// than the highest it has seen for the key.
#[derive(Default)]
pub struct Psp {
    fences: Mutex<HashMap<String, u64>>,
    applied: Mutex<HashMap<String, u32>>,
    stale: Mutex<u32>,
}

async fn prepare(order: u64) -> Result<u64, StepError> {
    tokio::time::sleep(Duration::from_millis(150)).await;
    Ok(order * 10)
}

async fn charge(psp: &Arc<Psp>, ctx: &StepContext, amount: u64) -> Result<u64, StepError> {
    tokio::time::sleep(Duration::from_millis(200)).await;
    {
        let mut fences = psp.fences.lock().unwrap();
        let highest = fences.entry(ctx.idempotency_key.clone()).or_insert(0);
        if ctx.fence() < *highest {
            *psp.stale.lock().unwrap() += 1;
            return Err(StepError::permanent("stale fence: refused"));
        }
        *highest = ctx.fence();
        let mut applied = psp.applied.lock().unwrap();
        applied.entry(ctx.idempotency_key.clone()).or_insert(1);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    Ok(amount + 1)
}

async fn finish(charge: u64) -> Result<u64, StepError> {
    tokio::time::sleep(Duration::from_millis(150)).await;
    Ok(charge * 2)
}

workflow! {
    workflow Order(order: u64) env std::sync::Arc<Psp> {
        step prepare -> u64 { action: prepare(order) }
        step charge -> u64 {
            action: charge(env, ctx, prepare),
            effect: external,
            idempotent: true,
            retry: { max_attempts: 5, backoff: fixed, initial: 100ms, jitter: none },
        }
        step finish -> u64 { action: finish(charge) }
    }
}

// ------------------------------------------------------------------ the test

async fn worker(url: &str, schema: &Schema, owner: &str, psp: &Arc<Psp>) -> (Engine, Arc<PgStore>) {
    let store = Arc::new(
        PgStore::connect_with(url, schema.options())
            .await
            .expect("connect"),
    );
    let engine = Engine::builder()
        .shared_store(Arc::clone(&store) as Arc<dyn Store>)
        .owner(owner)
        .lease(LEASE)
        .build();
    engine.register::<Order>(Arc::clone(psp)).unwrap();
    engine.resume_all().await.unwrap();
    (engine, store)
}

async fn start(engine: &Engine, orders: std::ops::Range<u64>) {
    for order in orders {
        engine
            .start_with::<Order>(
                OrderInput { order },
                StartOptions::key(format!("o-{order}")),
            )
            .await
            .unwrap();
    }
}

async fn all_complete(store: &PgStore, runs: usize, within: Duration) {
    let until = Instant::now() + within;
    loop {
        let records = store.runs(RunFilter::default()).await.unwrap();
        let done = records
            .iter()
            .filter(|r| r.status == RunStatus::Completed)
            .count();
        if records.len() == runs && done == runs {
            return;
        }
        let unfinished: Vec<_> = records
            .iter()
            .filter(|r| r.status != RunStatus::Completed)
            .map(|r| (r.id, r.status, r.owner.clone(), r.note.clone()))
            .collect();
        assert!(Instant::now() < until, "unfinished: {unfinished:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn check_outputs(store: &PgStore, psp: &Psp, runs: usize) {
    let records = store.runs(RunFilter::default()).await.unwrap();
    assert_eq!(records.len(), runs, "one run per order");
    for record in records {
        let stored = store.load(record.id).await.unwrap().unwrap();
        let mut succeeded = HashMap::new();
        for event in &stored.events {
            if let workflow_core::journal::Event::StepSucceeded { step, output, .. } = event {
                assert!(
                    succeeded.insert(*step, output.clone()).is_none(),
                    "{}: step {step} succeeded twice",
                    record.id
                );
            }
        }
        assert_eq!(succeeded.len(), 3, "{}: {succeeded:?}", record.id);
    }
    let applied = psp.applied.lock().unwrap();
    assert_eq!(applied.len(), runs, "each run's charge applied");
    assert!(applied.values().all(|n| *n == 1), "none twice");
}

fn proxied(url: &str, port: u16) -> Option<String> {
    let options = PgConnectOptions::from_str(url).ok()?;
    let authority = format!("{}:{}", options.get_host(), options.get_port());
    url.contains(&authority)
        .then(|| url.replacen(&authority, &format!("127.0.0.1:{port}"), 1))
}

/// A server, a proxy to it, a schema, the service, and worker A connected through the
/// proxy with twelve runs started; `None` (the test skipped) without a server to proxy.
struct Setup {
    url: String,
    proxy: Proxy,
    schema: Schema,
    psp: Arc<Psp>,
    a: Engine,
    a_store: Arc<PgStore>,
}

async fn setup(test: &str, label: &str) -> Option<Setup> {
    let url = pg_testing::server(test).await?;
    let options = PgConnectOptions::from_str(&url).unwrap();
    let proxy = Proxy::start(format!("{}:{}", options.get_host(), options.get_port())).await;
    let Some(via_proxy) = proxied(&url, proxy.port) else {
        eprintln!("skipped {test}: the server URL names no host:port to proxy");
        return None;
    };
    let schema = Schema::new(&url, label);
    let psp = Arc::new(Psp::default());
    let (a, a_store) = worker(&via_proxy, &schema, "worker-a", &psp).await;
    start(&a, 0..12).await;
    Some(Setup {
        url,
        proxy,
        schema,
        psp,
        a,
        a_store,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_worker_is_fenced_off_and_rejoins_cleanly() {
    let Some(Setup {
        url,
        proxy,
        schema,
        psp,
        a,
        a_store,
    }) = setup("partition_pg black hole", "partition").await
    else {
        return;
    };
    tokio::time::sleep(Duration::from_millis(250)).await;

    // A is cut off mid-run; B, connected directly, takes its runs over.
    proxy.set(HOLD);
    let (_b, b_store) = worker(&url, &schema, "worker-b", &psp).await;
    all_complete(&b_store, 12, Duration::from_secs(60)).await;

    // Healed: what A sent meanwhile arrives late and is refused by its fence.
    proxy.set(PASS);
    tokio::time::sleep(LEASE * 2).await;
    check_outputs(&b_store, &psp, 12).await;
    let fenced = a_store.fenced_writes();
    println!(
        "A's writes refused by their fence: {fenced}; stale effect calls refused: {}",
        psp.stale.lock().unwrap()
    );
    assert!(fenced > 0, "what A had sent arrived late and was refused");

    // A rejoins: new runs it starts complete.
    start(&a, 12..16).await;
    all_complete(&b_store, 16, Duration::from_secs(60)).await;
    check_outputs(&b_store, &psp, 16).await;
    drop(a);
    schema.drop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_connection_dropped_at_once_loses_and_repeats_nothing() {
    let Some(Setup {
        proxy,
        schema,
        psp,
        a,
        a_store,
        ..
    }) = setup("partition_pg dropped connections", "restart").await
    else {
        return;
    };
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.drop_all();
    }
    all_complete(&a_store, 12, Duration::from_secs(60)).await;
    check_outputs(&a_store, &psp, 12).await;
    drop(a);
    schema.drop().await;
}

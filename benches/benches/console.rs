//! B20: the console on a large store. 1 000 000 finished runs (one in 1 000 cancelled, the
//! rest completed) and 10 000 running runs, each with a search value `customer`, and one
//! running run with a journal of 10 000 entries (a map of 5 000 items); the median latency
//! of the console's runs page and of `GET /api/runs`, each unfiltered, filtered by status
//! (a common one, a rare one, one no run has) and by a search key, and of that run's page,
//! over loopback HTTP, on SQLite and on PostgreSQL; then what exact counts per status
//! would cost (one `GROUP BY status` over the runs).
//!
//! SQLite is filled through the `Store` API directly (each run created with its journal,
//! a finished one finished in the same batch of concurrent writes), not by running the
//! workflows. PostgreSQL is filled by `COPY` with the rows the store writes, checked
//! against runs created through the API (see [`fill_pg`]), then analyzed. The server's
//! engine registers no workflow (as `workflow serve`).
//!
//! Run with `cargo bench -p benches --bench console`. Environment: `B20_FINISHED`
//! (default 1000000), `B20_RUNNING` (10000), `B20_JOURNAL` (10000 entries in the long
//! run), `B20_REQUESTS` (25 per measure), `B20_STORES` (`sqlite,postgres`; one of them
//! alone, e.g. `B20_STORES=postgres`), `WORKFLOW_TEST_DATABASE_URL` (PostgreSQL, default
//! `postgres://postgres@127.0.0.1:5432/test`; a schema of its own, dropped after, or the
//! one `B20_SCHEMA` names, filled when empty and kept).
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
use workflow_core::store::{checksum, Commit, NewRun, RunFilter, RunStatus, Store};
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

/// What run `n` ends as: the runs from `finished` on are running; of the finished ones,
/// one in [`CANCELLED_EVERY`] was cancelled (a rare status, spread over the whole store),
/// the others completed.
fn status(n: usize, finished: usize) -> RunStatus {
    if n >= finished {
        RunStatus::Running
    } else if n % CANCELLED_EVERY == CANCELLED_EVERY - 1 {
        RunStatus::Cancelled
    } else {
        RunStatus::Completed
    }
}

/// One finished run in this many was cancelled.
const CANCELLED_EVERY: usize = 1000;

/// Run `n`'s journal: its map of `items` items listed, each started and (all but the last
/// of a running or cancelled run) succeeded; a completed run's step succeeded, a cancelled
/// run's cancel; about two entries per item.
fn journal(n: usize, at: u64, status: RunStatus, items: usize) -> Vec<Event> {
    let items = items.max(1);
    let finished = status == RunStatus::Completed;
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
    if status == RunStatus::Cancelled {
        events.push(Event::Cancelled {
            by: READER.to_owned(),
            inbox: None,
            at,
        });
    }
    events
}

/// Records the spec the runs were started under.
async fn put_spec(store: &dyn Store, at: u64) {
    let spec = serde_json::to_string(Charge::spec()).unwrap_or_default();
    if let Err(error) = store
        .put_spec(Charge::FINGERPRINT, Charge::NAME, &spec, at)
        .await
    {
        panic!("put_spec: {error}");
    }
}

/// Creates run `n` through the store's API, with a journal of `items` items, and finishes
/// it as [`status`] says in a second write.
async fn create(store: &dyn Store, n: usize, at: u64, status: RunStatus, items: usize) -> RunId {
    let events = journal(n, at, status, items);
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
    if status != RunStatus::Running {
        let commit = Commit {
            status: Some((status, None)),
            ..Commit::events(created.id(), events.len() as u64, &[], at)
        };
        store
            .commit(commit)
            .await
            .unwrap_or_else(|e| panic!("finish: {e}"));
    }
    created.id()
}

/// Creates the runs through the store's API, 64 writes in flight at a time; the last one
/// has the long journal.
async fn fill(store: Arc<dyn Store>, finished: usize, running: usize, long: usize) -> RunId {
    let at = benches::now_ms();
    put_spec(&*store, at).await;
    let total = finished + running;
    let started = Instant::now();
    let batch = 64;
    let mut n = 0;
    while n < total {
        let mut writes = tokio::task::JoinSet::new();
        for n in n..(n + batch).min(total) {
            let store = Arc::clone(&store);
            writes.spawn(async move { create(&*store, n, at, status(n, finished), 1).await });
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
    let run = create(&*store, total, at, RunStatus::Running, long / 2).await;
    eprintln!(
        "  filled {} runs (one with about {long} journal entries) through the store's API in {:.1} s",
        total + 1,
        started.elapsed().as_secs_f64()
    );
    run
}

/// Rows in PostgreSQL's `COPY` text format, a batch of runs at a time: exactly the rows the
/// store writes for a run [`create`] makes (checked by [`check_copied`]).
#[derive(Default)]
struct Copied {
    runs: String,
    journal: String,
    search: String,
    count: usize,
}

/// A value of a `COPY` text row: backslash, tab and line ends escaped.
fn copy_text(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// The columns of `runs` the rows name (the others, lease and inbox columns, are left to
/// their defaults, as a creation without an owner leaves them).
const RUN_COPY_COLUMNS: &str = "id, workflow, fingerprint, status, create_nonce, journal_len, \
    created_at, updated_at, crc";

impl Copied {
    /// Run `n`'s rows under `id`: its `runs` row (the status it ends with, the time of its
    /// creation and of its end both `at`), its journal, its search value.
    fn push(&mut self, id: u64, n: usize, at: u64, status: RunStatus) {
        let events = journal(n, at, status, 1);
        let crc = checksum::RunRow {
            id: RunId(id),
            workflow: Charge::NAME,
            fingerprint: Charge::FINGERPRINT,
            status: status.as_str(),
            idempotency_key: None,
            note: None,
            parent: None,
            created_at: at,
            updated_at: at,
            inbox_cursor: 0,
        }
        .checksum();
        self.runs.push_str(&format!(
            "{id}\t{}\t{}\t{}\tb20-{n}\t{}\t{at}\t{at}\t{crc}\n",
            Charge::NAME,
            Charge::FINGERPRINT,
            status.as_str(),
            events.len(),
        ));
        for (seq, event) in events.iter().enumerate() {
            let text = serde_json::to_string(event).unwrap_or_else(|e| panic!("{e}"));
            let crc = checksum::entry(RunId(id), seq as u64, &text);
            self.journal
                .push_str(&format!("{id}\t{seq}\t{}\t{crc}\n", copy_text(&text)));
        }
        self.search
            .push_str(&format!("{id}\tcustomer\t{}\n", copy_text(&customer(n))));
        self.count += 1;
    }

    /// Writes the rows into the tables `prefix` names (`""`: the store's own), and empties
    /// the batch.
    async fn copy(&mut self, conn: &mut sqlx::PgConnection, prefix: &str) {
        let tables = [
            (format!("{prefix}runs ({RUN_COPY_COLUMNS})"), &self.runs),
            (
                format!("{prefix}journal (run_id, seq, event, crc)"),
                &self.journal,
            ),
            (
                format!("{prefix}run_search (run_id, name, value)"),
                &self.search,
            ),
        ];
        for (table, rows) in tables {
            if rows.is_empty() {
                continue;
            }
            let mut copy = conn
                .copy_in_raw(&format!("COPY {table} FROM STDIN"))
                .await
                .unwrap_or_else(|e| panic!("COPY {table}: {e}"));
            copy.send(rows.as_bytes())
                .await
                .unwrap_or_else(|e| panic!("COPY {table}: {e}"));
            copy.finish()
                .await
                .unwrap_or_else(|e| panic!("COPY {table}: {e}"));
        }
        *self = Copied::default();
    }
}

/// Moves the run id sequence on so the next run created through the API gets `next`.
async fn next_id(conn: &mut sqlx::PgConnection, next: u64) {
    sqlx::query("SELECT setval(pg_get_serial_sequence('runs', 'id'), $1)")
        .bind(next as i64 - 1)
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("setval: {e}"));
}

/// Fills a PostgreSQL store as [`fill`] does, but set-based: the runs' rows written by
/// `COPY` (100 000 runs a statement), except a few created through the store's API (the
/// first finished, the first cancelled and the first running run), whose rows are then
/// compared with the rows `COPY` would have written for them; a sample of the copied runs
/// is read back through the API. The last run, with the long journal, is created through
/// the API. Then `ANALYZE` of those tables, as autovacuum would after such a load.
async fn fill_pg(
    store: Arc<dyn Store>,
    conn: &mut sqlx::PgConnection,
    finished: usize,
    running: usize,
    long: usize,
) -> RunId {
    let at = benches::now_ms();
    put_spec(&*store, at).await;
    let total = finished + running;
    let started = Instant::now();
    let mut reference = vec![0, CANCELLED_EVERY - 1, finished];
    reference.retain(|n| *n < total);
    reference.dedup();
    let mut first = 0;
    let mut batch = Copied::default();
    for n in 0..total {
        if reference.contains(&n) {
            batch.copy(conn, "").await;
            if n > 0 {
                next_id(conn, first + n as u64).await;
            }
            let id = create(&*store, n, at, status(n, finished), 1).await;
            if n == 0 {
                first = id.0;
            }
            assert_eq!(id.0, first + n as u64, "run {n} got an unexpected id");
            continue;
        }
        batch.push(first + n as u64, n, at, status(n, finished));
        if batch.count == 100_000 {
            batch.copy(conn, "").await;
            eprintln!("  {} runs written", n + 1);
        }
    }
    batch.copy(conn, "").await;
    next_id(conn, first + total as u64).await;
    check_copied(&*store, conn, first, &reference, (finished, total), at).await;
    let run = create(&*store, total, at, RunStatus::Running, long / 2).await;
    assert_eq!(run.0, first + total as u64);
    // The store's tables only: a bare ANALYZE would take every schema of the database.
    conn.execute("ANALYZE runs, journal, run_search")
        .await
        .unwrap_or_else(|e| panic!("ANALYZE: {e}"));
    eprintln!(
        "  filled {} runs (one with about {long} journal entries) by COPY in {:.1} s",
        total + 1,
        started.elapsed().as_secs_f64()
    );
    run
}

/// Checks that the rows the store wrote for the runs `reference` names are the rows
/// [`Copied`] makes for them (all columns but the creation's nonce), that those runs have
/// no rows in the store's other per-run tables, and that copied runs read back through the
/// API as created.
async fn check_copied(
    store: &dyn Store,
    conn: &mut sqlx::PgConnection,
    first: u64,
    reference: &[usize],
    (finished, total): (usize, usize),
    at: u64,
) {
    let ids: Vec<i64> = reference
        .iter()
        .map(|n| (first + *n as u64) as i64)
        .collect();
    let mut copied = Copied::default();
    for (n, id) in reference.iter().zip(&ids) {
        copied.push(*id as u64, *n, at, status(*n, finished));
    }
    conn.execute(
        "CREATE TEMP TABLE b20_runs (LIKE runs INCLUDING DEFAULTS);
         CREATE TEMP TABLE b20_journal (LIKE journal INCLUDING DEFAULTS);
         CREATE TEMP TABLE b20_run_search (LIKE run_search INCLUDING DEFAULTS);",
    )
    .await
    .unwrap_or_else(|e| panic!("temp tables: {e}"));
    copied.copy(conn, "b20_").await;
    for (table, key) in [
        ("runs", "id"),
        ("journal", "run_id"),
        ("run_search", "run_id"),
    ] {
        let rows = |from: &str| {
            format!("SELECT to_jsonb(t) - 'create_nonce' FROM {from} t WHERE t.{key} = ANY($1)")
        };
        let (store_rows, copy_rows) = (rows(table), rows(&format!("b20_{table}")));
        let differ: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM (({store_rows} EXCEPT ALL {copy_rows})
                                   UNION ALL ({copy_rows} EXCEPT ALL {store_rows})) d"
        ))
        .bind(&ids)
        .fetch_one(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("compare {table}: {e}"));
        let written: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {table} WHERE {key} = ANY($1)"
        ))
        .bind(&ids)
        .fetch_one(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("count {table}: {e}"));
        assert!(written > 0, "the store wrote no {table} rows");
        assert_eq!(
            differ, 0,
            "{table}: the copied rows differ from the store's own"
        );
    }
    for table in [
        "inbox",
        "dead_letters",
        "open_tasks",
        "flow_gates",
        "flow_slots",
        "flow_waits",
    ] {
        let written: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {table} WHERE run_id = ANY($1)"
        ))
        .bind(&ids)
        .fetch_one(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("count {table}: {e}"));
        assert_eq!(
            written, 0,
            "the store wrote {table} rows, which COPY does not"
        );
    }
    // Copied runs of each status, read back through the API (checksums verified).
    let sample = [1, 2 * CANCELLED_EVERY - 1, finished / 2, total - 1];
    for n in sample
        .into_iter()
        .filter(|n| *n < total && !reference.contains(n))
    {
        let Some(run) = store
            .load(RunId(first + n as u64))
            .await
            .unwrap_or_else(|e| panic!("load a copied run: {e}"))
        else {
            panic!("copied run {n} is missing");
        };
        assert_eq!(run.record.status, status(n, finished), "run {n}");
        assert_eq!(
            run.events,
            journal(n, at, status(n, finished), 1),
            "run {n}"
        );
    }
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
async fn timed(addr: SocketAddr, path: &str, requests: usize, check: &dyn Fn(&str) -> bool) -> f64 {
    let mut samples = Vec::with_capacity(requests);
    for _ in 0..requests {
        let (took, body) = get(addr, READER, path).await;
        assert!(check(&body), "{path}: an unexpected answer: {body:.2000}");
        samples.push(took);
    }
    ms(median(samples))
}

/// What an answer must hold to count.
type Check<'a> = &'a dyn Fn(&str) -> bool;

async fn measure(label: &str, store: Arc<dyn Store>, long: RunId, requests: usize) {
    let engine = Engine::builder().shared_store(store).intake_only().build();
    let addr = serve(&engine).await;
    let page = |b: &str| b.contains("id=\"runs\"");
    let none = |b: &str| b.contains("id=\"empty\"");
    let api = |b: &str| b.contains("\"runs\":[{");
    let api_none = |b: &str| b.contains("\"runs\":[]");
    let run_page = format!("/console/runs/{long}");
    // What is measured: a path, what its answer holds, the target (ms). Cancelled runs are
    // one in 1 000 of the finished ones, spread over the store; no run failed, so a
    // listing of failed runs finds none.
    let cases: [(&str, Check<'_>, f64); 10] = [
        ("/console/runs", &page, 50.0),
        ("/console/runs?status=completed", &page, 50.0),
        ("/console/runs?status=cancelled", &page, 50.0),
        ("/console/runs?status=failed", &none, 50.0),
        ("/console/runs?where=customer:c-42", &page, 50.0),
        ("/api/runs?status=completed", &api, 50.0),
        ("/api/runs?status=cancelled", &api, 50.0),
        ("/api/runs?status=failed", &api_none, 50.0),
        ("/api/runs?where=customer:c-42", &api, 50.0),
        (
            &run_page,
            &|b: &str| b.contains("id=\"journal-entries\""),
            100.0,
        ),
    ];
    for (path, check, target) in cases {
        let took = timed(addr, path, requests, check).await;
        let verdict = if took <= target { "meets" } else { "MISSES" };
        println!("B20 {label}: {path:<36} {took:>7.1} ms  ({verdict} {target:.0} ms)");
    }
    println!("B20 {label}: medians of {requests} requests each");
    engine.shutdown();
}

/// What exact counts per status would cost: the median of 5 counts of every run by status
/// (`GROUP BY status`, the statement a store would need), printed beside the pages.
fn print_counts_cost(label: &str, samples: Vec<std::time::Duration>, counts: &[(String, i64)]) {
    println!(
        "B20 {label}: exact counts per status ({counts:?}) by one GROUP BY: {:.1} ms (median of 5)",
        ms(median(samples))
    );
}

const COUNT_BY_STATUS: &str = "SELECT status, count(*) FROM runs GROUP BY status ORDER BY status";

/// The run listing's one statement for every combination of filters, as the stores had it
/// before a statement per combination (SQLite's; PostgreSQL's casts its parameters), for a
/// baseline in the same run: a page of 50 by status.
const LISTING_BEFORE: &str = "SELECT id FROM runs WHERE (?1 IS NULL OR workflow = ?1) \
    AND (?2 IS NULL OR status = ?2) AND (?3 IS NULL OR id < ?3) ORDER BY id DESC LIMIT ?4";
const LISTING_BEFORE_PG: &str = "SELECT id FROM runs WHERE ($1::text IS NULL OR workflow = $1) \
    AND ($2::text IS NULL OR status = $2) AND ($3::bigint IS NULL OR id < $3) \
    ORDER BY id DESC LIMIT $4";
/// The statement the stores now choose for a filter by status alone.
const LISTING_NOW: &str = "SELECT id FROM runs WHERE status = ?1 ORDER BY id DESC LIMIT ?2";
const LISTING_NOW_PG: &str = "SELECT id FROM runs WHERE status = $1 ORDER BY id DESC LIMIT $2";

/// Prints the medians of the listing by `status` before and now (10 executions each of a
/// prepared statement: PostgreSQL plans a prepared statement generically from the sixth).
fn print_listing(
    label: &str,
    status: &str,
    before: Vec<std::time::Duration>,
    now: Vec<std::time::Duration>,
) {
    let (before, now) = (ms(median(before)), ms(median(now)));
    println!(
        "B20 {label}: a page of 50 runs by status {status}: the statement before {before:.2} ms, \
         now {now:.2} ms ({:.0}x faster; medians of 10, SQL alone)",
        before / now.max(0.001)
    );
}

fn sqlite_listing(conn: &rusqlite::Connection, status: &str) {
    let time = |sql: &str, params: &[&dyn rusqlite::ToSql]| {
        let mut statement = conn.prepare_cached(sql).unwrap_or_else(|e| panic!("{e}"));
        (0..10)
            .map(|_| {
                let started = Instant::now();
                let ids = statement
                    .query_map(params, |row| row.get::<_, i64>(0))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<i64>>>())
                    .unwrap_or_else(|e| panic!("{e}"));
                let took = started.elapsed();
                assert!(ids.len() <= 50);
                took
            })
            .collect::<Vec<_>>()
    };
    let none: Option<i64> = None;
    let before = time(LISTING_BEFORE, &[&none, &status, &none, &50]);
    let now = time(LISTING_NOW, &[&status, &50]);
    print_listing("SQLite", status, before, now);
}

async fn pg_listing(conn: &mut sqlx::PgConnection, status: &str) {
    let mut samples = [Vec::new(), Vec::new()];
    for (i, sql) in [LISTING_BEFORE_PG, LISTING_NOW_PG].into_iter().enumerate() {
        for _ in 0..10 {
            let started = Instant::now();
            let query = sqlx::query_scalar::<_, i64>(sql);
            let query = if i == 0 {
                query
                    .bind(None::<String>)
                    .bind(status)
                    .bind(None::<i64>)
                    .bind(50_i64)
            } else {
                query.bind(status).bind(50_i64)
            };
            let ids = query
                .fetch_all(&mut *conn)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            samples[i].push(started.elapsed());
            assert!(ids.len() <= 50);
        }
    }
    let [before, now] = samples;
    print_listing("PostgreSQL", status, before, now);
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
    {
        let conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| panic!("open: {e}"));
        let (mut samples, mut counts) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let started = Instant::now();
            let mut statement = conn
                .prepare(COUNT_BY_STATUS)
                .unwrap_or_else(|e| panic!("count: {e}"));
            counts = statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                .and_then(|rows| rows.collect::<rusqlite::Result<Vec<(String, i64)>>>())
                .unwrap_or_else(|e| panic!("count: {e}"));
            samples.push(started.elapsed());
        }
        print_counts_cost("SQLite", samples, &counts);
        for status in ["cancelled", "failed"] {
            sqlite_listing(&conn, status);
        }
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

async fn postgres(finished: usize, running: usize, long: usize, requests: usize) {
    let url = std::env::var("WORKFLOW_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    // `B20_SCHEMA` names a schema to fill once and keep: a later run with the same name
    // measures the store it holds (its newest run being the long one) without filling it.
    let kept = std::env::var("B20_SCHEMA").ok();
    let schema = kept
        .clone()
        .unwrap_or_else(|| format!("wfb_b20_{}", std::process::id()));
    let options = PgOptions {
        schema: schema.clone(),
        max_connections: 16,
        ..PgOptions::default()
    };
    match PgStore::connect_with(&url, options).await {
        Ok(store) => {
            let store: Arc<dyn Store> = Arc::new(store);
            let mut conn = sqlx::PgConnection::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("connect: {e}"));
            conn.execute(format!("SET search_path TO {schema}").as_str())
                .await
                .unwrap_or_else(|e| panic!("search_path: {e}"));
            let newest = store
                .runs(RunFilter {
                    limit: Some(1),
                    ..RunFilter::default()
                })
                .await
                .unwrap_or_else(|e| panic!("runs: {e}"));
            let run = match newest.first() {
                Some(newest) if kept.is_some() => {
                    eprintln!("  measuring the runs already in schema {schema}");
                    conn.execute("ANALYZE runs, journal, run_search")
                        .await
                        .unwrap_or_else(|e| panic!("ANALYZE: {e}"));
                    newest.id
                }
                _ => fill_pg(Arc::clone(&store), &mut conn, finished, running, long).await,
            };
            measure("PostgreSQL", store, run, requests).await;
            let (mut samples, mut counts) = (Vec::new(), Vec::new());
            for _ in 0..5 {
                let started = Instant::now();
                counts = sqlx::query_as::<_, (String, i64)>(COUNT_BY_STATUS)
                    .fetch_all(&mut conn)
                    .await
                    .unwrap_or_else(|e| panic!("count: {e}"));
                samples.push(started.elapsed());
            }
            print_counts_cost("PostgreSQL", samples, &counts);
            for status in ["cancelled", "failed"] {
                pg_listing(&mut conn, status).await;
            }
            let _ = conn.close().await;
        }
        Err(error) => eprintln!("B20 PostgreSQL skipped: no server at {url}: {error}"),
    }
    if kept.is_some() {
        return;
    }
    if let Ok(mut conn) = sqlx::PgConnection::connect(&url).await {
        let _ = conn
            .execute(format!("DROP SCHEMA IF EXISTS {schema} CASCADE").as_str())
            .await;
        let _ = conn.close().await;
    }
}

fn main() {
    let finished = benches::setting("B20_FINISHED", 1_000_000);
    let running = benches::setting("B20_RUNNING", 10_000);
    let long = benches::setting("B20_JOURNAL", 10_000);
    let requests = benches::setting("B20_REQUESTS", 25).max(1);
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

//! B15: task lists on a large store. 100 000 finished and 10 000 running runs, of which
//! 1 000 wait on an open human task; the median latency of the inbox's first page
//! (`GET /inbox`) and of `GET /api/tasks` (its default page of 100) over loopback HTTP,
//! on SQLite and on PostgreSQL, against the way task lists were made before the open-task
//! index, measured in the same run: every running run loaded and replayed
//! (`admin::open_tasks`, kept callable for this), then filtered to the caller.
//!
//! The store is filled through the `Store` API directly (runs created with their journal
//! and finished in the same batch of concurrent writes), not by running 110 000 workflows.
//! The server's engine registers no workflow (as `workflow serve`): it drives nothing,
//! and reads the specs the store records.
//!
//! Run with `cargo bench -p benches --bench inbox`. Environment: `B15_FINISHED` (default
//! 100000), `B15_RUNNING` (10000), `B15_OPEN` (1000), `B15_REQUESTS` (25 per measure),
//! `B15_STORES` (`sqlite,postgres`), `WORKFLOW_TEST_DATABASE_URL` (PostgreSQL, default
//! `postgres://postgres@127.0.0.1:5432/test`; a schema of its own, dropped after, or the
//! one `B15_SCHEMA` names, filled when empty and kept).

#[path = "support/http.rs"]
mod http;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{get, median, ms};

use serde_json::json;
use sqlx::{Connection, Executor};
use workflow_core::journal::Event;
use workflow_core::store::{
    Claim, Claimant, Commit, Created, DeadLetter, InboxItem, Lease, Message, MissedTicks, NewRun,
    OpenTask, PurgeFilter, RunFilter, RunRecord, RunStatus, ScheduleChange, ScheduleRow,
    SpecRecord, Store, StoreError, StoredRun, Submitted, TaskCount, TaskFilter,
};
use workflow_core::{admin, BoxFuture, Engine, RunId, Workflow};
use workflow_postgres::{PgOptions, PgStore};
use workflow_server::{Server, TrustedHeader};
use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous};

mod flows {
    use workflow_core::{workflow, Approval, StepError};

    pub async fn assess(amount: u64) -> Result<u64, StepError> {
        Ok(amount)
    }

    pub async fn pay(amount: u64, approve: Approval) -> Result<bool, StepError> {
        Ok(approve.approved && amount > 0)
    }

    workflow! {
        /// A refund a person approves.
        pub workflow Refund(amount: u64) {
            step assess -> u64 { action: assess(amount), }
            human approve -> Approval {
                assignee: "finance",
                depends_on: [assess],
                timeout: 24h,
                on_timeout: abort,
                prompt: "Refund this amount?",
            }
            step pay -> bool { action: pay(amount, approve), }
        }
    }
}

use flows::Refund;

/// Who reads the inbox: admitted for `finance` by the default authorizer.
const READER: &str = "ana@finance";

fn started(n: usize, at: u64) -> Event {
    Event::RunStarted {
        workflow: Refund::NAME.to_owned(),
        fingerprint: Refund::FINGERPRINT.to_owned(),
        input: json!({ "amount": 100 + n }),
        seed: n as u64,
        trace_id: format!("{n:016x}"),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at,
    }
}

/// The journal of run `n`: assessed, and (when `open`) waiting on its approval; a
/// finished run was approved and paid as well.
fn journal(n: usize, at: u64, state: RunState) -> Vec<Event> {
    let mut events = vec![
        started(n, at),
        Event::AttemptStarted {
            step: 0,
            attempt: 1,
            at,
        },
        Event::StepSucceeded {
            step: 0,
            output: json!(100 + n),
            at,
        },
    ];
    if state == RunState::Running {
        // Waiting on something else than a person: an attempt of `pay` in flight.
        events.push(Event::AttemptStarted {
            step: 2,
            attempt: 1,
            at,
        });
        return events;
    }
    events.push(Event::TaskOpened {
        step: 1,
        assignee: "finance".to_owned(),
        prompt: Some("Refund this amount?".to_owned()),
        // Deadlines spread over a day, so the page is an ordered slice of the index.
        deadline: at + 3_600_000 + (n as u64 * 7_919) % 86_400_000,
        at,
    });
    if state == RunState::Finished {
        events.push(Event::TaskDecided {
            step: 1,
            by: READER.to_owned(),
            decision: json!({ "approved": true, "by": READER, "comment": null }),
            inbox: None,
            via: None,
            at,
        });
        events.push(Event::StepSucceeded {
            step: 2,
            output: json!(true),
            at,
        });
    }
    events
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunState {
    Finished,
    Running,
    Open,
}

/// Creates the runs, `batch` writes in flight at a time.
async fn fill(store: Arc<dyn Store>, finished: usize, running: usize, open: usize) {
    let spec = serde_json::to_string(Refund::spec()).unwrap_or_default();
    let at = benches::now_ms();
    if let Err(error) = store
        .put_spec(Refund::FINGERPRINT, Refund::NAME, &spec, at)
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
            let state = if n < finished {
                RunState::Finished
            } else if n < finished + open {
                RunState::Open
            } else {
                RunState::Running
            };
            writes.spawn(async move {
                let events = journal(n, at, state);
                let created = store
                    .create_run(NewRun {
                        workflow: Refund::NAME,
                        fingerprint: Refund::FINGERPRINT,
                        idempotency_key: None,
                        events: &events,
                        parent: None,
                        owner: None,
                        supersedes: None,
                        search: &[],
                        at,
                    })
                    .await
                    .unwrap_or_else(|e| panic!("create: {e}"));
                if state == RunState::Finished {
                    let done = Commit {
                        status: Some((RunStatus::Completed, None)),
                        ..Commit::events(created.id(), events.len() as u64, &[], at)
                    };
                    store
                        .commit(done)
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
    }
    eprintln!(
        "  filled {total} runs ({open} with an open task) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

async fn serve(engine: &Engine) -> SocketAddr {
    let router = Server::new(engine.clone())
        .authenticator(TrustedHeader::new())
        .router();
    http::serve(router).await
}

/// The store as stores without [`Store::load_many`] of their own read a page: every method
/// passed to the inner store except `load_many`, left to the trait's default (one `load`
/// per run). The baseline of the page's run reads, measured on the same store.
struct OneByOne(Arc<dyn Store>);

impl Store for OneByOne {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        self.0.create_run(run)
    }
    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.commit(commit)
    }
    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        self.0.load(run)
    }
    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        self.0.runs(filter)
    }
    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        self.0.claim(claim)
    }
    fn renew<'a>(
        &'a self,
        claimant: Claimant<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        self.0.renew(claimant)
    }
    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.release(owner, runs)
    }
    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: u64,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>> {
        self.0.submit(run, message, key, at)
    }
    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>> {
        self.0.inbox(run, after)
    }
    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>> {
        self.0.pending_inbox(after)
    }
    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        self.0.dead_letters()
    }
    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: u64,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.put_spec(fingerprint, workflow, spec_json, at)
    }
    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.0.spec(fingerprint)
    }
    fn specs<'a>(
        &'a self,
        workflow: &'a str,
    ) -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>> {
        self.0.specs(workflow)
    }
    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_core::schedule::Schedule,
        at: u64,
    ) -> BoxFuture<'a, Result<ScheduleRow, StoreError>> {
        self.0.put_schedule(id, workflow, schedule, at)
    }
    fn schedules(&self) -> BoxFuture<'_, Result<Vec<ScheduleRow>, StoreError>> {
        self.0.schedules()
    }
    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.update_schedule(id, version, change)
    }
    fn purge(&self, filter: PurgeFilter) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.0.purge(filter)
    }
    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.delete_schedule(id)
    }
    fn open_tasks(&self, filter: TaskFilter) -> BoxFuture<'_, Result<Vec<OpenTask>, StoreError>> {
        self.0.open_tasks(filter)
    }
    fn task_counts(&self) -> BoxFuture<'_, Result<Vec<TaskCount>, StoreError>> {
        self.0.task_counts()
    }
    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<MissedTicks>, StoreError>> {
        self.0.missed_ticks(id, limit)
    }
    fn shared(&self) -> bool {
        self.0.shared()
    }
}

/// The latencies of `requests` first inbox pages and `GET /api/tasks` of the engine
/// served at `addr`, added to `inbox` and `tasks`.
async fn pages(
    addr: SocketAddr,
    requests: usize,
    inbox: &mut Vec<Duration>,
    tasks: &mut Vec<Duration>,
) {
    for _ in 0..requests {
        inbox.push(get(addr, READER, "/inbox").await.0);
        tasks.push(get(addr, READER, "/api/tasks").await.0);
    }
}

/// The store's parts of `GET /api/tasks` timed alone, each on its own (medians of
/// `requests`): the counts behind the scope, the index's page, the page's runs read in one
/// statement, and the whole page as `admin::loaded_task_page` makes it (index, runs, spec
/// and each run's replay). The rest of a request is the handler's presentation, JSON and
/// HTTP.
async fn parts(label: &str, store: &dyn Store, requests: usize) {
    let filter = TaskFilter {
        workflows: Some(vec![Refund::NAME.to_owned()]),
        assignees: Some(vec!["finance".to_owned()]),
        limit: Some(100),
        ..TaskFilter::default()
    };
    let (mut counts, mut index, mut runs, mut page) = (vec![], vec![], vec![], vec![]);
    for _ in 0..requests {
        let started = Instant::now();
        let _ = store.task_counts().await;
        counts.push(started.elapsed());
        let started = Instant::now();
        let rows = store
            .open_tasks(filter.clone())
            .await
            .unwrap_or_else(|e| panic!("open_tasks: {e}"));
        index.push(started.elapsed());
        let ids: Vec<RunId> = rows.iter().map(|row| row.run).collect();
        let started = Instant::now();
        let loaded = store
            .load_many(&ids)
            .await
            .unwrap_or_else(|e| panic!("load_many: {e}"));
        runs.push(started.elapsed());
        assert_eq!(loaded.len(), ids.len());
        let started = Instant::now();
        let _ = admin::loaded_task_page(store, filter.clone()).await;
        page.push(started.elapsed());
    }
    println!(
        "B15 {label}: parts of GET /api/tasks alone: task counts {:.2} ms, index page {:.2} ms, \
         100 runs read {:.2} ms, the page with replays {:.2} ms",
        ms(median(counts)),
        ms(median(index)),
        ms(median(runs)),
        ms(median(page)),
    );
}

/// The measures on one filled store.
async fn measure(label: &str, store: Arc<dyn Store>, open: usize, requests: usize) {
    let engine = Engine::builder().shared_store(Arc::clone(&store)).build();
    let addr = serve(&engine).await;
    // Warm-up, and a check that the pages hold what they should.
    let (_, page) = get(addr, READER, "/inbox").await;
    assert!(
        page.contains(&format!("{open} open tasks")),
        "the inbox counts {open} tasks"
    );
    let (_, api) = get(addr, READER, "/api/tasks").await;
    let api: serde_json::Value = serde_json::from_str(&api).unwrap_or_default();
    assert_eq!(api["total"], open);
    assert_eq!(api["tasks"].as_array().map_or(0, Vec::len), 100.min(open));

    let (mut inbox, mut tasks) = (Vec::new(), Vec::new());
    pages(addr, requests, &mut inbox, &mut tasks).await;
    // The same pages over the same store read one run at a time (`load_many` left to the
    // trait's default), measured between two halves of the pages above so both see the
    // same load.
    let one_by_one = Engine::builder()
        .shared_store(Arc::new(OneByOne(Arc::clone(&store))) as Arc<dyn Store>)
        .build();
    let slow_addr = serve(&one_by_one).await;
    let _ = get(slow_addr, READER, "/inbox").await;
    let (mut slow_inbox, mut slow_tasks) = (Vec::new(), Vec::new());
    pages(slow_addr, requests, &mut slow_inbox, &mut slow_tasks).await;
    pages(addr, requests, &mut inbox, &mut tasks).await;
    let (inbox, tasks) = (median(inbox), median(tasks));
    let (slow_inbox, slow_tasks) = (median(slow_inbox), median(slow_tasks));
    parts(label, &*store, requests).await;
    // Before the index: every running run loaded and replayed, then filtered.
    let mut replay = Vec::new();
    for _ in 0..requests.min(5) {
        let started = Instant::now();
        let all = admin::open_tasks(&*store)
            .await
            .unwrap_or_else(|e| panic!("open_tasks: {e}"));
        let mine = all
            .iter()
            .filter(|t| engine.authorizes(&t.assignee, READER))
            .count();
        replay.push(started.elapsed());
        assert_eq!(mine, open);
    }
    let replay = median(replay);
    println!(
        "B15 {label}: runs read one at a time: GET /inbox {:.1} ms, GET /api/tasks {:.1} ms \
         ({:.1}× and {:.1}× the page read in one)",
        ms(slow_inbox),
        ms(slow_tasks),
        ms(slow_inbox) / ms(inbox),
        ms(slow_tasks) / ms(tasks),
    );
    println!(
        "B15 {label}: GET /inbox {:.1} ms, GET /api/tasks {:.1} ms (medians of {}); \
         before (replay every running run) {:.0} ms: {:.0}× and {:.0}× faster",
        ms(inbox),
        ms(tasks),
        2 * requests,
        ms(replay),
        ms(replay) / ms(inbox),
        ms(replay) / ms(tasks),
    );
}

async fn sqlite(finished: usize, running: usize, open: usize, requests: usize) {
    let dir = option_env!("CARGO_TARGET_TMPDIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let path = dir.join(format!("b15-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    {
        // Filled without syncing (the measure reads only), then reopened as served.
        let options = SqliteOptions {
            synchronous: Synchronous::Off,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open_with(&path, options)
            .unwrap_or_else(|e| panic!("open the store: {e}"));
        fill(Arc::new(store), finished, running, open).await;
    }
    let store = SqliteStore::open(&path).unwrap_or_else(|e| panic!("reopen the store: {e}"));
    measure("SQLite", Arc::new(store), open, requests).await;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

async fn postgres(finished: usize, running: usize, open: usize, requests: usize) {
    let url = std::env::var("WORKFLOW_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    // `B15_SCHEMA` names a schema to fill once and keep: a later run with the same name
    // measures the store it holds without filling it again (for plans and profiles).
    let kept = std::env::var("B15_SCHEMA").ok();
    let schema = kept
        .clone()
        .unwrap_or_else(|| format!("wfb_b15_{}", std::process::id()));
    let options = PgOptions {
        schema: schema.clone(),
        max_connections: 16,
        ..PgOptions::default()
    };
    match PgStore::connect_with(&url, options).await {
        Ok(store) => {
            let store: Arc<dyn Store> = Arc::new(store);
            let filled = kept.is_some()
                && store
                    .runs(RunFilter {
                        limit: Some(1),
                        ..RunFilter::default()
                    })
                    .await
                    .is_ok_and(|runs| !runs.is_empty());
            if filled {
                eprintln!("  measuring the runs already in schema {schema}");
            } else {
                fill(Arc::clone(&store), finished, running, open).await;
            }
            measure("PostgreSQL", store, open, requests).await;
        }
        Err(error) => eprintln!("B15 PostgreSQL skipped: no server at {url}: {error}"),
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
    let finished = benches::setting("B15_FINISHED", 100_000);
    let running = benches::setting("B15_RUNNING", 10_000);
    let open = benches::setting("B15_OPEN", 1_000).min(running);
    let requests = benches::setting("B15_REQUESTS", 25).max(1);
    let stores = std::env::var("B15_STORES").unwrap_or_else(|_| "sqlite,postgres".to_owned());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(async {
        if stores.contains("sqlite") {
            sqlite(finished, running, open, requests).await;
        }
        if stores.contains("postgres") {
            postgres(finished, running, open, requests).await;
        }
    });
}

//! Queued starts with real processes on PostgreSQL: an intake-only process queues N jobs
//! (a repeated key names the same run) and drives none of them; two worker processes
//! admit them (at most three live each) and drive them; one worker is killed with SIGKILL
//! while it drives runs, and the other takes them over. Every job completes exactly once,
//! the work is spread over both workers, and the killed worker's runs are finished by the
//! other.
//!
//! The server comes from `WORKFLOW_TEST_DATABASE_URL` (see `pg_testing::server`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use workflow_core::journal::{Event, Value};
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_core::RunId;
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;

const JOBS: u32 = 24;
const LEASE_MS: u64 = 2_000;

struct Node {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Node {
    fn spawn(args: &[&str]) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_queue_node"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a process");
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Node { child, lines }
    }

    fn wait_for_line(&mut self, prefix: &str, within: Duration) {
        let until = Instant::now() + within;
        loop {
            if self
                .lines
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.starts_with(prefix))
            {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("the process ended ({status}) before `{prefix}`");
            }
            assert!(Instant::now() < until, "no line `{prefix}`");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (`-STOP`, `-CONT`) to the process.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success(), "kill {signal}");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Every run: its row and journal.
async fn runs(store: &PgStore) -> Vec<(RunId, RunStatus, Option<String>, Vec<Event>)> {
    let mut all = Vec::new();
    for record in store.runs(RunFilter::default()).await.unwrap() {
        let stored = store.load(record.id).await.unwrap().unwrap();
        all.push((record.id, record.status, record.owner, stored.events));
    }
    all
}

/// Who finished the run's step, by its output, when it did.
fn done_by(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::StepSucceeded {
                output: Value::String(name),
                ..
            } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_intake_process_queues_and_two_workers_drive_each_run_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let Some(url) = runtime.block_on(pg_testing::server("queued_pg")) else {
        return;
    };
    let schema = Schema::new(&url, "queued");
    let store = runtime.block_on(schema.store());
    let lease = LEASE_MS.to_string();
    let jobs = JOBS.to_string();

    let mut intake = Node::spawn(&[&url, schema.name(), "intake", &jobs]);
    intake.wait_for_line(&format!("queued {JOBS}"), Duration::from_secs(60));
    // Nobody drives them: the intake process is up, and never claims one.
    std::thread::sleep(Duration::from_millis(1_500));
    let queued = runtime.block_on(runs(&store));
    assert_eq!(queued.len(), JOBS as usize, "one run per key");
    for (run, status, owner, events) in &queued {
        assert_eq!(*status, RunStatus::Running, "{run}");
        assert_eq!(*owner, None, "{run} is nobody's");
        assert_eq!(events.len(), 1, "{run}: nothing but its start");
    }

    let mut a = Node::spawn(&[&url, schema.name(), "worker", "worker-a", &lease]);
    let mut b = Node::spawn(&[&url, schema.name(), "worker", "worker-b", &lease]);
    a.wait_for_line("ready", Duration::from_secs(60));
    b.wait_for_line("ready", Duration::from_secs(60));

    // Kill A once it finished some runs and drives others.
    let until = Instant::now() + Duration::from_secs(60);
    let held_by_a: Vec<RunId> = loop {
        let now = runtime.block_on(runs(&store));
        let finished_by_a = now
            .iter()
            .filter(|(.., events)| done_by(events) == ["worker-a"])
            .count();
        let held: Vec<RunId> = now
            .iter()
            .filter(|(_, status, owner, events)| {
                *status == RunStatus::Running
                    && owner.as_deref() == Some("worker-a")
                    && done_by(events).is_empty()
            })
            .map(|(run, ..)| *run)
            .collect();
        if finished_by_a >= 1 && !held.is_empty() {
            // Frozen first, so what it holds stays held while we look (a commit it had
            // sent lands meanwhile); if it finished them all in between, it goes on.
            a.signal("-STOP");
            std::thread::sleep(Duration::from_millis(200));
            let after = runtime.block_on(runs(&store));
            let still: Vec<RunId> = after
                .iter()
                .filter(|(run, _, owner, events)| {
                    held.contains(run)
                        && owner.as_deref() == Some("worker-a")
                        && done_by(events).is_empty()
                })
                .map(|(run, ..)| *run)
                .collect();
            if still.is_empty() {
                a.signal("-CONT");
                continue;
            }
            a.kill();
            break still;
        }
        assert!(Instant::now() < until, "worker-a never drove a run");
        std::thread::sleep(Duration::from_millis(50));
    };

    assert!(!held_by_a.is_empty(), "worker-a died holding runs");
    let until = Instant::now() + Duration::from_secs(90);
    let finished = loop {
        let now = runtime.block_on(runs(&store));
        if now
            .iter()
            .all(|(_, status, ..)| *status != RunStatus::Running)
        {
            break now;
        }
        let left: Vec<String> = now
            .iter()
            .filter(|(_, status, ..)| *status == RunStatus::Running)
            .map(|(run, _, owner, events)| format!("{run} {owner:?} {}", events.len()))
            .collect();
        assert!(Instant::now() < until, "not every run finished: {left:?}");
        std::thread::sleep(Duration::from_millis(100));
    };

    let mut by_worker: BTreeMap<String, usize> = BTreeMap::new();
    for (run, status, _, events) in &finished {
        assert_eq!(*status, RunStatus::Completed, "{run}");
        let done = done_by(events);
        assert_eq!(
            done.len(),
            1,
            "{run} completed its step exactly once: {done:?}"
        );
        *by_worker.entry(done[0].clone()).or_default() += 1;
    }
    assert_eq!(by_worker.values().sum::<usize>(), JOBS as usize);
    assert_eq!(
        by_worker.keys().map(String::as_str).collect::<Vec<_>>(),
        ["worker-a", "worker-b"],
        "spread over both workers (never the intake): {by_worker:?}"
    );
    for run in &held_by_a {
        let (.., events) = finished.iter().find(|(r, ..)| r == run).unwrap();
        assert_eq!(
            done_by(events),
            ["worker-b"],
            "{run}, held by the killed worker, was taken over"
        );
    }
    intake.kill();
    b.kill();
    runtime.block_on(schema.drop());
}

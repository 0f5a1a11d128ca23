//! Fencing that reaches the outside world, with real processes on PostgreSQL: worker A
//! sends an unguarded external effect's request and is frozen with SIGSTOP while the
//! request is on its way and while its action waits inside the effect; worker B takes the
//! run over and finds the effect's outcome unknown (a dead letter that says when A's lease
//! ended); an operator's retry is refused until A can no longer be inside the effect, then
//! runs the effect as attempt 2 under a higher fence. When A is let go (SIGCONT):
//!
//! - A's action is never polled again (self-fencing): it sends no second request;
//! - A's request that was already on its way lands late: the service that checks fences
//!   refuses it (one application in all), the one that does not applies it (two: what no
//!   engine can prevent without the service's help, as the guide says).
//!
//! The server comes from `WORKFLOW_TEST_DATABASE_URL` (see `pg_testing::server`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tests::fence::{Notifier, IN_FLIGHT};
use workflow_core::admin;
use workflow_core::journal::Event;
use workflow_core::store::{RunFilter, RunStatus, Store};
use workflow_core::{ErrorKind, RunError, RunId};
use workflow_postgres::testing::{self as pg_testing, Schema};

const LEASE_MS: u64 = 2_000;

struct Worker {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Worker {
    fn spawn(url: &str, schema: &str, role: &str) -> Worker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fence_worker"))
            .args([url, schema, role, &LEASE_MS.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a worker");
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Worker { child, lines }
    }

    fn wait_for_line(&self, prefix: &str, within: Duration) -> String {
        let until = Instant::now() + within;
        loop {
            if let Some(line) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.starts_with(prefix))
            {
                return line.clone();
            }
            assert!(Instant::now() < until, "no line `{prefix}` from the worker");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill(1)");
        assert!(status.success());
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.signal_quietly();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    fn signal_quietly(&self) -> std::io::Result<std::process::ExitStatus> {
        Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

async fn wait_status(store: &dyn Store, run: RunId, status: RunStatus, within: Duration) {
    let until = Instant::now() + within;
    loop {
        let record = store.load(run).await.unwrap().unwrap().record;
        if record.status == status {
            return;
        }
        assert!(
            Instant::now() < until,
            "{run} is {:?}, never {status:?}",
            record.status
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn a_worker_frozen_inside_an_unguarded_effect_applies_it_once_with_a_fence_checking_service() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let Some(url) = runtime.block_on(pg_testing::server("fencing_pg")) else {
        return;
    };
    let schema = Schema::new(&url, "fence");
    let store = runtime.block_on(schema.store());
    let notifier = runtime
        .block_on(Notifier::open(&url, schema.name()))
        .unwrap();

    // A starts the run and enters the effect; frozen at once, with its request on its way.
    let a = Worker::spawn(&url, schema.name(), "start");
    let entered = a.wait_for_line("entered ", Duration::from_secs(60));
    a.signal("-STOP");
    let first: u64 = entered
        .strip_prefix("entered 1 ")
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("attempt 1 first: {entered}"));
    assert_eq!(
        first & 0xffff_ffff,
        1,
        "attempt 1 under the run's first fence of its epoch: {entered}"
    );
    let run = runtime.block_on(async { store.runs(RunFilter::default()).await.unwrap()[0].id });

    // B takes the run over once A's lease lapsed: the effect's outcome is unknown.
    let b = Worker::spawn(&url, schema.name(), "take");
    runtime.block_on(wait_status(
        &store,
        run,
        RunStatus::Failed,
        Duration::from_secs(30),
    ));
    let stored = runtime.block_on(store.load(run)).unwrap().unwrap();
    let (kind, message, safe_after) = stored
        .events
        .iter()
        .find_map(|e| match e {
            Event::AttemptFailed {
                kind,
                message,
                safe_after: Some(safe_after),
                ..
            } => Some((*kind, message.clone(), *safe_after)),
            _ => None,
        })
        .expect("an interrupted effect with a safe time");
    assert_eq!(kind, ErrorKind::OutcomeUnknown);
    assert!(message.contains("lease had ended by"), "{message}");

    // The operator's retry, as `workflow dead retry` makes it.
    let retry = |insist: bool| {
        runtime.block_on(async {
            let spec = admin::stored_spec(&store, &stored.record.fingerprint)
                .await
                .unwrap()
                .unwrap();
            let current = admin::current_fingerprints(&store, "Notify").await.unwrap();
            let current: Vec<&str> = current.iter().map(String::as_str).collect();
            admin::retry_dead_letter(&store, run, "ops", now_ms(), &spec, &current, insist).await
        })
    };
    if now_ms() < safe_after {
        assert_eq!(retry(false), Err(RunError::TooSoon { run, safe_after }));
    }
    while now_ms() < safe_after {
        std::thread::sleep(Duration::from_millis(20));
    }
    retry(false).expect("retried once safe");
    runtime.block_on(wait_status(
        &store,
        run,
        RunStatus::Completed,
        Duration::from_secs(30),
    ));
    let second = b.wait_for_line("entered 2 ", Duration::from_secs(5));
    let fence: u64 = second.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(
        fence > first,
        "the retry runs under a higher fence: {second}"
    );

    // A goes on: its late request lands, its action is never polled again.
    a.signal("-CONT");
    let until = Instant::now() + IN_FLIGHT + Duration::from_secs(3);
    while Instant::now() < until {
        let applied = runtime.block_on(notifier.applied()).unwrap();
        if applied.iter().any(|(_, _, via)| via == "late") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Time for A's action to have sent its second request, had it been polled.
    std::thread::sleep(IN_FLIGHT);
    let applied = runtime.block_on(notifier.applied()).unwrap();
    let copy = |mode: &str| -> Vec<(u64, String)> {
        applied
            .iter()
            .filter(|(m, ..)| m == mode)
            .map(|(_, fence, via)| (*fence, via.clone()))
            .collect()
    };
    assert_eq!(
        copy("fence"),
        vec![(fence, "body".to_owned())],
        "the fence-checking service applied the effect once: {applied:?}"
    );
    assert_eq!(
        copy("deadline"),
        vec![(fence, "body".to_owned())],
        "so did the one that also checks valid_until: {applied:?}"
    );
    assert_eq!(
        copy("none"),
        vec![(first, "late".to_owned()), (fence, "body".to_owned())],
        "without the check, the late request applies too: {applied:?}"
    );
    assert!(
        !a.lines().iter().any(|l| l.starts_with("entered 2")),
        "A never ran the effect again: {:?}",
        a.lines()
    );
    drop((a, b));
    runtime.block_on(schema.drop());
}

/// The race the fence alone does not close: A's request is still inside the service when
/// the operator checks the service (nothing applied) and retries, and the service decides
/// it *before* the retried call arrives. Both fences are the highest the service has seen
/// when it decides them, so a service that checks only fences applies the effect twice;
/// one that also refuses what it decides after the request's `valid_until` applies it once.
#[test]
fn a_late_request_decided_before_the_retried_call_is_refused_by_its_valid_until() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let Some(url) = runtime.block_on(pg_testing::server("fencing_pg_deadline")) else {
        return;
    };
    let schema = Schema::new(&url, "fence_deadline");
    let store = runtime.block_on(schema.store());
    let notifier = runtime
        .block_on(Notifier::open(&url, schema.name()))
        .unwrap();

    let a = Worker::spawn(&url, schema.name(), "start");
    let entered = a.wait_for_line("entered ", Duration::from_secs(60));
    a.signal("-STOP");
    let first: u64 = entered
        .strip_prefix("entered 1 ")
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("attempt 1 first: {entered}"));
    let run = runtime.block_on(async { store.runs(RunFilter::default()).await.unwrap()[0].id });

    let b = Worker::spawn(&url, schema.name(), "take");
    runtime.block_on(wait_status(
        &store,
        run,
        RunStatus::Failed,
        Duration::from_secs(30),
    ));
    let stored = runtime.block_on(store.load(run)).unwrap().unwrap();
    let safe_after = admin::retry_safe_after(&stored.events).expect("a safe time");
    while now_ms() < safe_after {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The operator's check: the service applied nothing (A's request is still inside it).
    assert_eq!(runtime.block_on(notifier.applied()).unwrap(), vec![]);
    // The service decides A's request now, before the retried call.
    a.signal("-CONT");
    let until = Instant::now() + IN_FLIGHT + Duration::from_secs(10);
    let late = loop {
        let decided = runtime.block_on(notifier.decided()).unwrap();
        if let Some(late) = decided.iter().find(|(via, ..)| via == "late") {
            break late.clone();
        }
        assert!(Instant::now() < until, "A's request was never decided");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(late.1, first);
    assert!(
        late.2 > 0,
        "A's request was decided after its valid_until ({} ms late)",
        late.2
    );
    // Then the operator's retry, and attempt 2 (by whichever worker claims the run).
    let spec = runtime
        .block_on(admin::stored_spec(&store, &stored.record.fingerprint))
        .unwrap()
        .unwrap();
    let current = runtime
        .block_on(admin::current_fingerprints(&store, "Notify"))
        .unwrap();
    let current: Vec<&str> = current.iter().map(String::as_str).collect();
    runtime
        .block_on(admin::retry_dead_letter(
            &store,
            run,
            "ops",
            now_ms(),
            &spec,
            &current,
            false,
        ))
        .expect("retried once safe");
    runtime.block_on(wait_status(
        &store,
        run,
        RunStatus::Completed,
        Duration::from_secs(30),
    ));
    let second = [&a, &b]
        .iter()
        .flat_map(|w| w.lines())
        .find(|l| l.starts_with("entered 2 "))
        .expect("attempt 2 ran");
    let fence: u64 = second.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(fence > first, "{second}");

    let applied = runtime.block_on(notifier.applied()).unwrap();
    let copy = |mode: &str| -> Vec<(u64, String)> {
        applied
            .iter()
            .filter(|(m, ..)| m == mode)
            .map(|(_, fence, via)| (*fence, via.clone()))
            .collect()
    };
    let twice = vec![(first, "late".to_owned()), (fence, "body".to_owned())];
    assert_eq!(
        copy("fence"),
        twice,
        "checking fences alone, the late request and the retried call both apply: {applied:?}"
    );
    assert_eq!(copy("none"), twice, "{applied:?}");
    assert_eq!(
        copy("deadline"),
        vec![(fence, "body".to_owned())],
        "checking valid_until too, the effect applies once: {applied:?}"
    );
    drop((a, b));
    runtime.block_on(schema.drop());
}

//! Flow control at run time on the memory and SQLite stores, under paused time: a
//! workflow-level limit per key (never exceeded, other keys not starved), `skip`,
//! `cancel_previous`, a debounced burst, priorities, and a step's slot and rate.
//!
//! The workflows are declared with `workflow!` and given their flow keys by a wrapper
//! (`limited!`) that edits the spec and supplies `admission` and `step_keys`, as the
//! generated code does.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use workflow_core::clock::TokioClock;
use workflow_core::flow::{Admission, StepKeys};
use workflow_core::journal::Value;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, RunStatus, Store};
use workflow_core::{BoxFuture, CallError};
use workflow_core::{ChildStart, Invocation, OutputSource};
use workflow_spec::{Debounce, LimitKey, OnLimit, Rate, RunConcurrency, Spec, StepConcurrency};
use workflow_sqlite::SqliteStore;

/// What ran: (input name, started, finished), in start order.
#[derive(Default)]
pub struct Ledger(Mutex<Vec<(String, tokio::time::Instant, tokio::time::Instant)>>);

impl Ledger {
    fn entries(&self) -> Vec<(String, tokio::time::Instant, tokio::time::Instant)> {
        self.0.lock().unwrap().clone()
    }
}

/// The environment: the shared ledger and how long an attempt takes.
pub struct Env {
    ledger: Arc<Ledger>,
    takes: Duration,
}

async fn work(env: &Env, name: String) -> Result<String, StepError> {
    let start = tokio::time::Instant::now();
    tokio::time::sleep(env.takes).await;
    env.ledger
        .0
        .lock()
        .unwrap()
        .push((name.clone(), start, tokio::time::Instant::now()));
    Ok(name)
}

workflow! {
    workflow Job(customer: String, name: String, tier: i64) env Env {
        step work -> String { action: work(env, name) }
    }
}

/// A workflow of `Job`'s steps and code, with flow keys added to its spec.
macro_rules! limited {
    ($wrapper:ident, $edit:expr) => {
        struct $wrapper;
        impl Workflow for $wrapper {
            type Input = <Job as Workflow>::Input;
            type Env = <Job as Workflow>::Env;
            type Outputs = <Job as Workflow>::Outputs;
            type Tasks = <Job as Workflow>::Tasks;
            const NAME: &'static str = <Job as Workflow>::NAME;
            const FINGERPRINT: &'static str = <Job as Workflow>::FINGERPRINT;
            const CHILD_DEPTH: usize = <Job as Workflow>::CHILD_DEPTH;
            fn spec() -> &'static Spec {
                static SPEC: OnceLock<Spec> = OnceLock::new();
                SPEC.get_or_init(|| {
                    let mut spec = Job::spec().clone();
                    let edit: fn(&mut Spec) = $edit;
                    edit(&mut spec);
                    spec
                })
            }
            fn admission(input: &Self::Input) -> Admission {
                Admission {
                    concurrency: Some(input.customer.clone()),
                    priority: input.tier,
                    debounce: Some(input.customer.clone()),
                }
            }
            fn step_keys(
                _: usize,
                input: &Self::Input,
                _: &dyn OutputSource,
            ) -> Result<StepKeys, CallError> {
                Ok(StepKeys {
                    concurrency: Some("psp".to_owned()),
                    rate: Some(input.customer.clone()),
                })
            }
            fn action(
                step: usize,
                call: Invocation<'_, Self>,
            ) -> Result<BoxFuture<'_, Result<Value, StepError>>, CallError> {
                Job::action(step, retype(call))
            }
            fn compensate(
                step: usize,
                call: Invocation<'_, Self>,
            ) -> Result<BoxFuture<'_, Result<(), StepError>>, CallError> {
                Job::compensate(step, retype(call))
            }
            fn reconcile(
                step: usize,
                call: Invocation<'_, Self>,
            ) -> Result<BoxFuture<'_, Result<Option<Value>, StepError>>, CallError> {
                Job::reconcile(step, retype(call))
            }
            fn condition(
                step: usize,
                input: &Self::Input,
                outputs: &dyn OutputSource,
            ) -> Result<bool, CallError> {
                Job::condition(step, input, outputs)
            }
            fn proposal(step: usize, input: &Self::Input, outputs: &dyn OutputSource) -> Value {
                Job::proposal(step, input, outputs)
            }
            fn decision(step: usize, decision: Value) -> Result<Value, CallError> {
                Job::decision(step, decision)
            }
            fn event(step: usize, payload: Value) -> Result<Value, CallError> {
                Job::event(step, payload)
            }
            fn timeout_decision(step: usize, approved: bool) -> Result<Value, CallError> {
                Job::timeout_decision(step, approved)
            }
            fn outputs(outputs: &dyn OutputSource) -> Result<Self::Outputs, CallError> {
                Job::outputs(outputs)
            }
            fn items(
                step: usize,
                input: &Self::Input,
                outputs: &dyn OutputSource,
            ) -> Result<Vec<Value>, CallError> {
                Job::items(step, input, outputs)
            }
            fn child(
                step: usize,
                input: &Self::Input,
                outputs: &dyn OutputSource,
            ) -> Result<ChildStart, CallError> {
                Job::child(step, input, outputs)
            }
        }
    };
}

fn retype<W: Workflow<Env = Env, Input = JobInput>>(
    call: Invocation<'_, W>,
) -> Invocation<'_, Job> {
    Invocation {
        env: call.env,
        ctx: call.ctx,
        input: call.input,
        outputs: call.outputs,
    }
}

fn per_customer(on_limit: OnLimit) -> RunConcurrency {
    RunConcurrency {
        key: LimitKey::Path("customer".to_owned()),
        limit: 1,
        on_limit,
    }
}

limited!(OnePerCustomer, |spec| spec.concurrency =
    Some(per_customer(OnLimit::Queue)));
limited!(SkipBusy, |spec| spec.concurrency =
    Some(per_customer(OnLimit::Skip)));
limited!(Latest, |spec| spec.concurrency =
    Some(per_customer(OnLimit::CancelPrevious)));
limited!(Debounced, |spec| {
    spec.debounce = Some(Debounce {
        key: LimitKey::Path("customer".to_owned()),
        window: Duration::from_secs(5),
        max_wait: Some(Duration::from_secs(10)),
    })
});
limited!(Prioritized, |spec| spec.priority = Some("tier".to_owned()));
limited!(OneAtThePsp, |spec| {
    spec.steps[0].concurrency = Some(StepConcurrency {
        key: LimitKey::Static("psp".to_owned()),
        limit: 1,
    })
});
limited!(TwoPerSecond, |spec| {
    spec.steps[0].rate = Some(Rate {
        key: LimitKey::Path("customer".to_owned()),
        limit: 2,
        per: Duration::from_secs(1),
        burst: 1,
    })
});

fn input(customer: &str, name: &str, tier: i64) -> JobInput {
    JobInput {
        customer: customer.to_owned(),
        name: name.to_owned(),
        tier,
    }
}

fn engine<W: Workflow<Env = Env>>(
    store: &Arc<dyn Store>,
    ledger: &Arc<Ledger>,
    takes: Duration,
    max_live: Option<usize>,
) -> Engine {
    let mut builder = Engine::builder()
        .shared_store(Arc::clone(store))
        .clock(TokioClock::starting_at(1_000_000));
    if let Some(max) = max_live {
        builder = builder.max_live_runs(max);
    }
    let engine = builder.build();
    engine
        .register::<W>(Env {
            ledger: Arc::clone(ledger),
            takes,
        })
        .unwrap();
    engine
}

/// Whether two entries of the ledger ran at the same time.
fn overlap(
    a: &(String, tokio::time::Instant, tokio::time::Instant),
    b: &(String, tokio::time::Instant, tokio::time::Instant),
) -> bool {
    a.1 < b.2 && b.1 < a.2
}

fn stores() -> Vec<(&'static str, Arc<dyn Store>, Option<TempDb>)> {
    let db = TempDb::new();
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open(&db.0).unwrap());
    vec![
        ("memory", Arc::new(MemoryStore::new()), None),
        ("sqlite", sqlite, Some(db)),
    ]
}

struct TempDb(std::path::PathBuf);

impl TempDb {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = format!("workflow-flow-{}-{n}.db", std::process::id());
        TempDb(std::env::temp_dir().join(file))
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

async fn finish<W: Workflow>(handle: &RunHandle<W>) -> Result<W::Outputs, RunError> {
    tokio::time::timeout(Duration::from_secs(120), handle.outputs())
        .await
        .expect("the run finishes")
}

#[tokio::test(start_paused = true)]
async fn a_key_runs_one_at_a_time_and_other_keys_are_not_starved() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        let engine = engine::<OnePerCustomer>(&store, &ledger, Duration::from_secs(2), None);
        engine.resume_all().await.unwrap();
        let mut handles = Vec::new();
        for (customer, name) in [("c42", "a1"), ("c42", "a2"), ("c42", "a3"), ("c7", "b1")] {
            let started = engine
                .start::<OnePerCustomer>(input(customer, name, 0))
                .await;
            handles.push(started.unwrap());
        }
        // What a waiting run says, as `runs show`, the API and the run page say it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let flow = store.flow_of(handles[1].id()).await.unwrap();
        let said = workflow_core::store::limits::describe(&flow, Some(OnePerCustomer::spec()));
        assert_eq!(
            said[0],
            format!(
                "waiting for a slot of key c42 (Job): 1 of 1 in use by {}",
                handles[0].id()
            ),
            "{label}"
        );
        assert_eq!(
            said[1], "queued: priority 0, 0 queued ahead of it",
            "{label}"
        );
        for handle in &handles {
            finish(handle).await.unwrap();
        }
        let entries = ledger.entries();
        assert_eq!(entries.len(), 4, "{label}: every run ran once");
        let of = |prefix: &str| {
            entries
                .iter()
                .filter(|e| e.0.starts_with(prefix))
                .cloned()
                .collect::<Vec<_>>()
        };
        let c42 = of("a");
        for (i, a) in c42.iter().enumerate() {
            for b in &c42[i + 1..] {
                assert!(
                    !overlap(a, b),
                    "{label}: two runs of one key at once: {a:?} {b:?}"
                );
            }
        }
        let b1 = &of("b")[0];
        assert!(
            overlap(b1, &c42[0]),
            "{label}: the other key runs beside the first, not after the queue"
        );
        let order: Vec<&str> = c42.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(
            order,
            ["a1", "a2", "a3"],
            "{label}: oldest first within a key"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn skip_finishes_the_start_at_once_naming_the_holder() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        let engine = engine::<SkipBusy>(&store, &ledger, Duration::from_secs(5), None);
        engine.resume_all().await.unwrap();
        let first = engine
            .start::<SkipBusy>(input("c1", "first", 0))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = engine
            .start::<SkipBusy>(input("c1", "second", 0))
            .await
            .unwrap();
        let skipped = finish(&second).await;
        assert!(
            skipped.is_err(),
            "{label}: the skipped start has no outputs"
        );
        let record = store.load(second.id()).await.unwrap().unwrap().record;
        assert_eq!(record.status, RunStatus::Cancelled, "{label}");
        let note = record.note.unwrap_or_default();
        assert!(note.contains(&first.id().to_string()), "{label}: {note}");
        finish(&first).await.unwrap();
        let names: Vec<String> = ledger.entries().into_iter().map(|e| e.0).collect();
        assert_eq!(names, ["first"], "{label}: the skipped start never ran");
    }
}

#[tokio::test(start_paused = true)]
async fn cancel_previous_cancels_the_holder_and_runs_the_new_start() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        let engine = engine::<Latest>(&store, &ledger, Duration::from_secs(30), None);
        engine.resume_all().await.unwrap();
        let old = engine.start::<Latest>(input("c1", "old", 0)).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let new = engine.start::<Latest>(input("c1", "new", 0)).await.unwrap();
        assert_eq!(finish(&new).await.unwrap().work, "new", "{label}");
        assert!(
            finish(&old).await.is_err(),
            "{label}: the previous run was cancelled"
        );
        let record = store.load(old.id()).await.unwrap().unwrap().record;
        assert_eq!(record.status, RunStatus::Cancelled, "{label}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_debounced_burst_runs_once_with_the_last_input_within_max_wait() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        let engine = engine::<Debounced>(&store, &ledger, Duration::from_millis(10), None);
        engine.resume_all().await.unwrap();
        let begun = tokio::time::Instant::now();
        let mut handles = Vec::new();
        // A start every 3 s: each within the 5 s window of the last, so the burst is never
        // quiet; max_wait (10 s after its first start) ends it at 10 s with the start of
        // 9 s. The starts at 12 s and 15 s are the next burst: run at 15 + 5 = 20 s.
        for i in 0..6 {
            let name = format!("cart-{i}");
            handles.push(
                engine
                    .start::<Debounced>(input("c1", &name, 0))
                    .await
                    .unwrap(),
            );
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let entries = ledger.entries();
        assert_eq!(
            entries.len(),
            1,
            "{label}: one run for the first burst: {entries:?}"
        );
        let (name, started, _) = &entries[0];
        assert_eq!(
            name, "cart-3",
            "{label}: the latest start before max_wait ran"
        );
        let after = started.duration_since(begun);
        assert!(
            after >= Duration::from_secs(10) && after < Duration::from_secs(11),
            "{label}: {after:?}"
        );
        for i in [0, 1, 2, 4] {
            assert!(
                finish(&handles[i]).await.is_err(),
                "{label}: cart-{i} was debounced"
            );
        }
        assert_eq!(finish(&handles[5]).await.unwrap().work, "cart-5", "{label}");
        let entries = ledger.entries();
        assert_eq!(entries.len(), 2, "{label}");
        let second = entries[1].1.duration_since(begun);
        assert!(
            second >= Duration::from_secs(20) && second < Duration::from_secs(21),
            "{label}: {second:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn higher_priority_runs_are_admitted_first() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        // Queued by an intake engine, then one run at a time: admission order is run order.
        let intake = Engine::builder()
            .shared_store(Arc::clone(&store))
            .clock(TokioClock::starting_at(1_000_000))
            .intake_only()
            .build();
        let mut handles = Vec::new();
        for (name, tier) in [("low", 0), ("mid", 5), ("high", 9)] {
            let started =
                intake.enqueue::<Prioritized>(input(name, name, tier), StartOptions::default());
            handles.push(started.await.unwrap());
        }
        let engine = engine::<Prioritized>(&store, &ledger, Duration::from_secs(1), Some(1));
        engine.resume_all().await.unwrap();
        for handle in &handles {
            finish(handle).await.unwrap();
        }
        let names: Vec<String> = ledger.entries().into_iter().map(|e| e.0).collect();
        assert_eq!(names, ["high", "mid", "low"], "{label}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_step_slot_holds_across_runs() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        let engine = engine::<OneAtThePsp>(&store, &ledger, Duration::from_millis(700), None);
        engine.resume_all().await.unwrap();
        let mut handles = Vec::new();
        for i in 0..4 {
            let name = format!("r{i}");
            handles.push(
                engine
                    .start::<OneAtThePsp>(input(&name, &name, 0))
                    .await
                    .unwrap(),
            );
        }
        for handle in &handles {
            finish(handle).await.unwrap();
        }
        let entries = ledger.entries();
        assert_eq!(entries.len(), 4, "{label}");
        for (i, a) in entries.iter().enumerate() {
            for b in &entries[i + 1..] {
                assert!(
                    !overlap(a, b),
                    "{label}: two attempts hold the one slot: {a:?} {b:?}"
                );
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_step_rate_is_respected() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        let engine = engine::<TwoPerSecond>(&store, &ledger, Duration::from_millis(1), None);
        engine.resume_all().await.unwrap();
        let begun = tokio::time::Instant::now();
        let mut handles = Vec::new();
        for i in 0..7 {
            let name = format!("r{i}");
            handles.push(
                engine
                    .start::<TwoPerSecond>(input("m1", &name, 0))
                    .await
                    .unwrap(),
            );
        }
        for handle in &handles {
            finish(handle).await.unwrap();
        }
        let mut starts: Vec<Duration> = ledger
            .entries()
            .iter()
            .map(|e| e.1.duration_since(begun))
            .collect();
        starts.sort();
        assert_eq!(starts.len(), 7, "{label}");
        // Over any window of 1 s, at most limit + burst = 3 attempts start.
        for (i, first) in starts.iter().enumerate() {
            let within = starts[i..]
                .iter()
                .filter(|s| **s < *first + Duration::from_secs(1))
                .count();
            assert!(
                within <= 3,
                "{label}: {within} starts within 1 s of {first:?}: {starts:?}"
            );
        }
        // And the bucket does not hold them back longer than its rate: 7 tokens at 2 per
        // second after the first take about 3 s.
        assert!(starts[6] < Duration::from_secs(5), "{label}: {starts:?}");
    }
}

/// The flow-control metrics are labelled by the limit's name only, never by a key's value:
/// the wait per limit is recorded for every attempt that took a slot, and the slots in
/// use go back to zero when the attempts end.
#[test]
fn limit_metrics_are_labelled_by_the_limit_name_only() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        runtime.block_on(async {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
            let ledger = Arc::new(Ledger::default());
            let engine = engine::<OneAtThePsp>(&store, &ledger, Duration::from_millis(300), None);
            engine.resume_all().await.unwrap();
            let mut handles = Vec::new();
            for name in ["customer-1", "customer-2", "customer-3"] {
                handles.push(
                    engine
                        .start::<OneAtThePsp>(input(name, name, 0))
                        .await
                        .unwrap(),
                );
            }
            for handle in &handles {
                finish(handle).await.unwrap();
            }
            // The slots go back once their attempts end (the release is its own task).
            tokio::time::sleep(Duration::from_millis(10)).await;
        })
    });
    let mut waits = 0;
    let mut in_use = None;
    for (key, _, _, value) in recorder.snapshotter().snapshot().into_vec() {
        let name = key.key().name().to_owned();
        if !name.starts_with("workflow_limit_") {
            continue;
        }
        let labels: Vec<(String, String)> = key
            .key()
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        assert_eq!(
            labels,
            [("limit".to_owned(), "Job.work".to_owned())],
            "{name}"
        );
        match value {
            DebugValue::Histogram(samples) => {
                waits += samples.len();
                let longest = samples.iter().map(|s| s.into_inner()).fold(0.0, f64::max);
                assert!(
                    longest >= 0.5,
                    "the third attempt waited for two others: {longest}"
                );
            }
            DebugValue::Gauge(value) => in_use = Some(value.into_inner()),
            DebugValue::Counter(_) => {}
        }
    }
    assert_eq!(waits, 3, "one wait per attempt");
    assert_eq!(in_use, Some(0.0), "every slot given back");
}

async fn pay(env: &Env, customer: String, merchant: String) -> Result<String, StepError> {
    work(env, format!("{customer}/{merchant}")).await
}

workflow! {
    /// The keys as written in a spec: one run per customer at a time, one payment per
    /// merchant at a time across runs.
    workflow Checkout(customer: String, merchant: String) env Env {
        concurrency: { key: customer, limit: 1 },
        step pay -> String {
            action: pay(env, customer, merchant),
            concurrency: { key: merchant, limit: 1 },
        }
    }
}

#[tokio::test(start_paused = true)]
async fn limits_written_in_the_spec_hold() {
    for (label, store, _db) in stores() {
        let ledger = Arc::new(Ledger::default());
        let engine = engine::<Checkout>(&store, &ledger, Duration::from_secs(1), None);
        engine.resume_all().await.unwrap();
        let mut handles = Vec::new();
        for (customer, merchant) in [("c1", "m1"), ("c1", "m2"), ("c2", "m1"), ("c3", "m2")] {
            let input = CheckoutInput {
                customer: customer.to_owned(),
                merchant: merchant.to_owned(),
            };
            handles.push(engine.start::<Checkout>(input).await.unwrap());
        }
        for handle in &handles {
            finish(handle).await.unwrap();
        }
        let entries = ledger.entries();
        assert_eq!(entries.len(), 4, "{label}");
        for (i, a) in entries.iter().enumerate() {
            for b in &entries[i + 1..] {
                let (ca, ma) = a.0.split_once('/').unwrap();
                let (cb, mb) = b.0.split_once('/').unwrap();
                if ca == cb || ma == mb {
                    assert!(
                        !overlap(a, b),
                        "{label}: a key's limit was exceeded: {a:?} {b:?}"
                    );
                }
            }
        }
        // Runs that share no key are not held back by each other: two of them ran
        // together (which two depends on who asked for a merchant's slot first).
        let find = |name: &str| entries.iter().find(|e| e.0 == name).unwrap().clone();
        let apart = [("c1/m1", "c3/m2"), ("c1/m2", "c2/m1"), ("c2/m1", "c3/m2")];
        assert!(
            apart.iter().any(|(a, b)| overlap(&find(a), &find(b))),
            "{label}: {entries:?}"
        );
    }
}

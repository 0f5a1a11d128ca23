//! A run's trace survives its processes: the spans of every process that drives a run (the
//! one that started it, the one that resumed it after a kill, the worker that took it over)
//! are in the one trace journaled when it started, under the same parent span; a child
//! run's spans are children of its parent's step span; and a replayed journal emits no step
//! span again. Asserted with OpenTelemetry's in-memory exporter behind
//! `tracing-opentelemetry`, as an application exporting traces would install it.
//!
//! Each test records on its own thread (a current-thread runtime inside a thread-local
//! subscriber), so the tests do not see each other's spans.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::Store;
use workflow_core::testing;
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::PgStore;
use workflow_sqlite::SqliteStore;

#[derive(Default)]
pub struct Env;

async fn first(n: u32) -> Result<u32, StepError> {
    Ok(n + 1)
}

async fn second(n: u32) -> Result<u32, StepError> {
    Ok(n * 2)
}

workflow! {
    /// A step, a person, a step: a run that waits between two processes.
    workflow Traced(n: u32) env Env {
        step a -> u32 { action: first(n) }
        human review -> Approval {
            assignee: "ops",
            depends_on: [a],
            timeout: 1h,
            on_timeout: reject,
        }
        step b -> u32 { action: second(a), depends_on: [review] }
    }
}

workflow! {
    /// The child of `Tree`.
    workflow Leaf(n: u32) env Env {
        step double -> u32 { action: second(n) }
    }
}

workflow! {
    /// A step, then a child run.
    workflow Tree(n: u32) env Env {
        step a -> u32 { action: first(n) }
        step leaf -> LeafOutputs { workflow: Leaf(n: a) }
    }
}

/// OpenTelemetry's SDK with its in-memory exporter, behind a `tracing` subscriber.
struct Otel {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
}

impl Otel {
    fn new() -> Otel {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        Otel { exporter, provider }
    }

    /// Runs `scenario` on a current-thread runtime with this thread's spans exported here.
    fn record<T>(&self, scenario: impl std::future::Future<Output = T>) -> T {
        let layer = tracing_opentelemetry::layer().with_tracer(self.provider.tracer("tests"));
        let subscriber = tracing_subscriber::registry().with(layer);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            let result = runtime.block_on(scenario);
            // Spans of drivers the runtime still holds close as it drops.
            drop(runtime);
            result
        })
    }

    fn spans(&self) -> Vec<SpanData> {
        let _ = self.provider.force_flush();
        self.exporter.get_finished_spans().unwrap()
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// The journaled trace id and parent span of a run.
async fn journaled(store: &dyn Store, run: RunId) -> (String, Option<String>) {
    let stored = store.load(run).await.unwrap().expect("the run");
    match stored.events.first() {
        Some(Event::RunStarted {
            trace_id,
            parent_span,
            ..
        }) => (trace_id.clone(), parent_span.clone()),
        other => panic!("the journal starts with {other:?}"),
    }
}

/// The span a run's spans are children of: the journaled one, or the root derived from
/// the trace id.
fn parent_of(trace_id: &str, parent_span: Option<&str>) -> (TraceId, SpanId) {
    let (trace, span) =
        workflow_core::trace::span_parent(trace_id, parent_span).expect("a trace id");
    (TraceId::from_bytes(trace), SpanId::from_bytes(span))
}

/// `(step, attempt)` of every exported step span, counted.
fn step_spans(spans: &[SpanData], run: RunId) -> BTreeMap<(String, String), usize> {
    let runs = run_span_ids(spans, run);
    let mut counted = BTreeMap::new();
    for span in spans.iter().filter(|s| s.name == "step") {
        if runs.contains(&span.parent_span_id) {
            let key = (
                attribute(span, "step").unwrap_or_default(),
                attribute(span, "attempt").unwrap_or_default(),
            );
            *counted.entry(key).or_insert(0) += 1;
        }
    }
    counted
}

fn run_spans(spans: &[SpanData], run: RunId) -> Vec<&SpanData> {
    spans
        .iter()
        .filter(|s| s.name == "run" && attribute(s, "run") == Some(run.to_string()))
        .collect()
}

fn run_span_ids(spans: &[SpanData], run: RunId) -> Vec<SpanId> {
    run_spans(spans, run)
        .iter()
        .map(|s| s.span_context.span_id())
        .collect()
}

/// Every span of `run` (its run spans and what is inside them) is in the journaled trace,
/// every run span a child of the journaled parent; there are at least `launches` run spans
/// and each step span appears once.
fn assert_one_trace(spans: &[SpanData], run: RunId, journaled: &(String, Option<String>)) {
    let (trace, parent) = parent_of(&journaled.0, journaled.1.as_deref());
    assert_eq!(
        trace.to_string(),
        journaled.0,
        "the journaled id is the trace id"
    );
    let runs = run_spans(spans, run);
    for span in &runs {
        assert_eq!(span.span_context.trace_id(), trace, "{span:?}");
        assert_eq!(span.parent_span_id, parent, "{span:?}");
    }
    let ids = run_span_ids(spans, run);
    for span in spans.iter().filter(|s| ids.contains(&s.parent_span_id)) {
        assert_eq!(span.span_context.trace_id(), trace, "{span:?}");
    }
}

fn temp_path(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "workflow-traces-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("runs.db")
}

fn sqlite_engine(path: &PathBuf) -> Engine {
    let engine = Engine::builder()
        .store(SqliteStore::open(path).unwrap())
        .build();
    engine.register::<Traced>(Env).unwrap();
    engine
}

#[test]
fn a_run_resumed_after_a_kill_continues_its_trace_and_repeats_no_step_span() {
    let otel = Otel::new();
    let path = temp_path("resume");
    let (run, trace, first_spans) = otel.record(async {
        // The first process starts the run, runs `a` and is killed while `review` waits.
        let one = sqlite_engine(&path);
        let run = one.start::<Traced>(TracedInput { n: 1 }).await.unwrap();
        testing::wait_for_task(&one, run.id(), "review", Duration::from_secs(10))
            .await
            .unwrap();
        let trace = journaled(&**one.store(), run.id()).await;
        one.shutdown();
        drop(one);
        tokio::task::yield_now().await;
        let first_spans = run_spans(&otel.spans(), run.id()).len();

        // The next process on the same file resumes it.
        let two = sqlite_engine(&path);
        assert_eq!(two.resume_all().await.unwrap(), 1);
        let handle = two.handle::<Traced>(run.id()).await.unwrap();
        handle.review().approve("ops", None).await.unwrap();
        let outputs = handle.outputs().await.unwrap();
        assert_eq!(outputs.b, 4);
        two.shutdown();
        (run.id(), trace, first_spans)
    });
    assert_eq!(trace.0.len(), 32, "{trace:?}");
    assert_eq!(trace.1, None, "a run started here starts its own trace");
    let spans = otel.spans();
    let launches = run_spans(&spans, run).len();
    assert!(first_spans >= 1, "the first process exported its run span");
    assert!(
        launches > first_spans,
        "the second process's spans are exported too: {launches} run spans"
    );
    assert_one_trace(&spans, run, &trace);
    let steps = step_spans(&spans, run);
    let expected: BTreeMap<(String, String), usize> = [
        (("a".to_owned(), "1".to_owned()), 1),
        (("b".to_owned(), "1".to_owned()), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        steps, expected,
        "each step span once, across both processes"
    );
}

#[test]
fn a_child_runs_spans_are_children_of_its_parents_step_span() {
    let otel = Otel::new();
    let (parent, parent_trace, child, child_trace) = otel.record(async {
        let engine = Engine::builder().build();
        engine.register::<Tree>(Env).unwrap();
        engine.register::<Leaf>(Env).unwrap();
        let run = engine.start::<Tree>(TreeInput { n: 1 }).await.unwrap();
        let outputs = run.outputs().await.unwrap();
        assert_eq!(outputs.leaf.double, 4);
        let store = engine.store();
        let events = store.load(run.id()).await.unwrap().unwrap().events;
        let child = events
            .iter()
            .find_map(|event| match event {
                Event::ChildStarted { child, .. } => Some(*child),
                _ => None,
            })
            .expect("the child was started");
        (
            run.id(),
            journaled(&**store, run.id()).await,
            child,
            journaled(&**store, child).await,
        )
    });
    let spans = otel.spans();
    // The step span that started the child, inside the parent's run span.
    let parent_runs = run_span_ids(&spans, parent);
    let step = spans
        .iter()
        .find(|s| s.name == "child" && parent_runs.contains(&s.parent_span_id))
        .expect("the parent's child step span");
    assert_eq!(
        child_trace.0, parent_trace.0,
        "the child continues the trace"
    );
    assert_eq!(
        child_trace.1,
        Some(step.span_context.span_id().to_string()),
        "the child journals its parent's step span"
    );
    assert_one_trace(&spans, parent, &parent_trace);
    assert_one_trace(&spans, child, &child_trace);
    let child_runs = run_spans(&spans, child);
    assert!(!child_runs.is_empty());
    for span in child_runs {
        assert_eq!(span.parent_span_id, step.span_context.span_id());
    }
    assert_eq!(step_spans(&spans, child).len(), 1, "the child's step");
}

async fn pg_worker(url: &str, schema: &Schema, owner: &str) -> Engine {
    let store = PgStore::connect_with(url, schema.options())
        .await
        .expect("connect");
    let engine = Engine::builder()
        .shared_store(Arc::new(store) as Arc<dyn Store>)
        .owner(owner)
        .lease(Duration::from_secs(2))
        .build();
    engine.register::<Traced>(Env).unwrap();
    engine
}

#[test]
fn a_run_taken_over_by_another_worker_on_postgres_keeps_its_trace() {
    let otel = Otel::new();
    let seen = otel.record(async {
        let test = "a_run_taken_over_by_another_worker_on_postgres_keeps_its_trace";
        let url = pg_testing::server(test).await?;
        let schema = Schema::new(&url, "traces");
        let a = pg_worker(&url, &schema, "worker-a").await;
        let run = a.start::<Traced>(TracedInput { n: 1 }).await.unwrap();
        testing::wait_for_task(&a, run.id(), "review", Duration::from_secs(10))
            .await
            .unwrap();
        // Worker A stops as a crash would: its lease lapses and B takes the run over.
        a.shutdown();
        let b = pg_worker(&url, &schema, "worker-b").await;
        b.resume_all().await.unwrap();
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let record = b.store().load(run.id()).await.unwrap().unwrap().record;
            if record.owner.as_deref() == Some("worker-b") {
                break;
            }
            assert!(
                Instant::now() < until,
                "B never took the run over: {record:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        testing::wait_for_task(&b, run.id(), "review", Duration::from_secs(10))
            .await
            .unwrap();
        let handle = b.handle::<Traced>(run.id()).await.unwrap();
        handle.review().approve("ops", None).await.unwrap();
        assert_eq!(handle.outputs().await.unwrap().b, 4);
        let trace = journaled(&**b.store(), run.id()).await;
        let events = b.store().load(run.id()).await.unwrap().unwrap().events;
        b.shutdown();
        drop(a);
        schema.drop().await;
        Some((run.id(), trace, events))
    });
    let Some((run, trace, events)) = seen else {
        eprintln!("skipped: no PostgreSQL server");
        return;
    };
    let spans = otel.spans();
    assert!(run_spans(&spans, run).len() >= 2, "both workers' run spans");
    assert_one_trace(&spans, run, &trace);
    // One step span per attempt the journal says was started: none for what a worker
    // replayed. (On a slow machine A can lose its lease inside `a`, and B then runs the
    // interrupted attempt again: two starts, two spans.)
    let mut started: BTreeMap<(String, String), usize> = BTreeMap::new();
    for event in &events {
        if let Event::AttemptStarted { step, attempt, .. } = event {
            let name = Traced::spec().steps[*step].id.clone();
            *started.entry((name, attempt.to_string())).or_insert(0) += 1;
        }
    }
    let steps = step_spans(&spans, run);
    assert_eq!(steps, started, "one span per journaled attempt start");
    assert_eq!(
        steps.keys().cloned().collect::<Vec<_>>(),
        [
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "1".to_owned())
        ]
    );
}

/// A journal written by an older version: its `RunStarted` has a 16-digit trace id and no
/// parent span. It loads, and the spans of the process that resumes it are in the trace
/// of that id padded with 16 leading zeros.
#[test]
fn an_old_journal_with_a_16_digit_trace_id_resumes_in_the_padded_trace() {
    let otel = Otel::new();
    let run = otel.record(async {
        let store: Arc<dyn Store> = Arc::new(workflow_core::store::MemoryStore::new());
        let started: Event = serde_json::from_value(serde_json::json!({
            "event": "run_started",
            "workflow": "Traced",
            "fingerprint": Traced::FINGERPRINT,
            "input": { "n": 1 },
            "seed": 7,
            "trace_id": "00000000deadbeef",
            "dry_run": false,
            "deadline": null,
            "at": 1,
        }))
        .expect("an old RunStarted reads");
        let created = store
            .create_run(workflow_core::store::NewRun {
                workflow: "Traced",
                fingerprint: Traced::FINGERPRINT,
                idempotency_key: None,
                events: &[started],
                parent: None,
                owner: None,
                supersedes: None,
                search: &[],
                at: 1,
            })
            .await
            .unwrap();
        let run = created.id();
        let engine = Engine::builder().shared_store(store).build();
        engine.register::<Traced>(Env).unwrap();
        engine.resume_all().await.unwrap();
        let handle = engine.handle::<Traced>(run).await.unwrap();
        testing::wait_for_task(&engine, run, "review", Duration::from_secs(10))
            .await
            .unwrap();
        handle.review().approve("ops", None).await.unwrap();
        assert_eq!(handle.outputs().await.unwrap().b, 4);
        engine.shutdown();
        run
    });
    let spans = otel.spans();
    let padded = "000000000000000000000000deadbeef";
    assert!(!run_spans(&spans, run).is_empty());
    assert_one_trace(&spans, run, &(padded.to_owned(), None));
    assert_eq!(
        workflow_core::trace::otel_trace_id("00000000deadbeef").as_deref(),
        Some(padded)
    );
    assert_eq!(step_spans(&spans, run).len(), 2, "a and b");
}

//! Telemetry is evidence, so it is asserted: the `workflow_action_total` counter's labels
//! (with `error_type` from the bounded kind set only), the run and step spans and what they
//! carry, that no payload reaches a log line unless the engine is told to log payloads, and
//! that the engine's own failures are logged with the run's id.
//!
//! Each test records on its own thread (a current-thread runtime inside a thread-local
//! metrics recorder and tracing subscriber), so the tests do not see each other's records.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use metrics_util::CompositeKey;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event as TraceEvent, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use workflow_core::clock::TokioClock;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, Store, StoreError};
use workflow_core::testing::{self, FaultyStore, Write};

#[derive(Default)]
pub struct Env {
    flaky_calls: AtomicUsize,
}

async fn ok(secret: String) -> Result<String, StepError> {
    Ok(format!("SECRET-OUTPUT for {secret}"))
}

async fn flaky(env: &Env) -> Result<u32, StepError> {
    tracing::info!("calling the flaky service");
    if env.flaky_calls.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(StepError::unavailable("the service is down"));
    }
    Ok(1)
}

async fn bad() -> Result<u32, StepError> {
    Err(StepError::validation("the record is malformed"))
}

workflow! {
    /// One step of each outcome, and a decision with a comment.
    workflow Observed(secret: String) env Env {
        step ok -> String { action: ok(secret) }
        step flaky -> u32 {
            action: flaky(env),
            retry: { max_attempts: 2, backoff: fixed, initial: 1s, max: 1s, jitter: none },
        }
        step bad -> u32 { action: bad(), on_failure: continue }
        human review -> Approval {
            assignee: "ops",
            depends_on: [ok, flaky],
            timeout: 1h,
            on_timeout: reject,
        }
    }
}

/// A span or an event, with its fields as text.
#[derive(Debug, Clone)]
struct Record {
    level: Level,
    fields: BTreeMap<String, String>,
    /// For events: the fields of every span around it, innermost first, by span name.
    scope: Vec<(String, BTreeMap<String, String>)>,
}

#[derive(Clone, Default)]
struct Capture {
    events: Arc<Mutex<Vec<Record>>>,
}

struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields.0);
        }
    }

    fn on_event(&self, event: &TraceEvent<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields(BTreeMap::new());
        event.record(&mut fields);
        let scope = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .map(|span| {
                        let fields = span
                            .extensions()
                            .get::<BTreeMap<String, String>>()
                            .cloned()
                            .unwrap_or_default();
                        (span.name().to_owned(), fields)
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.events.lock().unwrap().push(Record {
            level: *event.metadata().level(),
            fields: fields.0,
            scope,
        });
    }
}

impl Capture {
    fn records(&self) -> Vec<Record> {
        self.events.lock().unwrap().clone()
    }

    /// Every piece of text the records hold: messages, fields, span fields.
    fn all_text(&self) -> String {
        self.records()
            .iter()
            .map(|r| format!("{:?} {:?}", r.fields, r.scope))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs `scenario` on a current-thread runtime with paused time, recording metrics and
/// traces on this thread only.
fn recorded<F, Fut>(scenario: F) -> (Capture, DebuggingRecorder)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let capture = Capture::default();
    let recorder = DebuggingRecorder::new();
    let subscriber = tracing_subscriber::registry().with(capture.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        metrics::with_local_recorder(&recorder, || runtime.block_on(scenario()));
    });
    (capture, recorder)
}

async fn observed_run(engine: Engine) -> RunId {
    engine.register::<Observed>(Env::default()).unwrap();
    let run = engine
        .start::<Observed>(ObservedInput {
            secret: "SECRET-INPUT".into(),
        })
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "review", Duration::from_secs(60))
        .await
        .unwrap();
    run.review()
        .approve("ops", Some("SECRET-COMMENT"))
        .await
        .unwrap();
    run.outputs().await.unwrap();
    run.id()
}

fn engine(log_payloads: bool) -> Engine {
    Engine::builder()
        .clock(TokioClock::starting_at(0))
        .log_payloads(log_payloads)
        .build()
}

type Labels = BTreeMap<String, String>;

fn counters(recorder: &DebuggingRecorder) -> Vec<(Labels, u64)> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value): (CompositeKey, _, _, DebugValue)| {
            if key.key().name() != "workflow_action_total" {
                return None;
            }
            let labels = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            match value {
                DebugValue::Counter(n) => Some((labels, n)),
                _ => None,
            }
        })
        .collect()
}

fn labels(step: &str, outcome: &str, error_type: &str) -> Labels {
    [
        ("workflow", "Observed"),
        ("step", step),
        ("outcome", outcome),
        ("error_type", error_type),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

#[test]
fn the_action_counter_labels_each_outcome_with_a_bounded_error_type() {
    let (_, recorder) = recorded(|| async {
        observed_run(engine(false)).await;
    });
    let mut counted = counters(&recorder);
    counted.sort();
    let mut expected = vec![
        (labels("ok", "success", "none"), 1),
        (labels("flaky", "failure", "unavailable"), 1),
        (labels("flaky", "success", "none"), 1),
        (labels("bad", "failure", "validation"), 1),
    ];
    expected.sort();
    assert_eq!(counted, expected);
    let bounded: Vec<&str> = ErrorKind::ALL
        .iter()
        .map(|k| k.as_str())
        .chain(["none"])
        .collect();
    for (labels, _) in &counted {
        assert!(
            bounded.contains(&labels["error_type"].as_str()),
            "{labels:?}"
        );
    }
}

#[test]
fn run_and_step_spans_carry_workflow_run_step_attempt_and_trace_id() {
    let run = Arc::new(Mutex::new(None));
    let (capture, _) = recorded(|| {
        let run = run.clone();
        async move {
            *run.lock().unwrap() = Some(observed_run(engine(false)).await);
        }
    });
    let run = run.lock().unwrap().expect("a run");
    let records = capture.records();
    // What the action logs is inside the step's span, inside the run's span.
    let calls: Vec<&Record> = records
        .iter()
        .filter(|r| {
            r.fields
                .get("message")
                .is_some_and(|m| m == "calling the flaky service")
        })
        .collect();
    assert_eq!(calls.len(), 2, "two attempts");
    for (n, call) in calls.iter().enumerate() {
        let (span, step) = &call.scope[0];
        assert_eq!(span, "step");
        assert_eq!(step["step"], "flaky");
        assert_eq!(step["attempt"], (n + 1).to_string());
        let (span, fields) = &call.scope[1];
        assert_eq!(span, "run");
        assert_eq!(fields["workflow"], "Observed");
        assert_eq!(fields["run"], run.to_string());
        assert_eq!(fields["trace_id"].len(), 32, "{fields:?}");
    }
    // The engine's record of the failed attempt names the step, attempt and kind, in the
    // run's span.
    let failed = records
        .iter()
        .find(|r| {
            r.fields
                .get("message")
                .is_some_and(|m| m == "attempt failed")
        })
        .expect("the failed attempt is logged");
    assert_eq!(failed.level, Level::WARN);
    assert_eq!(failed.fields["step"], "flaky");
    assert_eq!(failed.fields["attempt"], "1");
    assert_eq!(failed.fields["error_type"], "unavailable");
    assert_eq!(failed.scope[0].0, "run");
    assert_eq!(failed.scope[0].1["run"], run.to_string());
}

#[test]
fn payloads_reach_no_log_line_unless_asked_for() {
    let (quiet, _) = recorded(|| async {
        observed_run(engine(false)).await;
    });
    let text = quiet.all_text();
    assert!(!text.is_empty());
    for secret in ["SECRET-INPUT", "SECRET-OUTPUT", "SECRET-COMMENT"] {
        assert!(!text.contains(secret), "{secret} was logged:\n{text}");
    }
    let (loud, _) = recorded(|| async {
        observed_run(engine(true)).await;
    });
    let text = loud.all_text();
    for secret in ["SECRET-INPUT", "SECRET-OUTPUT", "SECRET-COMMENT"] {
        assert!(
            text.contains(secret),
            "{secret} was not logged with log_payloads"
        );
    }
}

#[test]
fn the_engines_own_failures_are_logged_with_the_run_id() {
    let run = Arc::new(Mutex::new(None));
    let (capture, _) = recorded(|| {
        let run = run.clone();
        async move {
            let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
            let store: Arc<dyn Store> = Arc::new(faulty.clone());
            let engine = Engine::builder()
                .shared_store(store.clone())
                .clock(TokioClock::starting_at(0))
                .build();
            engine.register::<Observed>(Env::default()).unwrap();
            let started = engine
                .start::<Observed>(ObservedInput { secret: "s".into() })
                .await
                .unwrap();
            *run.lock().unwrap() = Some(started.id());
            faulty.fail_next(Write::Commit, 2, StoreError::Io("connection reset".into()));
            testing::wait_for_task(&engine, started.id(), "review", Duration::from_secs(60))
                .await
                .unwrap();
        }
    });
    let run = run.lock().unwrap().expect("a run").to_string();
    let records = capture.records();
    let refused = records
        .iter()
        .find(|r| r.level == Level::ERROR && r.fields.get("run").is_some_and(|v| *v == run))
        .expect("the store failure is logged at error with the run id");
    assert!(
        refused.fields["error"].contains("connection reset"),
        "{refused:?}"
    );
    assert!(records.iter().any(|r| r.level == Level::WARN
        && r.fields.get("run").is_some_and(|v| *v == run)
        && r.fields["message"].contains("accepts writes again")));
}

#[test]
fn a_run_parked_for_its_spec_is_logged_at_warn_with_its_id() {
    let (capture, _) = recorded(|| async {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let events = [workflow_core::journal::Event::RunStarted {
            workflow: "Observed".into(),
            fingerprint: "an-old-spec".into(),
            input: serde_json::json!({ "secret": "s" }),
            seed: 1,
            trace_id: "t".into(),
            parent_span: None,
            dry_run: false,
            deadline: None,
            at: 1,
        }];
        store
            .create_run(workflow_core::store::NewRun {
                workflow: "Observed",
                fingerprint: "an-old-spec",
                idempotency_key: None,
                events: &events,
                parent: None,
                owner: None,
                supersedes: None,
                at: 1,
                search: &[],
            })
            .await
            .unwrap();
        let engine = Engine::builder().shared_store(store).build();
        engine.register::<Observed>(Env::default()).unwrap();
        engine.resume_all().await.unwrap();
    });
    let parked = capture
        .records()
        .into_iter()
        .find(|r| {
            r.level == Level::WARN
                && r.fields
                    .get("message")
                    .is_some_and(|m| m.contains("parked"))
        })
        .expect("the parking is logged");
    assert_eq!(parked.fields["run"], "run-1");
}

/// A run started while a lease renewal is out is missing from the renewal's answer, which
/// was read before the run existed: the engine must not take that for a lost lease and
/// drop the run it has just started.
#[test]
fn a_run_started_while_a_renewal_is_out_is_not_dropped_as_lost() {
    let (capture, _) = recorded(|| async {
        let store = FaultyStore::new(Arc::new(MemoryStore::new()));
        store.slow_renewals(Duration::from_secs(1));
        let engine = Engine::builder()
            .shared_store(Arc::new(store))
            .clock(TokioClock::starting_at(0))
            .owner("worker-1")
            .lease(Duration::from_secs(6))
            .build();
        engine.register::<Observed>(Env::default()).unwrap();
        let input = || ObservedInput { secret: "s".into() };
        let first = engine.start::<Observed>(input()).await.unwrap();
        // The first renewal was asked for as the first run started and answers a second
        // later; this run starts in between.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let second = engine.start::<Observed>(input()).await.unwrap();
        for run in [first.id(), second.id()] {
            testing::wait_for_task(&engine, run, "review", Duration::from_secs(60))
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
        for run in [&first, &second] {
            run.review().approve("ops", None).await.unwrap();
            run.outputs().await.unwrap();
        }
    });
    let lost: Vec<Record> = capture
        .records()
        .into_iter()
        .filter(|r| {
            r.fields
                .get("message")
                .is_some_and(|m| m.contains("lost the lease"))
        })
        .collect();
    assert!(lost.is_empty(), "runs dropped as lost: {lost:?}");
}

//! What a worker cut off from its store logs: the store is unreachable (not "refused"),
//! and a step is logged as succeeded only once the commit of its result landed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::{Event as TraceEvent, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;
use workflow_core::clock::TokioClock;
use workflow_core::prelude::*;
use workflow_core::store::{MemoryStore, StoreError};
use workflow_core::testing::{FaultyStore, Write};

/// Every event's message, in order.
#[derive(Clone, Default)]
struct Messages(Arc<Mutex<Vec<String>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for Messages {
    fn on_event(&self, event: &TraceEvent<'_>, _: Context<'_, S>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        self.0.lock().unwrap().push(message.0);
    }
}

/// The store, which the step cuts off while it runs: the commit of its result fails.
struct Cut(FaultyStore);

async fn work(cut: &Cut) -> Result<u32, StepError> {
    cut.0.fail_next(
        Write::Commit,
        3,
        StoreError::Unreachable {
            target: "db:5432/app".into(),
            reason: "connection refused".into(),
        },
    );
    Ok(7)
}

workflow! {
    /// One step whose result's commit first finds the store unreachable.
    workflow CutOff(n: u32) env Cut {
        step work -> u32 { action: work(env) }
    }
}

#[test]
fn a_cut_off_worker_logs_an_unreachable_store_and_no_success_before_its_commit() {
    let messages = Messages::default();
    let subscriber = tracing_subscriber::registry().with(messages.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    tracing::subscriber::with_default(subscriber, || {
        runtime.block_on(async {
            let store = FaultyStore::new(Arc::new(MemoryStore::new()));
            let engine = Engine::builder()
                .store(store.clone())
                .clock(TokioClock::starting_at(0))
                .build();
            engine.register::<CutOff>(Cut(store.clone())).unwrap();
            let run = engine.start::<CutOff>(CutOffInput { n: 1 }).await.unwrap();
            let outputs = tokio::time::timeout(Duration::from_secs(60), run.outputs())
                .await
                .expect("in time")
                .expect("completes once the store answers");
            assert_eq!(outputs.work, 7);
            assert_eq!(store.failures(), 3);
        })
    });
    let messages = messages.0.lock().unwrap().clone();
    let unreachable = messages
        .iter()
        .position(|m| m.contains("store unreachable"))
        .unwrap_or_else(|| panic!("no `store unreachable`: {messages:?}"));
    let succeeded: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.as_str() == "step succeeded")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(succeeded.len(), 1, "{messages:?}");
    assert!(
        succeeded[0] > unreachable,
        "the success is logged after the commit that failed, once it landed: {messages:?}"
    );
    assert!(
        !messages.iter().any(|m| m.contains("refused")),
        "an unreachable store is not a refusal: {messages:?}"
    );
}

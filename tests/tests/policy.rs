//! One owner of run policy, end to end: decisions from other processes go through the
//! run's inbox and the owning engine's authorizer; admin operations are one transaction
//! each; an interrupted external effect is never repeated blindly; a handle takes up a run
//! nobody drives.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use workflow_core::admin;
use workflow_core::clock::TokioClock;
use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::store::{Commit, MemoryStore, NewRun, RunStatus, Store, StoreError};
use workflow_core::testing::{self, FaultyStore, Write};

#[derive(Default)]
pub struct Bank {
    charges: AtomicUsize,
    fail_next_charge: std::sync::atomic::AtomicBool,
}

async fn quote(amount: u32) -> Result<u32, StepError> {
    Ok(amount)
}

async fn charge(bank: &Bank, amount: u32) -> Result<u32, StepError> {
    bank.charges.fetch_add(1, Ordering::SeqCst);
    if bank.fail_next_charge.swap(false, Ordering::SeqCst) {
        return Err(StepError::validation("card declined"));
    }
    // The charge takes a while to confirm: long enough to be killed in the middle.
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(amount)
}

workflow! {
    /// A payment whose charge is an external effect, neither idempotent nor reconciled.
    workflow Payment(amount: u32) env Bank {
        step quote -> u32 { action: quote(amount) }
        step charge -> u32 { action: charge(env, quote), effect: external }
        human receipt -> Approval {
            assignee: "finance",
            depends_on: [charge],
            timeout: 1h,
            on_timeout: reject,
        }
    }
}

fn engine(store: Arc<dyn Store>) -> Engine {
    Engine::builder()
        .shared_store(store)
        .clock(TokioClock::starting_at(1_000_000))
        .seed(3)
        .build()
}

async fn journal(store: &dyn Store, run: RunId) -> Vec<Event> {
    store.load(run).await.unwrap().unwrap().events
}

async fn wait_until_started(store: &dyn Store, run: RunId, step: usize) {
    for _ in 0..1000 {
        if journal(store, run)
            .await
            .iter()
            .any(|e| matches!(e, Event::AttemptStarted { step: s, .. } if *s == step))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("step {step} never started");
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_external_effect_goes_to_an_operator_instead_of_running_twice() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let one = engine(store.clone());
    one.register::<Payment>(Bank::default()).unwrap();
    let run = one
        .start::<Payment>(PaymentInput { amount: 7 })
        .await
        .unwrap();
    wait_until_started(&*store, run.id(), 1).await;
    one.shutdown(); // killed while the charge is in flight

    let two = engine(store.clone());
    let bank = Bank::default();
    two.register::<Payment>(bank).unwrap();
    assert_eq!(two.resume_all().await.unwrap(), 1);
    let Err(error) = two
        .handle::<Payment>(run.id())
        .await
        .unwrap()
        .outputs()
        .await
    else {
        panic!("the run must not complete on a guess");
    };
    let RunError::Failed {
        step,
        attempts,
        error,
        ..
    } = error
    else {
        panic!("expected a failed run, got {error:?}");
    };
    assert_eq!((step.as_str(), attempts), ("charge", 1));
    assert_eq!(error.kind(), ErrorKind::OutcomeUnknown);
    assert!(error.message().contains("`charge`"), "{}", error.message());
    let letters = two.dead_letters().await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].kind, ErrorKind::OutcomeUnknown);
    let events = journal(&*store, run.id()).await;
    let started = events
        .iter()
        .filter(|e| matches!(e, Event::AttemptStarted { step: 1, .. }))
        .count();
    assert_eq!(started, 1, "the charge was never started again: {events:?}");
}

#[tokio::test(start_paused = true)]
async fn a_handle_takes_up_a_run_that_no_engine_drives() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let one = engine(store.clone());
    one.register::<Payment>(Bank::default()).unwrap();
    let first = one
        .start_with::<Payment>(PaymentInput { amount: 5 }, StartOptions::key("order-5"))
        .await
        .unwrap();
    testing::wait_for_task(&one, first.id(), "receipt", Duration::from_secs(600))
        .await
        .unwrap();
    one.shutdown();

    // A new process starts the same order again: it gets the existing run, and waiting on
    // it drives it, with no `resume_all`.
    let two = engine(store.clone());
    two.register::<Payment>(Bank::default()).unwrap();
    let again = two
        .start_with::<Payment>(PaymentInput { amount: 5 }, StartOptions::key("order-5"))
        .await
        .unwrap();
    assert!(!again.was_created());
    assert_eq!(again.id(), first.id());
    let outputs = tokio::time::timeout(Duration::from_secs(7200), again.outputs())
        .await
        .expect("driven to its end")
        .expect("outputs");
    assert_eq!(outputs.charge, 5);
    assert!(!outputs.receipt.approved, "on_timeout: reject decided it");
    let owner = store.load(first.id()).await.unwrap().unwrap().record.owner;
    assert_eq!(owner, None, "a finished run has no owner");
}

#[tokio::test(start_paused = true)]
async fn a_decision_left_in_the_inbox_is_admitted_by_the_owners_authorizer() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let strict = Engine::builder()
        .shared_store(store.clone())
        .authorizer(|_, by| by == "cfo")
        .build();
    strict.register::<Payment>(Bank::default()).unwrap();
    let run = strict
        .start::<Payment>(PaymentInput { amount: 9 })
        .await
        .unwrap();
    testing::wait_for_task(&strict, run.id(), "receipt", Duration::from_secs(600))
        .await
        .unwrap();
    let spec = Payment::spec();
    let approve = json!({ "approved": true, "by": "", "comment": null });
    // Another process: the machine finds nothing against either decision...
    for by in ["finance", "cfo"] {
        admin::submit_decision(
            &*store,
            run.id(),
            spec,
            "receipt",
            by,
            approve.clone(),
            None,
            strict.now(),
        )
        .await
        .unwrap();
    }
    // ...and the owner admits only the one its authorizer admits when it takes them in
    // (here as soon as a waiter wakes the run; on a file or a server within a second).
    let outputs = tokio::time::timeout(Duration::from_secs(60), run.outputs())
        .await
        .expect("finished")
        .expect("outputs");
    assert!(outputs.receipt.approved);
    assert_eq!(outputs.receipt.by, "cfo");
    let events = journal(&*store, run.id()).await;
    let timeline = testing::timeline(spec, &events);
    assert!(
        timeline.contains(&"message_refused receipt from finance (unauthorized)".to_owned()),
        "{timeline:?}"
    );
    assert!(
        timeline.contains(&"task_decided receipt by cfo".to_owned()),
        "{timeline:?}"
    );
}

/// A run of `Payment` that failed for good at its charge, with its dead letter.
async fn failed_run(store: &Arc<dyn Store>) -> (Engine, RunId) {
    let engine = engine(store.clone());
    let bank = Bank::default();
    bank.fail_next_charge.store(true, Ordering::SeqCst);
    engine.register::<Payment>(bank).unwrap();
    let run = engine
        .start::<Payment>(PaymentInput { amount: 3 })
        .await
        .unwrap();
    assert!(matches!(
        run.outputs().await,
        Err(RunError::Failed { step, .. }) if step == "charge"
    ));
    (engine, run.id())
}

#[tokio::test(start_paused = true)]
async fn a_retry_that_does_not_land_leaves_the_run_failed_with_its_dead_letter() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let store: Arc<dyn Store> = Arc::new(faulty.clone());
    let (engine, run) = failed_run(&store).await;
    let before = store.load(run).await.unwrap().unwrap();

    faulty.fail_next(Write::Commit, 1, StoreError::Io("disk full".into()));
    let error = engine
        .retry_dead_letter(run, "ops")
        .await
        .expect_err("refused");
    assert_eq!(error, RunError::Store(StoreError::Io("disk full".into())));
    let after = store.load(run).await.unwrap().unwrap();
    assert_eq!(after, before, "nothing of the retry was written");
    assert_eq!(store.dead_letters().await.unwrap().len(), 1);

    engine.retry_dead_letter(run, "ops").await.expect("retried");
    let events = journal(&*store, run).await;
    let retried = events
        .iter()
        .filter(|e| matches!(e, Event::Retried { .. }))
        .count();
    assert_eq!(retried, 1);
    assert!(store.dead_letters().await.unwrap().is_empty());
    let record = store.load(run).await.unwrap().unwrap().record;
    assert_eq!(record.status, RunStatus::Running);
    assert_eq!(record.note.as_deref(), Some("retried by ops"));
    assert_eq!(
        record.owner.as_deref(),
        Some(engine.owner()),
        "taken up at once"
    );
}

/// A run in the store started under a spec no engine registers: resuming parks it.
async fn parked_run(store: &Arc<dyn Store>, engine: &Engine) -> RunId {
    let events = [Event::RunStarted {
        workflow: "Payment".into(),
        fingerprint: "an-old-spec".into(),
        input: json!({ "amount": 4 }),
        seed: 1,
        trace_id: "t".into(),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at: 1,
    }];
    let run = store
        .create_run(NewRun {
            workflow: "Payment",
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
        .unwrap()
        .id();
    engine.resume_all().await.unwrap();
    assert_eq!(
        store.load(run).await.unwrap().unwrap().record.status,
        RunStatus::Parked
    );
    run
}

#[tokio::test(start_paused = true)]
async fn restart_and_cancel_of_a_parked_run_land_whole_or_not_at_all() {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::new()));
    let store: Arc<dyn Store> = Arc::new(faulty.clone());
    let engine = engine(store.clone());
    engine.register::<Payment>(Bank::default()).unwrap();
    let parked = parked_run(&store, &engine).await;
    let runs_before = engine.runs(Default::default()).await.unwrap().len();

    faulty.fail_next(Write::Create, 1, StoreError::Io("connection lost".into()));
    assert!(engine.restart_parked(parked, "ops").await.is_err());
    assert_eq!(
        engine.runs(Default::default()).await.unwrap().len(),
        runs_before
    );
    assert_eq!(
        store.load(parked).await.unwrap().unwrap().record.status,
        RunStatus::Parked,
        "neither half of the restart happened"
    );
    let new = engine
        .restart_parked(parked, "ops")
        .await
        .expect("restarted");
    let again = engine
        .restart_parked(parked, "ops")
        .await
        .expect("idempotent");
    assert_eq!(new, again, "a second restart names the same new run");
    let old = store.load(parked).await.unwrap().unwrap().record;
    assert_eq!(old.status, RunStatus::Cancelled);
    assert!(old.note.unwrap().contains("restarted by ops"));

    let other = parked_run(&store, &engine).await;
    faulty.fail_next(Write::Commit, 1, StoreError::Io("connection lost".into()));
    assert!(engine.cancel(other, "ops").await.is_err());
    let record = store.load(other).await.unwrap().unwrap();
    assert_eq!(record.record.status, RunStatus::Parked);
    assert_eq!(record.events.len(), 1);
    engine.cancel(other, "ops").await.expect("cancelled");
    let record = store.load(other).await.unwrap().unwrap();
    assert_eq!(record.record.status, RunStatus::Cancelled);
    assert!(matches!(
        record.events.last(),
        Some(Event::Cancelled { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_stale_fence_cannot_write() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let engine = engine(store.clone());
    engine.register::<Payment>(Bank::default()).unwrap();
    let run = engine
        .start::<Payment>(PaymentInput { amount: 1 })
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "receipt", Duration::from_secs(600))
        .await
        .unwrap();
    let record = store.load(run.id()).await.unwrap().unwrap();
    assert_eq!(record.record.owner.as_deref(), Some(engine.owner()));
    let seq = record.events.len() as u64;
    let refused = store
        .commit(Commit {
            fence: Some(workflow_core::store::Fence {
                owner: "someone-else",
                token: 1,
            }),
            ..Commit::events(run.id(), seq, &[], 0)
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Fenced { .. })),
        "{refused:?}"
    );
}

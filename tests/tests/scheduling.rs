//! Scheduling and failure policies: parallel branches, compensation order, `continue`,
//! conditions, dry runs, idempotent starts, workflow deadlines and cancellation.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;
use workflow_core::testing::{self, Recorder, Script};

#[derive(Default)]
pub struct Env {
    log: Recorder<String>,
    fail_ship: bool,
}

async fn fetch(env: &Env, name: &'static str, secs: u64) -> Result<u64, StepError> {
    env.log.record(format!("start {name}"));
    tokio::time::sleep(Duration::from_secs(secs)).await;
    env.log.record(format!("end {name}"));
    Ok(secs)
}

async fn merge(env: &Env, a: u64, b: u64, c: u64) -> Result<u64, StepError> {
    env.log.record("merge".into());
    Ok(a + b + c)
}

workflow! {
    /// Fan out to three fetches and merge them.
    workflow Report() env Env {
        step a -> u64 { action: fetch(env, "a", 10) }
        step b -> u64 { action: fetch(env, "b", 7) }
        step c -> u64 { action: fetch(env, "c", 4) }
        step total -> u64 { action: merge(env, a, b, c) }
    }
}

#[tokio::test(start_paused = true)]
async fn independent_steps_run_concurrently() {
    let engine = Engine::builder().build();
    engine.register::<Report>(Env::default()).unwrap();
    let started = tokio::time::Instant::now();
    let run = engine.start::<Report>(ReportInput {}).await.unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.total, 21);
    // The longest branch (10s), not the sum (21s).
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(10) && elapsed < Duration::from_secs(11),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_per_run_limit_bounds_concurrency() {
    let engine = Engine::builder().max_in_flight(1).build();
    engine.register::<Report>(Env::default()).unwrap();
    let started = tokio::time::Instant::now();
    let run = engine.start::<Report>(ReportInput {}).await.unwrap();
    assert_eq!(run.outputs().await.unwrap().total, 21);
    assert!(started.elapsed() >= Duration::from_secs(21));
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reservation(String);
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Charge(String);

mod shop {
    use super::*;
    pub async fn reserve(env: &Env, order: String) -> Result<Reservation, StepError> {
        env.log.record(format!("reserve {order}"));
        Ok(Reservation(format!("res-{order}")))
    }
    pub async fn release(env: &Env, reservation: Reservation) -> Result<(), StepError> {
        env.log.record(format!("release {}", reservation.0));
        Ok(())
    }
    pub async fn charge(env: &Env, ctx: &StepContext, order: String) -> Result<Charge, StepError> {
        env.log
            .record(format!("charge {order} key={}", ctx.idempotency_key));
        Ok(Charge(format!("ch-{order}")))
    }
    pub async fn refund(env: &Env, charge: Charge) -> Result<(), StepError> {
        env.log.record(format!("refund {}", charge.0));
        Ok(())
    }
    pub async fn notify(env: &Env) -> Result<(), StepError> {
        env.log.record("notify".into());
        Ok(())
    }
    pub async fn ship(
        env: &Env,
        _reservation: Reservation,
        _charge: Charge,
    ) -> Result<String, StepError> {
        if env.fail_ship {
            env.log.record("ship failed".into());
            return Err(StepError::validation("address rejected by carrier"));
        }
        Ok("tracking-1".into())
    }
}

workflow! {
    workflow OrderSaga(order: String) env Env {
        step reserve -> Reservation {
            action: shop::reserve(env, order),
            compensate: shop::release(env, reserve),
        }
        step charge -> Charge {
            action: shop::charge(env, ctx, order),
            depends_on: [reserve],
            effect: external,
            idempotent: true,
            compensate: shop::refund(env, charge),
        }
        step notify -> () {
            action: shop::notify(env),
            depends_on: [charge],
        }
        step ship -> String {
            action: shop::ship(env, reserve, charge),
            depends_on: [notify],
        }
    }
}

#[tokio::test(start_paused = true)]
async fn abort_compensates_completed_steps_in_reverse_order() {
    let engine = Engine::builder().build();
    let env = Env {
        fail_ship: true,
        ..Env::default()
    };
    let log = env.log.clone();
    engine.register::<OrderSaga>(env).unwrap();
    let run = engine
        .start::<OrderSaga>(OrderSagaInput { order: "o1".into() })
        .await
        .unwrap();
    match run.outputs().await {
        Err(RunError::Failed {
            step,
            attempts,
            error,
            ..
        }) => {
            assert_eq!(
                (step.as_str(), attempts, error.kind()),
                ("ship", 1, ErrorKind::Validation)
            );
        }
        other => panic!("expected failure, got {:?}", other.is_ok()),
    }
    let calls = log.calls();
    let key = format!("OrderSaga/{}/charge", run.id().0);
    assert_eq!(
        calls,
        [
            "reserve o1",
            &format!("charge o1 key={key}"),
            "notify",
            "ship failed",
            "refund ch-o1",
            "release res-o1"
        ]
    );
    let dead = engine.dead_letters().await.unwrap();
    assert_eq!(dead[0].step, "ship");
    assert_eq!(dead[0].message, "address rejected by carrier");
}

#[tokio::test(start_paused = true)]
async fn a_successful_saga_compensates_nothing() {
    let engine = Engine::builder().build();
    let env = Env::default();
    let log = env.log.clone();
    engine.register::<OrderSaga>(env).unwrap();
    let run = engine
        .start::<OrderSaga>(OrderSagaInput { order: "o2".into() })
        .await
        .unwrap();
    assert_eq!(run.outputs().await.unwrap().ship, "tracking-1");
    assert!(!log
        .calls()
        .iter()
        .any(|c| c.starts_with("refund") || c.starts_with("release")));
}

pub struct Flaky {
    email: Script<String>,
    seen: Recorder<String>,
}

async fn send_email(env: &Flaky) -> Result<String, StepError> {
    env.email.next().await
}

async fn after_email(env: &Flaky, receipt: Option<String>) -> Result<bool, StepError> {
    env.seen.record(format!("{receipt:?}"));
    Ok(receipt.is_some())
}

async fn decide(_env: &Flaky, amount: u32) -> Result<u32, StepError> {
    Ok(amount)
}

async fn big_only(env: &Flaky, amount: u32) -> Result<String, StepError> {
    env.seen.record(format!("big {amount}"));
    Ok("flagged".into())
}

async fn summary(env: &Flaky, flag: Option<String>) -> Result<String, StepError> {
    env.seen.record(format!("summary {flag:?}"));
    Ok(flag.unwrap_or_else(|| "none".into()))
}

workflow! {
    workflow Optional(amount: u32) env Flaky {
        step email -> String {
            action: send_email(env),
            on_failure: continue,
        }
        step after -> bool {
            action: after_email(env, email),
        }
        step measure -> u32 {
            action: decide(env, amount),
        }
        step flag -> String {
            action: big_only(env, measure),
            condition: *measure > 100,
        }
        step report -> String {
            action: summary(env, flag),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn continue_gives_none_downstream_and_false_conditions_skip() {
    let engine = Engine::builder().build();
    let seen = Recorder::new();
    let env = Flaky {
        email: Script::new().fail(1, ErrorKind::Validation),
        seen: seen.clone(),
    };
    engine.register::<Optional>(env).unwrap();
    let run = engine
        .start::<Optional>(OptionalInput { amount: 5 })
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.email, None);
    assert_eq!(outputs.after, Some(false));
    assert_eq!(outputs.flag, None);
    assert_eq!(outputs.report.as_deref(), Some("none"));
    assert_eq!(seen.calls(), ["None", "summary None"]);
    let view = run.inspect().await.unwrap();
    assert_eq!(view.steps[0].state.name(), "failed");
    assert_eq!(view.steps[3].state.name(), "skipped");
    assert!(
        engine.dead_letters().await.unwrap().is_empty(),
        "continue is not a dead letter"
    );
}

#[tokio::test(start_paused = true)]
async fn true_conditions_run_the_step() {
    let engine = Engine::builder().build();
    let seen = Recorder::new();
    let env = Flaky {
        email: Script::new().succeed("r1".into()),
        seen: seen.clone(),
    };
    engine.register::<Optional>(env).unwrap();
    let run = engine
        .start::<Optional>(OptionalInput { amount: 500 })
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.email.as_deref(), Some("r1"));
    assert_eq!(outputs.flag.as_deref(), Some("flagged"));
    assert!(seen.calls().contains(&"big 500".to_owned()));
}

pub struct Mailer {
    sent: Recorder<String>,
}

async fn compose(_env: &Mailer, to: String) -> Result<String, StepError> {
    Ok(format!("hello {to}"))
}

async fn deliver(env: &Mailer, ctx: &StepContext, body: String) -> Result<u32, StepError> {
    assert!(!ctx.dry_run, "a dry run never executes an external effect");
    env.sent.record(body);
    Ok(1)
}

async fn audit(_env: &Mailer, delivered: u32) -> Result<u32, StepError> {
    Ok(delivered)
}

workflow! {
    workflow Newsletter(to: String) env Mailer {
        step body -> String { action: compose(env, to) }
        step send -> u32 {
            action: deliver(env, ctx, body),
            effect: external,
            idempotent: true,
            retry: { max_attempts: 3 },
        }
        step log -> u32 { action: audit(env, send) }
    }
}

#[tokio::test(start_paused = true)]
async fn dry_runs_propose_external_effects_without_executing_them() {
    let engine = Engine::builder().build();
    let sent = Recorder::new();
    engine
        .register::<Newsletter>(Mailer { sent: sent.clone() })
        .unwrap();
    let options = StartOptions {
        dry_run: true,
        ..StartOptions::default()
    };
    let run = engine
        .start_with::<Newsletter>(NewsletterInput { to: "ada".into() }, options)
        .await
        .unwrap();
    assert!(
        matches!(run.outputs().await, Err(RunError::Absent { ref step, .. }) if step == "send")
    );
    assert_eq!(sent.count(), 0);
    let proposals = run.proposals().await.unwrap();
    assert_eq!(proposals.len(), 1);
    assert_eq!(proposals[0].0, "send");
    assert_eq!(proposals[0].1["body"], "hello ada");
    let view = run.inspect().await.unwrap();
    assert_eq!(view.steps[1].state.name(), "skipped");
    assert_eq!(
        view.steps[2].state.name(),
        "skipped",
        "downstream sees the proposal as skipped"
    );
}

#[tokio::test(start_paused = true)]
async fn a_start_with_a_used_idempotency_key_returns_the_same_run() {
    let engine = Engine::builder().build();
    let sent = Recorder::new();
    engine
        .register::<Newsletter>(Mailer { sent: sent.clone() })
        .unwrap();
    let input = || NewsletterInput { to: "bob".into() };
    let first = engine
        .start_with::<Newsletter>(input(), StartOptions::key("evt_1"))
        .await
        .unwrap();
    let second = engine
        .start_with::<Newsletter>(input(), StartOptions::key("evt_1"))
        .await
        .unwrap();
    assert_eq!(first.id(), second.id());
    first.outputs().await.unwrap();
    let third = engine
        .start_with::<Newsletter>(input(), StartOptions::key("evt_1"))
        .await
        .unwrap();
    assert_eq!(third.id(), first.id());
    assert_eq!(third.outputs().await.unwrap().send, 1);
    assert_eq!(sent.calls(), ["hello bob"]);
    let other = engine
        .start_with::<Newsletter>(input(), StartOptions::key("evt_2"))
        .await
        .unwrap();
    assert_ne!(other.id(), first.id());
}

#[tokio::test(start_paused = true)]
async fn a_workflow_deadline_fails_and_compensates_the_run() {
    let engine = Engine::builder().build();
    engine.register::<Report>(Env::default()).unwrap();
    let options = StartOptions {
        deadline: Some(Duration::from_secs(5)),
        ..StartOptions::default()
    };
    let run = engine
        .start_with::<Report>(ReportInput {}, options)
        .await
        .unwrap();
    assert!(matches!(
        run.outputs().await,
        Err(RunError::DeadlineExceeded(_))
    ));
    let dead = engine.dead_letters().await.unwrap();
    assert_eq!(dead[0].kind, ErrorKind::Timeout);
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_run_compensates_and_reports_cancelled() {
    let engine = Engine::builder().build();
    let env = Env::default();
    let log = env.log.clone();
    engine.register::<Report>(env).unwrap();
    let run = engine.start::<Report>(ReportInput {}).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    run.cancel("operator").await.unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Cancelled(_))));
    assert!(!log.calls().contains(&"merge".to_owned()));
    let events = testing::events(&engine, run.id()).await.unwrap();
    assert!(
        testing::timeline(Report::spec(), &events).contains(&"cancelled by operator".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_runs_and_unregistered_workflows_are_typed_errors() {
    let engine = Engine::builder().build();
    assert!(matches!(
        engine.start::<Report>(ReportInput {}).await,
        Err(RunError::NotRegistered(_))
    ));
    assert!(matches!(
        engine.inspect(RunId(99)).await,
        Err(RunError::UnknownRun(RunId(99)))
    ));
    engine.register::<Report>(Env::default()).unwrap();
    assert!(matches!(
        engine.handle::<Report>(RunId(42)).await,
        Err(RunError::UnknownRun(_))
    ));
}

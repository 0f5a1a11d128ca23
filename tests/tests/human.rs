//! Human checkpoints: decisions, authorization, double and late decisions, timeouts with
//! escalation, approve/reject/abort on timeout. 48-hour timeouts run under paused time.

use std::time::Duration;

use workflow_core::prelude::*;
use workflow_core::testing::{self, Recorder};
use workflow_core::{DecisionError, TIMEOUT_DECIDER};

#[derive(Default)]
pub struct Env {
    published: Recorder<String>,
}

async fn prepare(_env: &Env, item: String) -> Result<String, StepError> {
    Ok(format!("draft of {item}"))
}

async fn publish(env: &Env, draft: String) -> Result<(), StepError> {
    env.published.record(draft);
    Ok(())
}

workflow! {
    /// Publish content after a moderator's review.
    workflow Review(item: String) env Env {
        step prepare -> String { action: prepare(env, item) }
        human review -> Approval {
            assignee: "mods",
            depends_on: [prepare],
            timeout: 48h,
            on_timeout: escalate("leads"),
            prompt: "Publish this item?",
        }
        step publish -> () {
            action: publish(env, prepare),
            depends_on: [review],
            condition: review.approved,
        }
    }
}

workflow! {
    workflow AutoApprove() env Env {
        human review -> Approval { assignee: "mods", timeout: 1h, on_timeout: approve }
    }
}

workflow! {
    workflow AutoReject() env Env {
        human review -> Approval { assignee: "mods", timeout: 1h, on_timeout: reject }
    }
}

workflow! {
    workflow Strict() env Env {
        human review -> Approval { assignee: "mods", timeout: 1h, on_timeout: abort }
    }
}

const WAIT: Duration = Duration::from_secs(60);

async fn started() -> (Engine, RunHandle<Review>, Recorder<String>) {
    let engine = Engine::builder().build();
    let env = Env::default();
    let published = env.published.clone();
    engine.register::<Review>(env).unwrap();
    let run = engine
        .start::<Review>(ReviewInput {
            item: "post-1".into(),
        })
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "review", WAIT)
        .await
        .unwrap();
    (engine, run, published)
}

#[tokio::test(start_paused = true)]
async fn an_approval_lets_the_run_continue_and_is_audited() {
    let (engine, run, published) = started().await;
    let task = run.review().info().await.unwrap();
    assert_eq!(task.assignee, "mods");
    assert_eq!(task.prompt.as_deref(), Some("Publish this item?"));
    let left = task.deadline - engine.now();
    assert!(
        left <= 48 * 3600 * 1000 && left > 48 * 3600 * 1000 - 1000,
        "{left}"
    );
    run.review()
        .approve("ana@mods", Some("fine"))
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert!(outputs.review.approved);
    assert_eq!(outputs.review.by, "ana@mods");
    assert_eq!(outputs.review.comment.as_deref(), Some("fine"));
    assert_eq!(outputs.publish, Some(()));
    assert_eq!(published.calls(), ["draft of post-1"]);
    let events = testing::events(&engine, run.id()).await.unwrap();
    assert!(testing::timeline(Review::spec(), &events)
        .contains(&"task_decided review by ana@mods".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn a_rejection_skips_the_conditional_step() {
    let (_engine, run, published) = started().await;
    run.review().reject("ana@mods", Some("spam")).await.unwrap();
    let outputs = run.outputs().await.unwrap();
    assert!(!outputs.review.approved);
    assert_eq!(outputs.publish, None);
    assert_eq!(published.count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_second_decision_is_refused_and_the_first_stands() {
    let (_engine, run, _) = started().await;
    run.review().approve("ana@mods", None).await.unwrap();
    let second = run.review().reject("bob@mods", None).await;
    assert_eq!(
        second,
        Err(DecisionError::AlreadyDecided {
            run: run.id(),
            step: "review".into(),
            by: "ana@mods".into()
        })
    );
    assert!(run.outputs().await.unwrap().review.approved);
    // Still refused once the run is over.
    assert!(matches!(
        run.review().reject("bob@mods", None).await,
        Err(DecisionError::AlreadyDecided { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn an_unauthorized_approver_is_refused_and_the_task_stays_open() {
    let (_engine, run, _) = started().await;
    let refused = run.review().approve("mallory@elsewhere", None).await;
    assert_eq!(
        refused,
        Err(DecisionError::Unauthorized {
            step: "review".into(),
            by: "mallory@elsewhere".into(),
            assignee: "mods".into()
        })
    );
    assert!(run.review().info().await.is_some());
    run.review().approve("mods", None).await.unwrap();
    assert!(run.outputs().await.unwrap().review.approved);
}

#[tokio::test(start_paused = true)]
async fn a_custom_authorizer_decides_who_may_approve() {
    let engine = Engine::builder()
        .authorizer(|assignee, by| assignee == "mods" && by == "root")
        .build();
    engine.register::<Review>(Env::default()).unwrap();
    let run = engine
        .start::<Review>(ReviewInput { item: "x".into() })
        .await
        .unwrap();
    testing::wait_for_task(&engine, run.id(), "review", WAIT)
        .await
        .unwrap();
    assert!(matches!(
        run.review().approve("ana@mods", None).await,
        Err(DecisionError::Unauthorized { .. })
    ));
    run.review().approve("root", None).await.unwrap();
    assert!(run.outputs().await.unwrap().review.approved);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_escalates_once_then_expires() {
    let (engine, run, published) = started().await;
    tokio::time::sleep(Duration::from_secs(48 * 3600 + 1)).await;
    let task = run.review().info().await.expect("escalated task is open");
    assert_eq!(task.assignee, "leads");
    assert!(task.escalated);
    // The original group may no longer decide; the leads may not decide late either.
    assert!(matches!(
        run.review().approve("ana@mods", None).await,
        Err(DecisionError::Unauthorized { .. })
    ));
    tokio::time::sleep(Duration::from_secs(48 * 3600)).await;
    let late = run.review().approve("lee@leads", None).await;
    assert!(
        matches!(late, Err(DecisionError::Expired { .. })),
        "{late:?}"
    );
    match run.outputs().await {
        Err(RunError::Failed { step, error, .. }) => {
            assert_eq!(step, "review");
            assert_eq!(error.kind(), ErrorKind::Timeout);
        }
        other => panic!("expected the run to fail, got ok={}", other.is_ok()),
    }
    assert_eq!(published.count(), 0);
    let events = testing::events(&engine, run.id()).await.unwrap();
    let timeline = testing::timeline(Review::spec(), &events);
    let human: Vec<_> = timeline.iter().filter(|l| l.starts_with("task_")).collect();
    assert_eq!(
        human,
        [
            "task_opened review for mods",
            "task_escalated review to leads",
            "task_expired review"
        ]
    );
    let offsets = testing::offsets(&events);
    let escalated = events
        .iter()
        .position(|e| matches!(e, workflow_core::journal::Event::TaskEscalated { .. }))
        .unwrap();
    assert_eq!(offsets[escalated], 48 * 3600 * 1000);
}

#[tokio::test(start_paused = true)]
async fn the_escalation_group_can_decide() {
    let (_engine, run, published) = started().await;
    tokio::time::sleep(Duration::from_secs(48 * 3600 + 1)).await;
    run.review()
        .approve("lee@leads", Some("escalated ok"))
        .await
        .unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.review.by, "lee@leads");
    assert_eq!(published.count(), 1);
}

#[tokio::test(start_paused = true)]
async fn on_timeout_approve_and_reject_decide_as_the_workflow() {
    let engine = Engine::builder().build();
    engine.register::<AutoApprove>(Env::default()).unwrap();
    engine.register::<AutoReject>(Env::default()).unwrap();
    let approved = engine
        .start::<AutoApprove>(AutoApproveInput {})
        .await
        .unwrap();
    let rejected = engine
        .start::<AutoReject>(AutoRejectInput {})
        .await
        .unwrap();
    let approved = approved.outputs().await.unwrap().review;
    let rejected = rejected.outputs().await.unwrap().review;
    assert!(approved.approved);
    assert!(!rejected.approved);
    assert_eq!(approved.by, TIMEOUT_DECIDER);
}

#[tokio::test(start_paused = true)]
async fn on_timeout_abort_fails_the_run() {
    let engine = Engine::builder().build();
    engine.register::<Strict>(Env::default()).unwrap();
    let run = engine.start::<Strict>(StrictInput {}).await.unwrap();
    assert!(matches!(run.outputs().await, Err(RunError::Failed { .. })));
    assert!(matches!(
        run.review().approve("mods", None).await,
        Err(DecisionError::Expired { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn untyped_decisions_are_checked_against_the_step_type() {
    let (engine, run, _) = started().await;
    let wrong = engine
        .decide(
            run.id(),
            "review",
            "ana@mods",
            serde_json::json!({ "yes": 1 }),
        )
        .await;
    assert!(
        matches!(wrong, Err(DecisionError::WrongType { .. })),
        "{wrong:?}"
    );
    let unknown = engine
        .decide(run.id(), "nope", "ana@mods", serde_json::json!({}))
        .await;
    assert!(matches!(unknown, Err(DecisionError::UnknownTask { .. })));
    let no_run = engine
        .decide(RunId(404), "review", "ana@mods", serde_json::json!({}))
        .await;
    assert_eq!(no_run, Err(DecisionError::UnknownRun(RunId(404))));
    let not_open = engine
        .decide(run.id(), "publish", "ana@mods", serde_json::json!({}))
        .await;
    assert!(matches!(not_open, Err(DecisionError::UnknownTask { .. })));
    let right = serde_json::json!({ "approved": true, "by": "someone else", "comment": null });
    engine
        .decide(run.id(), "review", "ana@mods", right)
        .await
        .unwrap();
    assert_eq!(
        run.outputs().await.unwrap().review.by,
        "ana@mods",
        "the engine records who decided"
    );
}

#[tokio::test(start_paused = true)]
async fn open_tasks_are_listed_until_decided() {
    let (engine, run, _) = started().await;
    let open = engine.open_tasks().await.unwrap();
    assert_eq!(open.len(), 1);
    assert_eq!(
        (
            open[0].run,
            open[0].step.as_str(),
            open[0].workflow.as_str()
        ),
        (run.id(), "review", "Review")
    );
    run.review().approve("ana@mods", None).await.unwrap();
    run.outputs().await.unwrap();
    assert!(engine.open_tasks().await.unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_parked_run_is_unloaded_and_woken_by_its_decision_or_its_timer() {
    let (engine, run, published) = started().await;
    assert_eq!(
        engine.hibernating(),
        1,
        "nothing in flight: the run is unloaded"
    );
    run.review().approve("ana@mods", None).await.unwrap();
    assert_eq!(run.outputs().await.unwrap().publish, Some(()));
    assert_eq!(engine.hibernating(), 0);
    assert_eq!(published.count(), 1);

    // A second run sleeps until its deadline wakes it for the escalation.
    let other = engine
        .start::<Review>(ReviewInput {
            item: "post-2".into(),
        })
        .await
        .unwrap();
    testing::wait_for_task(&engine, other.id(), "review", WAIT)
        .await
        .unwrap();
    assert_eq!(engine.hibernating(), 1);
    tokio::time::sleep(Duration::from_secs(48 * 3600 + 1)).await;
    let task = other.review().info().await.unwrap();
    assert_eq!(
        task.assignee, "leads",
        "the timer woke the run, which escalated"
    );
    assert_eq!(engine.hibernating(), 1, "and it went back to sleep");
}

//! How step futures run: a run's steps are polled by the run's own driver task (no task
//! per step), parallel steps still overlap their waiting, a step declared `spawn: true`
//! runs as a task of its own, and a panic in a step is caught and journaled as that step's
//! failure either way.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use workflow_core::clock::TokioClock;
use workflow_core::prelude::*;

/// The task each step ran on, by step.
#[derive(Default)]
pub struct Seen {
    tasks: Mutex<Vec<(&'static str, Option<tokio::task::Id>)>>,
}

impl Seen {
    fn note(&self, step: &'static str) {
        self.tasks
            .lock()
            .unwrap()
            .push((step, tokio::task::try_id()));
    }

    fn task_of(&self, step: &str) -> Option<tokio::task::Id> {
        self.tasks
            .lock()
            .unwrap()
            .iter()
            .find(|(s, _)| *s == step)
            .and_then(|(_, id)| *id)
    }
}

async fn wait(seen: &Arc<Seen>, ctx: &StepContext, millis: u64) -> Result<u64, StepError> {
    seen.note(ctx.step);
    tokio::time::sleep(Duration::from_millis(millis)).await;
    Ok(millis)
}

async fn crunch(seen: &Arc<Seen>, ctx: &StepContext) -> Result<u64, StepError> {
    seen.note(ctx.step);
    Ok(42)
}

async fn explode(seen: &Arc<Seen>, ctx: &StepContext) -> Result<u64, StepError> {
    seen.note(ctx.step);
    panic!("boom in {}", ctx.step);
}

workflow! {
    workflow Parallel() env std::sync::Arc<Seen> {
        step a -> u64 { action: wait(env, ctx, 1000) }
        step b -> u64 { action: wait(env, ctx, 1000) }
        step c -> u64 { action: crunch(env, ctx), spawn: true }
        step d -> u64 { action: wait(env, ctx, 10), depends_on: [a, b, c] }
    }
}

workflow! {
    workflow Panicky() env std::sync::Arc<Seen> {
        step polled -> u64 { action: explode(env, ctx), on_failure: continue }
        step own_task -> u64 { action: explode(env, ctx), spawn: true, on_failure: continue }
        step after -> u64 { action: crunch(env, ctx), depends_on: [polled, own_task] }
    }
}

fn engine() -> Engine {
    Engine::builder()
        .clock(TokioClock::starting_at(0))
        .seed(1)
        .build()
}

#[tokio::test(start_paused = true)]
async fn steps_are_polled_by_their_runs_task_and_spawn_true_gets_its_own() {
    let seen = Arc::new(Seen::default());
    let engine = engine();
    engine.register::<Parallel>(Arc::clone(&seen)).unwrap();
    let started = tokio::time::Instant::now();
    let run = engine.start::<Parallel>(ParallelInput {}).await.unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(
        (outputs.a, outputs.b, outputs.c, outputs.d),
        (1000, 1000, 42, 10)
    );
    // a and b waited side by side, not one after the other.
    assert_eq!(started.elapsed(), Duration::from_millis(1010));
    let (a, b, c, d) = (
        seen.task_of("a").expect("a ran in a task"),
        seen.task_of("b").expect("b ran in a task"),
        seen.task_of("c").expect("c ran in a task"),
        seen.task_of("d").expect("d ran in a task"),
    );
    assert_eq!(a, b, "polled steps share their run's task");
    assert_eq!(a, d);
    assert_ne!(a, c, "a `spawn: true` step runs in a task of its own");
}

#[tokio::test(start_paused = true)]
async fn a_panic_in_a_step_is_that_steps_failure_whether_polled_or_spawned() {
    let seen = Arc::new(Seen::default());
    let engine = engine();
    engine.register::<Panicky>(Arc::clone(&seen)).unwrap();
    let run = engine.start::<Panicky>(PanickyInput {}).await.unwrap();
    let outputs = run.outputs().await.unwrap();
    assert_eq!(outputs.polled, None);
    assert_eq!(outputs.own_task, None);
    assert_eq!(outputs.after, Some(42), "the run went on");
    let events = workflow_core::testing::events(&engine, run.id())
        .await
        .unwrap();
    let failures: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            workflow_core::journal::Event::AttemptFailed { message, kind, .. } => {
                assert_eq!(*kind, ErrorKind::Internal);
                Some(message.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures.iter().any(|m| m.contains("boom in polled")),
        "{failures:?}"
    );
    assert!(
        failures.iter().any(|m| m.contains("boom in own_task")),
        "{failures:?}"
    );
}

//! Retries under paused time: exact delays per backoff and jitter mode, classification,
//! deadlines and retry-after.

use std::time::Duration;

use workflow_core::journal::Event;
use workflow_core::prelude::*;
use workflow_core::spec::RetryPolicy;
use workflow_core::testing::{self, Script};

pub struct Env {
    script: Script<u32>,
    work: Duration,
}

impl Env {
    fn new(script: Script<u32>) -> Self {
        Env {
            script,
            work: Duration::ZERO,
        }
    }
}

async fn call(env: &Env) -> Result<u32, StepError> {
    tokio::time::sleep(env.work).await;
    env.script.next().await
}

workflow! {
    workflow Exponential() env Env {
        step flaky -> u32 {
            action: call(env),
            retry: { max_attempts: 5, backoff: exponential, initial: 1s, max: 5s, multiplier: 2, jitter: none },
        }
    }
}

workflow! {
    workflow Linear() env Env {
        step flaky -> u32 {
            action: call(env),
            retry: { max_attempts: 4, backoff: linear, initial: 2s, max: 5s, jitter: none },
        }
    }
}

workflow! {
    workflow Fixed() env Env {
        step flaky -> u32 {
            action: call(env),
            retry: { max_attempts: 3, backoff: fixed, initial: 500ms, max: 1s, jitter: none },
        }
    }
}

workflow! {
    workflow Jittered() env Env {
        step flaky -> u32 {
            action: call(env),
            retry: { max_attempts: 4, backoff: exponential, initial: 1s, max: 60s, jitter: full },
        }
    }
}

workflow! {
    workflow EqualJitter() env Env {
        step flaky -> u32 {
            action: call(env),
            retry: { max_attempts: 4, backoff: exponential, initial: 1s, max: 60s, jitter: equal },
        }
    }
}

workflow! {
    workflow Bounded() env Env {
        step flaky -> u32 {
            action: call(env),
            retry: { max_attempts: 5, backoff: fixed, initial: 1s, max: 1s, jitter: none, deadline: 10s },
        }
    }
}

workflow! {
    workflow NotFoundRetried() env Env {
        step flaky -> u32 {
            action: call(env),
            retry: { max_attempts: 3, backoff: fixed, initial: 1s, max: 1s, jitter: none, retry_on: [not_found] },
        }
    }
}

workflow! {
    workflow TimedOut() env Env {
        step slow -> u32 {
            action: call(env),
            retry: { max_attempts: 3, backoff: fixed, initial: 1s, max: 1s, jitter: none },
            timeout: 2s,
        }
    }
}

fn engine() -> Engine {
    Engine::builder()
        .seed(11)
        .clock(workflow_core::clock::TokioClock::starting_at(0))
        .build()
}

/// The ms offsets at which each attempt started.
async fn attempt_starts(engine: &Engine, run: RunId) -> Vec<u64> {
    let events = testing::events(engine, run).await.unwrap();
    let offsets = testing::offsets(&events);
    events
        .iter()
        .zip(offsets)
        .filter(|(e, _)| matches!(e, Event::AttemptStarted { .. }))
        .map(|(_, at)| at)
        .collect()
}

async fn run_to_end<W>(env: Env, input: W::Input) -> (Engine, RunId, Result<W::Outputs, RunError>)
where
    W: Workflow<Env = Env>,
{
    let engine = engine();
    engine.register::<W>(env).unwrap();
    let run = engine.start::<W>(input).await.unwrap();
    let outputs = run.outputs().await;
    (engine, run.id(), outputs)
}

#[tokio::test(start_paused = true)]
async fn exponential_backoff_doubles_up_to_its_cap() {
    let script = Script::new().fail(4, ErrorKind::Unavailable).succeed(1);
    let (engine, run, outputs) =
        run_to_end::<Exponential>(Env::new(script.clone()), ExponentialInput {}).await;
    assert_eq!(outputs.unwrap().flaky, 1);
    assert_eq!(script.calls(), 5);
    // delays 1s, 2s, 4s, then capped at 5s
    assert_eq!(
        attempt_starts(&engine, run).await,
        [0, 1000, 3000, 7000, 12000]
    );
}

#[tokio::test(start_paused = true)]
async fn linear_and_fixed_backoff_follow_their_schedules() {
    let script = Script::new().fail(3, ErrorKind::Timeout).succeed(2);
    let (engine, run, outputs) = run_to_end::<Linear>(Env::new(script), LinearInput {}).await;
    assert_eq!(outputs.unwrap().flaky, 2);
    // delays 2s, 4s, then 6s capped at 5s
    assert_eq!(attempt_starts(&engine, run).await, [0, 2000, 6000, 11000]);

    let script = Script::new().fail(2, ErrorKind::RateLimited).succeed(3);
    let (engine, run, outputs) = run_to_end::<Fixed>(Env::new(script), FixedInput {}).await;
    assert_eq!(outputs.unwrap().flaky, 3);
    assert_eq!(attempt_starts(&engine, run).await, [0, 500, 1000]);
}

fn expected_jittered(policy: &RetryPolicy, events: &[Event]) -> Vec<u64> {
    let mut machine = Jittered::machine();
    machine.apply(&events[0]);
    let mut at = 0;
    let mut starts = vec![0];
    for delay in policy.delays(machine.step_seed(0)) {
        at += delay.as_millis() as u64;
        starts.push(at);
    }
    starts
}

#[tokio::test(start_paused = true)]
async fn full_jitter_replays_the_recorded_seed_exactly() {
    let script = Script::new().fail(3, ErrorKind::Unavailable).succeed(4);
    let (engine, run, outputs) = run_to_end::<Jittered>(Env::new(script), JitteredInput {}).await;
    assert_eq!(outputs.unwrap().flaky, 4);
    let events = testing::events(&engine, run).await.unwrap();
    let policy = Jittered::spec().steps[0].retry.clone().unwrap();
    let starts = attempt_starts(&engine, run).await;
    assert_eq!(starts, expected_jittered(&policy, &events));
    // Each full-jitter delay lies in [0, base].
    for (n, pair) in starts.windows(2).enumerate() {
        let delay = pair[1] - pair[0];
        assert!(delay <= policy.base_delay(n as u32 + 1).as_millis() as u64);
    }
    // The same seed gives the same run twice.
    let script = Script::new().fail(3, ErrorKind::Unavailable).succeed(4);
    let (engine2, run2, _) = run_to_end::<Jittered>(Env::new(script), JitteredInput {}).await;
    assert_eq!(attempt_starts(&engine2, run2).await, starts);
}

#[tokio::test(start_paused = true)]
async fn equal_jitter_keeps_at_least_half_of_each_delay() {
    let script = Script::new().fail(3, ErrorKind::Unavailable).succeed(5);
    let (engine, run, outputs) =
        run_to_end::<EqualJitter>(Env::new(script), EqualJitterInput {}).await;
    assert_eq!(outputs.unwrap().flaky, 5);
    let policy = EqualJitter::spec().steps[0].retry.clone().unwrap();
    let starts = attempt_starts(&engine, run).await;
    assert_eq!(starts.len(), 4);
    for (n, pair) in starts.windows(2).enumerate() {
        let delay = pair[1] - pair[0];
        let base = policy.base_delay(n as u32 + 1).as_millis() as u64;
        assert!(
            delay >= base / 2 && delay <= base,
            "delay {delay} outside [{}, {base}]",
            base / 2
        );
    }
}

#[tokio::test(start_paused = true)]
async fn permanent_errors_make_exactly_one_attempt() {
    for kind in [
        ErrorKind::Validation,
        ErrorKind::Unauthorized,
        ErrorKind::NotFound,
        ErrorKind::Unsafe,
        ErrorKind::Internal,
    ] {
        let script = Script::new().fail(1, kind).succeed(1);
        let (engine, run, outputs) =
            run_to_end::<Exponential>(Env::new(script.clone()), ExponentialInput {}).await;
        match outputs {
            Err(RunError::Failed {
                step,
                attempts,
                error,
                ..
            }) => {
                assert_eq!(step, "flaky");
                assert_eq!(attempts, 1);
                assert_eq!(error.kind(), kind);
            }
            other => panic!("expected a failure, got {:?}", other.map(|o| o.flaky)),
        }
        assert_eq!(script.calls(), 1, "{kind} must not be retried");
        let dead = engine.dead_letters().await.unwrap();
        assert_eq!(dead.len(), 1);
        assert_eq!(
            (
                dead[0].run,
                dead[0].step.as_str(),
                dead[0].attempts,
                dead[0].kind
            ),
            (run, "flaky", 1, kind)
        );
        assert!(!dead[0].trace_id.is_empty());
    }
}

#[tokio::test(start_paused = true)]
async fn retry_on_extends_what_is_retried() {
    let script = Script::new().fail(2, ErrorKind::NotFound).succeed(9);
    let (_, _, outputs) =
        run_to_end::<NotFoundRetried>(Env::new(script.clone()), NotFoundRetriedInput {}).await;
    assert_eq!(outputs.unwrap().flaky, 9);
    assert_eq!(script.calls(), 3);
    // ... and replaces the default set: unavailable is no longer retried.
    let script = Script::new().fail(1, ErrorKind::Unavailable).succeed(9);
    let (_, _, outputs) =
        run_to_end::<NotFoundRetried>(Env::new(script.clone()), NotFoundRetriedInput {}).await;
    assert!(matches!(outputs, Err(RunError::Failed { attempts: 1, .. })));
}

#[tokio::test(start_paused = true)]
async fn exhausting_max_attempts_fails_with_the_last_error() {
    let script = Script::new().fail(10, ErrorKind::Unavailable);
    let (_, _, outputs) = run_to_end::<Fixed>(Env::new(script.clone()), FixedInput {}).await;
    assert!(matches!(outputs, Err(RunError::Failed { attempts: 3, .. })));
    assert_eq!(script.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn the_retry_deadline_stops_retries() {
    // Each attempt takes 5s; the deadline of 10s after the first start leaves room for two.
    let script = Script::new().fail(10, ErrorKind::Unavailable);
    let mut env = Env::new(script.clone());
    env.work = Duration::from_secs(5);
    let (engine, run, outputs) = run_to_end::<Bounded>(env, BoundedInput {}).await;
    assert!(
        matches!(outputs, Err(RunError::Failed { attempts: 2, .. })),
        "{:?}",
        outputs.err()
    );
    assert_eq!(script.calls(), 2);
    assert_eq!(attempt_starts(&engine, run).await, [0, 6000]);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_up_to_the_cap() {
    let script = Script::new()
        .fail_with(StepError::rate_limited(
            "slow down",
            Some(Duration::from_secs(4)),
        ))
        .fail_with(StepError::rate_limited(
            "slow down more",
            Some(Duration::from_secs(600)),
        ))
        .succeed(1);
    let (engine, run, outputs) =
        run_to_end::<Exponential>(Env::new(script), ExponentialInput {}).await;
    assert_eq!(outputs.unwrap().flaky, 1);
    // 4s asked (more than the 1s schedule), then 600s asked but capped at max 5s.
    assert_eq!(attempt_starts(&engine, run).await, [0, 4000, 9000]);
}

#[tokio::test(start_paused = true)]
async fn each_attempt_runs_under_the_step_timeout() {
    let script = Script::new().delay(Duration::from_secs(30)).succeed(1);
    let (engine, run, outputs) =
        run_to_end::<TimedOut>(Env::new(script.clone()), TimedOutInput {}).await;
    assert_eq!(outputs.unwrap().slow, 1);
    let events = testing::events(&engine, run).await.unwrap();
    let timeline = testing::timeline(TimedOut::spec(), &events);
    assert_eq!(
        timeline,
        [
            "run_started TimedOut",
            "attempt_started slow #1",
            "attempt_failed slow #1 timeout",
            "attempt_started slow #2",
            "step_succeeded slow"
        ]
    );
    // The first attempt was cut at 2s, the retry came 1s later.
    assert_eq!(attempt_starts(&engine, run).await, [0, 3000]);
}

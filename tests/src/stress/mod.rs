//! The workflow of the flow-control stress tests (`tests/tests/flow_stress_pg.rs`,
//! `tests/tests/flow_stress_sqlite.rs`), shared by the tests and their worker process
//! (`src/bin/stress_worker.rs`): runs limited to [`LIMIT`] in flight per key over [`KEYS`]
//! keys (one of them hot), with a priority, and one step under a token bucket of [`RATE`]
//! per second with a burst of [`BURST`]. Every action records its attempt in the
//! [`Observer`]'s table before and after its work; [`verdict`] reads the rows back.

pub mod check;
pub mod drive;
pub mod observer;
pub mod verdict;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use workflow_core::prelude::*;

pub use self::observer::{Attempt, Observer};
use crate::workers::now_us;

/// How many runs the tests start when `FLOW_STRESS_RUNS` does not say.
pub const DEFAULT_RUNS: u64 = 200;
/// How many keys the runs are spread over.
pub const KEYS: u64 = 50;
/// Runs in flight per key (the workflow-level `concurrency` limit).
pub const LIMIT: usize = 2;
/// Starts of the rated step per second (the bucket's refill).
pub const RATE: usize = 20;
/// The bucket's size.
pub const BURST: usize = 5;
/// The aging step of priorities (the engine's default): one point per minute waited.
pub const AGING_MS: u64 = workflow_core::store::limits::AGING_STEP_MS;
/// The key of every fifth job.
pub const HOT_KEY: &str = "k00";
/// The rated step's name.
pub const RATED: &str = "call";
/// The steps, in order.
pub const STEPS: [&str; 3] = ["prepare", "call", "finish"];

/// How long each step works.
const WORK: [Duration; 3] = [
    Duration::from_millis(150),
    Duration::from_millis(30),
    Duration::from_millis(50),
];

/// A job: its number, its key and its priority.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// The job's number, from 0.
    pub n: u64,
    /// Its concurrency key.
    pub key: String,
    /// Its priority (higher first).
    pub priority: u8,
}

/// Job `n`: every fifth job on the hot key `k00`, the others spread over `k01` to `k49`;
/// priorities 0, 1 and 2 in turn.
pub fn job(n: u64) -> Job {
    let key = if n.is_multiple_of(5) {
        0
    } else {
        1 + n % (KEYS - 1)
    };
    Job {
        n,
        key: format!("k{key:02}"),
        priority: (n % 3) as u8,
    }
}

/// The idempotency key of job `n`'s run.
pub fn start_key(n: u64) -> String {
    format!("job-{n}")
}

/// What every step of job `n` outputs: `n` plus the step's position.
pub fn expected(n: u64) -> [u64; 3] {
    [n, n + 1, n + 2]
}

/// Records the attempt, works for the step's time, records its end; a failure to record
/// is transient (the step is retried).
async fn observed(observer: &Observer, ctx: &StepContext, job: &Job) -> Result<(), StepError> {
    let index = STEPS.iter().position(|s| *s == ctx.step).unwrap_or(0);
    let attempt = Attempt {
        job: job.n,
        key: job.key.clone(),
        step: ctx.step.to_owned(),
        attempt: ctx.attempt,
        fence: ctx.fence(),
        pid: std::process::id(),
        entered_us: now_us(),
        left_us: None,
    };
    let unavailable = |e: observer::ObserverError| StepError::unavailable(e.to_string());
    let row = observer.enter(&attempt).await.map_err(unavailable)?;
    tokio::time::sleep(WORK[index]).await;
    observer.leave(row, now_us()).await.map_err(unavailable)
}

/// The steps.
pub mod act {
    use super::*;

    /// The first step.
    pub async fn prepare(env: &Observer, ctx: &StepContext, job: Job) -> Result<u64, StepError> {
        observed(env, ctx, &job).await?;
        Ok(job.n)
    }

    /// The rated step: a call to a service that takes [`RATE`] calls a second.
    pub async fn call(
        env: &Observer,
        ctx: &StepContext,
        job: Job,
        prepare: u64,
    ) -> Result<u64, StepError> {
        observed(env, ctx, &job).await?;
        Ok(prepare + 1)
    }

    /// The last step.
    pub async fn finish(
        env: &Observer,
        ctx: &StepContext,
        job: Job,
        call: u64,
    ) -> Result<u64, StepError> {
        observed(env, ctx, &job).await?;
        Ok(call + 1)
    }
}

workflow! {
    /// One job: at most two runs per key in flight, higher priorities first, and a call
    /// to a rate-limited service in the middle.
    pub workflow Stressed(job: Job) env Observer {
        concurrency: { key: job.key, limit: 2 },
        priority: job.priority,
        step prepare -> u64 {
            action: act::prepare(env, ctx, job),
            retry: { max_attempts: 20, backoff: fixed, initial: 100ms, jitter: none },
        }
        step call -> u64 {
            action: act::call(env, ctx, job, prepare),
            retry: { max_attempts: 20, backoff: fixed, initial: 100ms, jitter: none },
            rate: { key: "stress-api", limit: 20, per: 1s, burst: 5 },
        }
        step finish -> u64 {
            action: act::finish(env, ctx, job, call),
            retry: { max_attempts: 20, backoff: fixed, initial: 100ms, jitter: none },
        }
    }
}

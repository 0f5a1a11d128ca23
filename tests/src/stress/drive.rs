//! What both stress tests do around their workers: queue the runs, then strike the
//! workers (kills and pauses) until the runs are done.

use std::time::{Duration, Instant};

use workflow_core::prelude::*;
use workflow_core::store::{RunFilter, Store};

use super::{job, start_key, Stressed, StressedInput};
use crate::workers::{Rng, Workers};

/// Queues jobs `0..runs` through `intake` (an engine that does not drive them).
pub async fn enqueue(intake: &Engine, runs: u64) {
    for n in 0..runs {
        intake
            .enqueue::<Stressed>(
                StressedInput { job: job(n) },
                StartOptions::key(start_key(n)),
            )
            .await
            .unwrap_or_else(|e| panic!("cannot queue job {n}: {e}"));
    }
}

/// How many runs of `Stressed` are not finished yet.
pub async fn unfinished(store: &dyn Store) -> usize {
    store
        .runs(RunFilter {
            workflow: Some("Stressed".into()),
            limit: Some(1_000_000),
            ..RunFilter::default()
        })
        .await
        .expect("list the runs")
        .iter()
        .filter(|r| !r.status.is_finished())
        .count()
}

/// How the workers are struck.
#[derive(Debug, Clone, Copy)]
pub struct Strikes {
    /// How many kills at most (none once every run is done).
    pub kills: u64,
    /// After every second kill, another worker than the victim is frozen for this long
    /// (plus up to a second) and then let go on; `None`: no freezes.
    pub freeze: Option<Duration>,
    /// How long the runs may take after the last strike.
    pub finish_within: Duration,
}

/// What [`strike_until_done`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Struck {
    /// Kills made.
    pub kills: u64,
    /// Pauses made.
    pub pauses: u64,
    /// How long the strikes went on.
    pub striking: Duration,
    /// How long until every run was done.
    pub done: Duration,
}

/// Kills a random worker every 1 to 2.5 s (starting another in its place), freezes
/// another after every second kill (when `strikes.freeze` says so), until `strikes.kills` kills were made or `unfinished()` says
/// no run is left; then waits for the runs to be done, and prints what it did. Panics when
/// a worker stopped on its own or the runs take too long.
pub fn strike_until_done(
    workers: &mut Workers,
    rng: &mut Rng,
    strikes: Strikes,
    mut unfinished: impl FnMut() -> usize,
) -> Struck {
    let started = Instant::now();
    let (mut kills, mut pauses) = (0, 0);
    while kills < strikes.kills && unfinished() > 0 {
        std::thread::sleep(Duration::from_millis(1_000 + rng.below(1_500)));
        workers.check_alive();
        let victim = workers.kill_any(rng);
        kills += 1;
        if let Some(freeze) = strikes.freeze.filter(|_| kills % 2 == 1) {
            let frozen = workers.other_than(victim, rng);
            workers.freeze(frozen);
            std::thread::sleep(freeze + Duration::from_millis(rng.below(1_000)));
            workers.thaw(frozen);
            pauses += 1;
        }
    }
    let striking = started.elapsed();
    let deadline = Instant::now() + strikes.finish_within;
    loop {
        let left = unfinished();
        if left == 0 {
            break;
        }
        workers.check_alive();
        assert!(
            Instant::now() < deadline,
            "{left} runs unfinished after {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let struck = Struck {
        kills,
        pauses,
        striking,
        done: started.elapsed(),
    };
    println!(
        "{} kills and {} pauses in {:?}, all runs done after {:?}; {} worker processes",
        struck.kills,
        struck.pauses,
        struck.striking,
        struck.done,
        workers.started()
    );
    struck
}

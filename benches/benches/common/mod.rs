//! What the criterion benchmarks share: runtimes and running a future on a worker.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use workflow_core::{Engine, Workflow};

/// A current-thread runtime with time enabled.
pub(crate) fn current_thread() -> Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => panic!("cannot build a tokio runtime: {error}"),
    }
}

/// A two-worker multi-thread runtime with time enabled.
pub(crate) fn multi_thread() -> Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => panic!("cannot build a tokio runtime: {error}"),
    }
}

/// Runs `future` as a task of `rt`: on a worker thread of a multi-thread runtime (where
/// its own spawns go to that worker's local queue), as code serving requests does.
pub(crate) fn on_worker<T: Send + 'static>(
    rt: &Runtime,
    future: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    rt.block_on(async {
        match tokio::spawn(future).await {
            Ok(value) => value,
            Err(error) => panic!("the benchmark task was lost: {error}"),
        }
    })
}

/// Times `iters` runs of `W` on a fresh in-memory engine.
pub(crate) fn engine_runs<W: Workflow<Env = ()>>(
    rt: &Runtime,
    iters: u64,
    input: fn() -> W::Input,
) -> Duration {
    on_worker(rt, async move {
        let engine = Engine::builder().build();
        if let Err(error) = engine.register::<W>(()) {
            panic!("cannot register {}: {error}", W::NAME);
        }
        let started = Instant::now();
        for _ in 0..iters {
            let outputs = match engine.start::<W>(input()).await {
                Ok(run) => run.outputs().await,
                Err(error) => Err(error),
            };
            match outputs {
                Ok(outputs) => drop(black_box(outputs)),
                Err(error) => panic!("run of {} failed: {error}", W::NAME),
            }
        }
        started.elapsed()
    })
}

//! What the criterion benchmarks share: runtimes and running a future on a worker.

use tokio::runtime::Runtime;

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

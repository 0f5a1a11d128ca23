//! The engine's scheduling overhead on the in-memory store, against hand-written tokio code
//! doing the same work with the same no-op step functions.
//!
//! - B1 `chain`: `s0 -> s1 -> ... -> s{N-1}` for N = 1, 10, 100, 1000. Baselines: `awaits`
//!   (sequential `.await`s of the step functions) and `spawn` (one `tokio::spawn` per step,
//!   its `JoinHandle` awaited before the next).
//! - B2 `fan_out` (`1 -> 100 -> 1`) and `dag` (seeded random DAG, about 2 edges per step,
//!   100 and 1000 steps). Baselines: `joinset` (a `JoinSet` spawning each step as soon as
//!   its dependencies are done) and `awaits` (the steps awaited one by one in declaration
//!   order, which is topological).
//!
//! Every step passes its `u32` output to its dependents (`join{k}(deps...)` returns the
//! wrapping sum of its arguments plus one), in the engine and in the baselines alike.
//! Everything runs on a current-thread tokio runtime; the `*_mt` groups repeat a few
//! points on a two-worker multi-thread runtime. The timed loop runs as a spawned task (on
//! a worker thread), not in `block_on`, for the engine and the baselines alike. Each sample builds a fresh engine (outside
//! the timed part), so the in-memory store holds only that sample's runs.
//!
//! Run with `cargo bench -p benches --bench runtime`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use benches::gen;
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, SamplingMode,
    Throughput,
};
use tokio::runtime::Runtime;
use tokio::task::JoinSet;
use workflow_core::{StepError, Workflow};

/// The workflows, declared with `workflow!` by the build script.
mod flows {
    #![allow(dead_code)]
    use workflow_core::{workflow, StepError};

    include!(concat!(env!("OUT_DIR"), "/workflows.rs"));
}

use flows::*;

#[path = "common/mod.rs"]
mod common;
use common::{current_thread, engine_runs, multi_thread, on_worker};

/// Times `iters` calls of a baseline.
fn baseline_runs<F>(rt: &Runtime, iters: u64, run: impl Fn() -> F + Send + 'static) -> Duration
where
    F: std::future::Future<Output = u32> + Send,
{
    on_worker(rt, async move {
        let started = Instant::now();
        for _ in 0..iters {
            black_box(run().await);
        }
        started.elapsed()
    })
}

fn ok(result: Result<u32, StepError>) -> u32 {
    match result {
        Ok(value) => value,
        Err(error) => panic!("a no-op step failed: {error}"),
    }
}

/// Sequential awaits of the chain's step functions.
async fn awaits_chain(n: usize) -> u32 {
    let mut x = ok(join0().await);
    for _ in 1..n {
        x = ok(join1(black_box(x)).await);
    }
    x
}

/// One `tokio::spawn` per step, each awaited before the next.
async fn spawn_chain(n: usize) -> u32 {
    let mut x = spawned(join0()).await;
    for _ in 1..n {
        x = spawned(join1(x)).await;
    }
    x
}

async fn spawned<F>(step: F) -> u32
where
    F: std::future::Future<Output = Result<u32, StepError>> + Send + 'static,
{
    match tokio::spawn(step).await {
        Ok(result) => ok(result),
        Err(error) => panic!("a step task was lost: {error}"),
    }
}

/// The step function of the DAG baselines: what `join{k}` computes, for any `k`.
async fn join_slice(args: Vec<u32>) -> Result<u32, StepError> {
    Ok(gen::join_values(&args))
}

/// A graph with its dependents precomputed (the engine has its spec precomputed too).
struct Graph {
    deps: gen::Deps,
    dependents: gen::Deps,
}

impl Graph {
    fn new(deps: gen::Deps) -> Self {
        let mut dependents = vec![Vec::new(); deps.len()];
        for (step, list) in deps.iter().enumerate() {
            for &dep in list {
                dependents[dep].push(step);
            }
        }
        Graph { deps, dependents }
    }

    fn len(&self) -> usize {
        self.deps.len()
    }

    /// Every step awaited in declaration order (a topological order).
    async fn awaits(&self) -> u32 {
        let mut values = vec![0u32; self.len()];
        for (step, deps) in self.deps.iter().enumerate() {
            let args = deps.iter().map(|d| values[*d]).collect();
            values[step] = ok(join_slice(args).await);
        }
        values[self.len() - 1]
    }

    /// A `JoinSet`: each step is spawned as soon as its dependencies are done.
    async fn joinset(&self) -> u32 {
        let mut remaining: Vec<usize> = self.deps.iter().map(Vec::len).collect();
        let mut values = vec![0u32; self.len()];
        let mut set = JoinSet::new();
        for (step, _) in remaining.iter().enumerate().filter(|(_, r)| **r == 0) {
            set.spawn(async move { (step, join_slice(Vec::new()).await) });
        }
        while let Some(joined) = set.join_next().await {
            let (step, result) = match joined {
                Ok(done) => done,
                Err(error) => panic!("a step task was lost: {error}"),
            };
            values[step] = ok(result);
            for &next in &self.dependents[step] {
                remaining[next] -= 1;
                if remaining[next] == 0 {
                    let args: Vec<u32> = self.deps[next].iter().map(|d| values[*d]).collect();
                    set.spawn(async move { (next, join_slice(args).await) });
                }
            }
        }
        values[self.len() - 1]
    }
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>, steps: usize) {
    group.throughput(Throughput::Elements(steps as u64));
    if steps >= 1000 {
        group.sample_size(10).sampling_mode(SamplingMode::Flat);
    } else {
        group.sample_size(30);
    }
}

fn chain_engine(rt: &Runtime, n: usize, iters: u64) -> Duration {
    match n {
        1 => engine_runs::<Chain1>(rt, iters, || Chain1Input {}),
        10 => engine_runs::<Chain10>(rt, iters, || Chain10Input {}),
        100 => engine_runs::<Chain100>(rt, iters, || Chain100Input {}),
        1000 => engine_runs::<Chain1000>(rt, iters, || Chain1000Input {}),
        _ => panic!("no chain workflow of {n} steps is declared"),
    }
}

/// B1 on one runtime, for the given sizes.
fn chains(c: &mut Criterion, name: &str, rt: &Runtime, sizes: &[usize]) {
    for &n in sizes {
        let mut group = c.benchmark_group(name);
        configure(&mut group, n);
        group.bench_function(BenchmarkId::new("engine", n), |b| {
            b.iter_custom(|iters| chain_engine(rt, n, iters));
        });
        group.bench_function(BenchmarkId::new("awaits", n), |b| {
            b.iter_custom(|iters| baseline_runs(rt, iters, move || awaits_chain(n)));
        });
        group.bench_function(BenchmarkId::new("spawn", n), |b| {
            b.iter_custom(|iters| baseline_runs(rt, iters, move || spawn_chain(n)));
        });
        group.finish();
    }
}

/// B2 for one graph on one runtime.
fn graph<W: Workflow<Env = ()>>(
    c: &mut Criterion,
    name: &str,
    rt: &Runtime,
    deps: gen::Deps,
    input: fn() -> W::Input,
) {
    let graph = Arc::new(Graph::new(deps));
    let n = graph.len();
    let mut group = c.benchmark_group(name);
    configure(&mut group, n);
    group.bench_function(BenchmarkId::new("engine", n), |b| {
        b.iter_custom(|iters| engine_runs::<W>(rt, iters, input));
    });
    group.bench_function(BenchmarkId::new("joinset", n), |b| {
        b.iter_custom(|iters| {
            let graph = graph.clone();
            baseline_runs(rt, iters, move || {
                let graph = graph.clone();
                async move { graph.joinset().await }
            })
        });
    });
    group.bench_function(BenchmarkId::new("awaits", n), |b| {
        b.iter_custom(|iters| {
            let graph = graph.clone();
            baseline_runs(rt, iters, move || {
                let graph = graph.clone();
                async move { graph.awaits().await }
            })
        });
    });
    group.finish();
}

fn runtime(c: &mut Criterion) {
    let rt = current_thread();
    chains(c, "b1_chain", &rt, &[1, 10, 100, 1000]);
    graph::<FanOut100>(
        c,
        "b2_fan_out",
        &rt,
        gen::fan_out(100),
        || FanOut100Input {},
    );
    graph::<Dag100>(
        c,
        "b2_dag",
        &rt,
        gen::random_dag(100, gen::DAG_SEED),
        || Dag100Input {},
    );
    graph::<Dag1000>(
        c,
        "b2_dag",
        &rt,
        gen::random_dag(1000, gen::DAG_SEED),
        || Dag1000Input {},
    );

    let mt = multi_thread();
    chains(c, "b1_chain_mt", &mt, &[100]);
    graph::<Dag100>(
        c,
        "b2_dag_mt",
        &mt,
        gen::random_dag(100, gen::DAG_SEED),
        || Dag100Input {},
    );
}

criterion_group!(runtime_benches, runtime);
criterion_main!(runtime_benches);

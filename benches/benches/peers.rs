//! The engine next to other Rust DAG executors, dagrs and dagx, and hand-written tokio, on
//! the same graphs, in the same process and run (BENCHMARKS.md, "Peers").
//!
//! Graphs (from `src/gen.rs`): a chain of N no-op steps (N = 10, 100, 1000) and the
//! `1 -> 100 -> 1` fan-out. Every step passes a `u32` to its dependents and returns the
//! wrapping sum of its inputs plus one (`gen::join_values`), in every executor.
//!
//! Variants (each a criterion function in groups `peers_chain`, `peers_fan_out` and, on a
//! two-worker multi-thread runtime, `peers_chain_mt` and `peers_fan_out_mt`):
//!
//! - `engine`: `Engine::builder().build()` (in-memory store), `start` + `outputs` of the
//!   `workflow!` declared by `build.rs` (`Chain{N}`, `FanOut100`). The workflow is compiled
//!   in and registered once, outside the timed part: a run is all the engine needs.
//! - `dagrs`: dagrs 0.9 `Graph` of `DefaultNode`s, one per step, connected with
//!   `add_edge`; each node's `Action` receives its inputs over dagrs' channels
//!   (`InChannels::map`), broadcasts its value to its dependents and returns it as its
//!   `Output`. A dagrs graph runs once (`async_start`; running again needs `reset`, which
//!   rebuilds every channel), so every iteration builds a fresh graph **outside** the timed
//!   part and times `async_start` alone. `dagrs_build` times building it too.
//! - `dagx`: dagx 0.3 `DagRunner`, one `#[task]` per step wired with `depends_on`, run with
//!   `run(|fut| { tokio::spawn(fut); })`, then `get` of the last step. A `DagRunner` runs
//!   once, so, as for dagrs, it is built per iteration outside the timed part; `dagx_build`
//!   times building it too. dagx takes at most 8 dependencies per task, so its fan-out
//!   reduces the 100 middle values through a tree of summing tasks (12 × 8 + 1 × 4 inputs,
//!   then 8 + 5, then the final `+1` join of 2): 117 tasks instead of 102.
//! - `tokio`: hand-written tokio. Chain: one `tokio::spawn` per step, each awaited before
//!   the next. Fan-out: a `JoinSet` spawning each step as soon as its inputs are done.
//!
//! Every timed loop runs as a spawned task of the runtime (on a worker), as in `runtime.rs`.
//!
//! Run with `cargo bench -p benches --bench peers -- --warm-up-time 1 --measurement-time 3`.

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
use workflow_core::{Engine, StepError, Workflow};

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

/// A graph with its dependents precomputed, and the value its last step must return.
struct Shape {
    deps: gen::Deps,
    dependents: gen::Deps,
    expected: u32,
}

impl Shape {
    fn new(deps: gen::Deps) -> Arc<Self> {
        let mut dependents = vec![Vec::new(); deps.len()];
        for (step, list) in deps.iter().enumerate() {
            for &dep in list {
                dependents[dep].push(step);
            }
        }
        let mut values = vec![0u32; deps.len()];
        for (step, list) in deps.iter().enumerate() {
            let args: Vec<u32> = list.iter().map(|d| values[*d]).collect();
            values[step] = gen::join_values(&args);
        }
        let expected = values.last().copied().unwrap_or(0);
        Arc::new(Shape {
            deps,
            dependents,
            expected,
        })
    }

    fn len(&self) -> usize {
        self.deps.len()
    }

    fn check(&self, who: &str, value: u32) {
        if value != self.expected {
            panic!(
                "{who} returned {value} for the last step, expected {}",
                self.expected
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The engine.

/// Checks once that a workflow's last output is what the peers compute.
fn engine_check<W: Workflow<Env = ()>>(
    rt: &Runtime,
    shape: &Shape,
    input: fn() -> W::Input,
    last: fn(&W::Outputs) -> u32,
) {
    let value = on_worker(rt, async move {
        let engine = Engine::builder().build();
        if let Err(error) = engine.register::<W>(()) {
            panic!("cannot register {}: {error}", W::NAME);
        }
        match engine.start::<W>(input()).await {
            Ok(run) => match run.outputs().await {
                Ok(outputs) => last(&outputs),
                Err(error) => panic!("run of {} failed: {error}", W::NAME),
            },
            Err(error) => panic!("cannot start {}: {error}", W::NAME),
        }
    });
    shape.check("the engine", value);
}

// ---------------------------------------------------------------------------------------
// dagrs.

mod with_dagrs {
    use std::sync::Arc;

    use benches::gen;
    use dagrs::{
        Action, Content, DefaultNode, EnvVar, Graph, InChannels, Node, NodeId, NodeTable,
        OutChannels, Output,
    };

    use super::Shape;

    /// Every step: the sum of the values received from its dependencies plus one, sent to
    /// every dependent and returned as the node's output.
    struct Join;

    #[dagrs::async_trait::async_trait]
    impl Action for Join {
        async fn run(
            &self,
            input: &mut InChannels,
            output: &mut OutChannels,
            _env: Arc<EnvVar>,
        ) -> Output {
            let args: Vec<u32> = input
                .map(
                    |content| match content.ok().and_then(|c| c.into_inner::<u32>()) {
                        Some(value) => *value,
                        None => panic!("a dagrs step received no u32"),
                    },
                )
                .await;
            let value = gen::join_values(&args);
            for sent in output.broadcast(Content::new(value)).await {
                if let Err(error) = sent {
                    panic!("a dagrs step could not send its value: {error:?}");
                }
            }
            Output::Out(Some(Content::new(value)))
        }
    }

    /// The graph for `shape`, and the id of its last node.
    pub(super) fn build(shape: &Shape) -> (Graph, NodeId) {
        let mut table = NodeTable::new();
        let mut graph = Graph::new();
        let mut ids = Vec::with_capacity(shape.len());
        for step in 0..shape.len() {
            let node = DefaultNode::with_action(format!("s{step}"), Join, &mut table);
            ids.push(node.id());
            if let Err(error) = graph.add_node(node) {
                panic!("dagrs refused node s{step}: {error:?}");
            }
        }
        for (step, dependents) in shape.dependents.iter().enumerate() {
            if !dependents.is_empty() {
                let to: Vec<NodeId> = dependents.iter().map(|d| ids[*d]).collect();
                if let Err(error) = graph.add_edge(ids[step], to) {
                    panic!("dagrs refused the edges of s{step}: {error:?}");
                }
            }
        }
        graph.set_env(EnvVar::new(table));
        let last = ids[shape.len() - 1];
        (graph, last)
    }

    pub(super) async fn run(graph: &mut Graph) {
        if let Err(error) = graph.async_start().await {
            panic!("the dagrs graph failed: {error:?}");
        }
    }

    pub(super) fn last_value(graph: &Graph, last: NodeId) -> u32 {
        match graph.get_results::<u32>().get(&last) {
            Some(Some(value)) => **value,
            _ => panic!("the last dagrs node has no u32 output"),
        }
    }
}

/// Times `iters` dagrs runs of `shape`, each on a freshly built graph; building it is
/// timed only when `with_build`.
fn dagrs_runs(rt: &Runtime, shape: Arc<Shape>, iters: u64, with_build: bool) -> Duration {
    on_worker(rt, async move {
        let mut timed = Duration::ZERO;
        for i in 0..iters {
            let started = Instant::now();
            let (mut graph, last) = with_dagrs::build(&shape);
            let built = Instant::now();
            with_dagrs::run(&mut graph).await;
            let done = Instant::now();
            timed += done - if with_build { started } else { built };
            if i == 0 {
                shape.check("dagrs", with_dagrs::last_value(&graph, last));
            }
            drop(graph);
        }
        timed
    })
}

// ---------------------------------------------------------------------------------------
// dagx.

mod with_dagx {
    use dagx::{task, DagRunner, Task, TaskHandle};

    struct Root;

    #[task]
    impl Root {
        async fn run() -> u32 {
            1
        }
    }

    struct Inc;

    #[task]
    impl Inc {
        async fn run(x: &u32) -> u32 {
            x.wrapping_add(1)
        }
    }

    /// The fan-in tree's inner nodes: plain sums (the final join adds the one).
    struct Sum8;

    #[task]
    impl Sum8 {
        #[allow(clippy::too_many_arguments)]
        async fn run(
            a: &u32,
            b: &u32,
            c: &u32,
            d: &u32,
            e: &u32,
            f: &u32,
            g: &u32,
            h: &u32,
        ) -> u32 {
            [a, b, c, d, e, f, g, h]
                .iter()
                .fold(0u32, |acc, v| acc.wrapping_add(**v))
        }
    }

    struct Sum5;

    #[task]
    impl Sum5 {
        async fn run(a: &u32, b: &u32, c: &u32, d: &u32, e: &u32) -> u32 {
            [a, b, c, d, e]
                .iter()
                .fold(0u32, |acc, v| acc.wrapping_add(**v))
        }
    }

    struct Sum4;

    #[task]
    impl Sum4 {
        async fn run(a: &u32, b: &u32, c: &u32, d: &u32) -> u32 {
            [a, b, c, d]
                .iter()
                .fold(0u32, |acc, v| acc.wrapping_add(**v))
        }
    }

    struct Join2;

    #[task]
    impl Join2 {
        async fn run(a: &u32, b: &u32) -> u32 {
            1u32.wrapping_add(*a).wrapping_add(*b)
        }
    }

    /// A chain of `n` steps.
    pub(super) fn chain(n: usize) -> (DagRunner, TaskHandle<u32>) {
        let dag = DagRunner::new();
        let root = dag.add_task(Root);
        let mut last = dag.add_task(Inc).depends_on(&root);
        for _ in 2..n {
            last = dag.add_task(Inc).depends_on(last);
        }
        (dag, last)
    }

    /// `1 -> 100 -> 1`, the 100 middle values summed through a tree of at most 8 inputs
    /// per task (dagx's limit): 12 × `Sum8` + 1 × `Sum4`, then `Sum8` + `Sum5`, then the
    /// final join.
    pub(super) fn fan_out_100() -> (DagRunner, TaskHandle<u32>) {
        let dag = DagRunner::new();
        let root = dag.add_task(Root);
        let mid: Vec<TaskHandle<u32>> = (0..100)
            .map(|_| dag.add_task(Inc).depends_on(&root))
            .collect();
        let mut level: Vec<TaskHandle<u32>> = mid
            .chunks(8)
            .map(|c| match c {
                [a, b, cc, d, e, f, g, h] => {
                    dag.add_task(Sum8).depends_on((a, b, cc, d, e, f, g, h))
                }
                [a, b, cc, d] => dag.add_task(Sum4).depends_on((a, b, cc, d)),
                _ => unreachable!("100 = 12 × 8 + 4"),
            })
            .collect();
        level = match level.as_slice() {
            [a, b, c, d, e, f, g, h, i, j, k, l, m] => vec![
                dag.add_task(Sum8).depends_on((a, b, c, d, e, f, g, h)),
                dag.add_task(Sum5).depends_on((i, j, k, l, m)),
            ],
            _ => unreachable!("13 partial sums"),
        };
        let last = dag.add_task(Join2).depends_on((&level[0], &level[1]));
        (dag, last)
    }

    pub(super) async fn run(dag: &DagRunner) {
        let spawner = |future| {
            tokio::spawn(future);
        };
        if let Err(error) = dag.run(spawner).await {
            panic!("the dagx graph failed: {error}");
        }
    }

    pub(super) fn last_value(dag: &DagRunner, last: TaskHandle<u32>) -> u32 {
        match dag.get(last) {
            Ok(value) => value,
            Err(error) => panic!("the last dagx task has no output: {error}"),
        }
    }
}

/// Times `iters` dagx runs, each on a freshly built `DagRunner` (building it is timed
/// only when `with_build`), including `get` of the last value.
fn dagx_runs(
    rt: &Runtime,
    shape: Arc<Shape>,
    build: DagxBuild,
    iters: u64,
    with_build: bool,
) -> Duration {
    on_worker(rt, async move {
        let mut timed = Duration::ZERO;
        for i in 0..iters {
            let started = Instant::now();
            let (dag, last) = build();
            let built = Instant::now();
            with_dagx::run(&dag).await;
            let value = with_dagx::last_value(&dag, last);
            let done = Instant::now();
            timed += done - if with_build { started } else { built };
            if i == 0 {
                shape.check("dagx", value);
            }
            black_box(value);
            drop(dag);
        }
        timed
    })
}

// ---------------------------------------------------------------------------------------
// Hand-written tokio.

fn ok(result: Result<u32, StepError>) -> u32 {
    match result {
        Ok(value) => value,
        Err(error) => panic!("a no-op step failed: {error}"),
    }
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

/// A `JoinSet`: each step is spawned as soon as its dependencies are done.
async fn joinset(shape: &Shape) -> u32 {
    let mut remaining: Vec<usize> = shape.deps.iter().map(Vec::len).collect();
    let mut values = vec![0u32; shape.len()];
    let mut set = JoinSet::new();
    for (step, _) in remaining.iter().enumerate().filter(|(_, r)| **r == 0) {
        set.spawn(async move { (step, gen::join_values(&[])) });
    }
    while let Some(joined) = set.join_next().await {
        let (step, value) = match joined {
            Ok(done) => done,
            Err(error) => panic!("a step task was lost: {error}"),
        };
        values[step] = value;
        for &next in &shape.dependents[step] {
            remaining[next] -= 1;
            if remaining[next] == 0 {
                let args: Vec<u32> = shape.deps[next].iter().map(|d| values[*d]).collect();
                set.spawn(async move { (next, gen::join_values(&args)) });
            }
        }
    }
    values[shape.len() - 1]
}

/// Times `iters` calls of a hand-written baseline.
fn tokio_runs<F>(
    rt: &Runtime,
    shape: Arc<Shape>,
    iters: u64,
    run: impl Fn(Arc<Shape>) -> F + Send + 'static,
) -> Duration
where
    F: std::future::Future<Output = u32> + Send,
{
    on_worker(rt, async move {
        let started = Instant::now();
        for i in 0..iters {
            let value = run(shape.clone()).await;
            if i == 0 {
                shape.check("tokio", value);
            }
            black_box(value);
        }
        started.elapsed()
    })
}

// ---------------------------------------------------------------------------------------
// The groups.

fn configure(group: &mut BenchmarkGroup<'_, WallTime>, steps: usize) {
    group.throughput(Throughput::Elements(steps as u64));
    if steps >= 1000 {
        group.sample_size(10).sampling_mode(SamplingMode::Flat);
    } else {
        group.sample_size(30);
    }
}

/// The engine's side of one point: its workflow, input and last output.
struct EngineSide {
    runs: fn(&Runtime, u64) -> Duration,
    check: fn(&Runtime, &Shape),
}

fn chain_engine(n: usize) -> EngineSide {
    match n {
        10 => EngineSide {
            runs: |rt, iters| engine_runs::<Chain10>(rt, iters, || Chain10Input {}),
            check: |rt, shape| engine_check::<Chain10>(rt, shape, || Chain10Input {}, |o| o.s9),
        },
        100 => EngineSide {
            runs: |rt, iters| engine_runs::<Chain100>(rt, iters, || Chain100Input {}),
            check: |rt, shape| engine_check::<Chain100>(rt, shape, || Chain100Input {}, |o| o.s99),
        },
        1000 => EngineSide {
            runs: |rt, iters| engine_runs::<Chain1000>(rt, iters, || Chain1000Input {}),
            check: |rt, shape| {
                engine_check::<Chain1000>(rt, shape, || Chain1000Input {}, |o| o.s999)
            },
        },
        _ => panic!("no chain workflow of {n} steps is declared"),
    }
}

fn fan_out_engine() -> EngineSide {
    EngineSide {
        runs: |rt, iters| engine_runs::<FanOut100>(rt, iters, || FanOut100Input {}),
        check: |rt, shape| engine_check::<FanOut100>(rt, shape, || FanOut100Input {}, |o| o.s101),
    }
}

/// A hand-written baseline over a shape.
type TokioRun = fn(Arc<Shape>) -> std::pin::Pin<Box<dyn std::future::Future<Output = u32> + Send>>;

/// A dagx graph builder: the runner and the handle of the last step.
type DagxBuild = fn() -> (dagx::DagRunner, dagx::TaskHandle<u32>);

#[allow(clippy::too_many_arguments)]
fn point(
    c: &mut Criterion,
    name: &str,
    rt: &Runtime,
    shape: Arc<Shape>,
    engine: EngineSide,
    dagx_build: DagxBuild,
    tokio_label: &str,
    tokio_run: TokioRun,
) {
    let n = shape.len();
    (engine.check)(rt, &shape);
    let mut group = c.benchmark_group(name);
    configure(&mut group, n);
    group.bench_function(BenchmarkId::new("engine", n), |b| {
        b.iter_custom(|iters| (engine.runs)(rt, iters));
    });
    for (label, with_build) in [("dagrs", false), ("dagrs_build", true)] {
        group.bench_function(BenchmarkId::new(label, n), |b| {
            b.iter_custom(|iters| dagrs_runs(rt, shape.clone(), iters, with_build));
        });
    }
    for (label, with_build) in [("dagx", false), ("dagx_build", true)] {
        group.bench_function(BenchmarkId::new(label, n), |b| {
            b.iter_custom(|iters| dagx_runs(rt, shape.clone(), dagx_build, iters, with_build));
        });
    }
    group.bench_function(BenchmarkId::new(tokio_label, n), |b| {
        b.iter_custom(|iters| tokio_runs(rt, shape.clone(), iters, tokio_run));
    });
    group.finish();
}

fn chain_dagx(n: usize) -> DagxBuild {
    match n {
        10 => || with_dagx::chain(10),
        100 => || with_dagx::chain(100),
        1000 => || with_dagx::chain(1000),
        _ => panic!("no dagx chain of {n} steps"),
    }
}

fn chain_points(c: &mut Criterion, name: &str, rt: &Runtime, sizes: &[usize]) {
    for &n in sizes {
        point(
            c,
            name,
            rt,
            Shape::new(gen::chain(n)),
            chain_engine(n),
            chain_dagx(n),
            "tokio_spawn",
            |shape| Box::pin(async move { spawn_chain(shape.len()).await }),
        );
    }
}

fn fan_out_point(c: &mut Criterion, name: &str, rt: &Runtime) {
    point(
        c,
        name,
        rt,
        Shape::new(gen::fan_out(100)),
        fan_out_engine(),
        with_dagx::fan_out_100,
        "tokio_joinset",
        |shape| Box::pin(async move { joinset(&shape).await }),
    );
}

fn peers(c: &mut Criterion) {
    let rt = current_thread();
    chain_points(c, "peers_chain", &rt, &[10, 100, 1000]);
    fan_out_point(c, "peers_fan_out", &rt);

    let mt = multi_thread();
    chain_points(c, "peers_chain_mt", &mt, &[100]);
    fan_out_point(c, "peers_fan_out_mt", &mt);
}

criterion_group!(peers_benches, peers);
criterion_main!(peers_benches);

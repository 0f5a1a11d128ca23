//! B10: a map of 10,000 no-op items on the in-memory store, against a hand-written
//! `JoinSet` loop with the same concurrency bound (16 in flight) collecting the outputs in
//! order. Both run as a task on a current-thread runtime.
//!
//! Run with `cargo bench -p benches --bench map`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tokio::task::JoinSet;
use workflow_core::{workflow, Engine, StepError};

#[path = "common/mod.rs"]
#[allow(dead_code)]
mod common;
use common::{current_thread, on_worker};

/// The item count.
const ITEMS: usize = 10_000;
/// Items in flight at once, in the map and in the baseline.
const CONCURRENCY: usize = 16;

async fn noop(x: u32) -> Result<u32, StepError> {
    Ok(x.wrapping_add(1))
}

workflow! {
    /// One no-op action per item, sixteen at a time.
    pub workflow Fan(items: Vec<u32>) {
        step each -> u32 {
            for_each: x in items,
            action: noop(x),
            concurrency: 16,
        }
    }
}

fn items() -> Vec<u32> {
    (0..ITEMS as u32).collect()
}

/// The baseline: at most `CONCURRENCY` spawned calls in flight, outputs kept in order.
async fn joinset(items: Vec<u32>) -> Vec<u32> {
    let mut outputs = vec![0u32; items.len()];
    let mut set = JoinSet::new();
    let mut next = 0;
    while next < items.len() || !set.is_empty() {
        while set.len() < CONCURRENCY && next < items.len() {
            let (index, item) = (next, items[next]);
            set.spawn(async move { (index, noop(item).await) });
            next += 1;
        }
        if let Some(Ok((index, Ok(value)))) = set.join_next().await {
            outputs[index] = value;
        }
    }
    outputs
}

fn bench(c: &mut Criterion) {
    let rt = current_thread();
    let mut group = c.benchmark_group("map");
    group.throughput(Throughput::Elements(ITEMS as u64));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("engine", ITEMS), |b| {
        b.iter_custom(|iters| {
            on_worker(&rt, async move {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    // A fresh engine per run: the in-memory store keeps every journal, and
                    // a thousand retained 10,000-item journals would measure the heap.
                    let engine = Engine::builder().build();
                    if let Err(error) = engine.register::<Fan>(()) {
                        panic!("cannot register: {error}");
                    }
                    let input = FanInput { items: items() };
                    let started = Instant::now();
                    let run = match engine.start::<Fan>(input).await {
                        Ok(run) => run,
                        Err(error) => panic!("cannot start: {error}"),
                    };
                    match run.outputs().await {
                        Ok(outputs) => black_box(outputs.each.len()),
                        Err(error) => panic!("the map failed: {error}"),
                    };
                    elapsed += started.elapsed();
                }
                elapsed
            })
        })
    });
    group.bench_function(BenchmarkId::new("joinset", ITEMS), |b| {
        b.iter_custom(|iters| {
            on_worker(&rt, async move {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    let input = items();
                    let started = Instant::now();
                    black_box(joinset(input).await.len());
                    elapsed += started.elapsed();
                }
                elapsed
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

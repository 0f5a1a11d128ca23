//! Workflow shapes for the benchmarks and the `workflow!` source text for them.
//!
//! Shared by the build script (which declares the runtime benchmarks' workflows) and the
//! benchmarks themselves (the macro benchmark parses the same text at run time), so both
//! measure exactly the same graphs.

use std::fmt::Write as _;

/// The seed of every random DAG in the benchmarks.
pub const DAG_SEED: u64 = 0x5eed_da90_0000_0001;

/// SplitMix64: a tiny generator whose output depends on its seed only.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound > 0`).
    pub fn below(&mut self, bound: usize) -> usize {
        (self.next_u64() % bound as u64) as usize
    }
}

/// A graph as dependency lists: `deps[i]` are the steps step `i` reads, all `< i`.
pub type Deps = Vec<Vec<usize>>;

/// `s0 -> s1 -> ... -> s{n-1}`.
pub fn chain(n: usize) -> Deps {
    (0..n)
        .map(|i| if i == 0 { Vec::new() } else { vec![i - 1] })
        .collect()
}

/// One root, `width` steps reading it, one step reading all of them: `1 -> width -> 1`.
pub fn fan_out(width: usize) -> Deps {
    let mut deps = vec![Vec::new()];
    deps.extend((0..width).map(|_| vec![0]));
    deps.push((1..=width).collect());
    deps
}

/// A random DAG of `n` steps with about `2n` edges, each to an earlier step: every step
/// after the first reads 1 to 3 distinct earlier steps (2 on average), chosen uniformly.
pub fn random_dag(n: usize, seed: u64) -> Deps {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|i| {
            let wanted = if i == 0 { 0 } else { (1 + rng.below(3)).min(i) };
            let mut deps: Vec<usize> = Vec::with_capacity(wanted);
            while deps.len() < wanted {
                let dep = rng.below(i);
                if !deps.contains(&dep) {
                    deps.push(dep);
                }
            }
            deps.sort_unstable();
            deps
        })
        .collect()
}

/// The number of edges of a graph.
pub fn edges(deps: &[Vec<usize>]) -> usize {
    deps.iter().map(Vec::len).sum()
}

/// The name of the step function taking `arity` `u32`s.
pub fn join_fn(arity: usize) -> String {
    format!("join{arity}")
}

/// The `workflow!` body for a graph: step `s{i}` returns `u32` and calls
/// `join{k}(deps...)`, so every edge is a data argument.
pub fn spec_source(name: &str, deps: &[Vec<usize>]) -> String {
    let mut out = String::with_capacity(deps.len() * 48);
    let _ = writeln!(out, "workflow {name}() {{");
    for (i, list) in deps.iter().enumerate() {
        let args: Vec<String> = list.iter().map(|d| format!("s{d}")).collect();
        let _ = writeln!(
            out,
            "    step s{i} -> u32 {{ action: {}({}), }}",
            join_fn(list.len()),
            args.join(", ")
        );
    }
    out.push('}');
    out
}

/// The spec file (`workflow_file!`) equivalent to [`spec_source`]: the same steps, the
/// same calls, the same fingerprint.
pub fn spec_yaml(name: &str, deps: &[Vec<usize>]) -> String {
    let mut out = String::with_capacity(deps.len() * 80);
    let _ = writeln!(out, "name: {name}\nsteps:");
    for (i, list) in deps.iter().enumerate() {
        let args: Vec<String> = list.iter().map(|d| format!("s{d}")).collect();
        let _ = writeln!(
            out,
            "  - id: s{i}\n    action: {}\n    inputs: [{}]\n    output: u32",
            join_fn(list.len()),
            args.join(", ")
        );
    }
    out
}

/// The async step functions a set of graphs needs: `join{k}` for every in-degree `k`
/// used. Each returns the wrapping sum of its arguments plus one.
pub fn join_fns(graphs: &[&Deps]) -> String {
    let mut arities: Vec<usize> = graphs
        .iter()
        .flat_map(|deps| deps.iter().map(Vec::len))
        .collect();
    arities.sort_unstable();
    arities.dedup();
    let mut out = String::new();
    for arity in arities {
        let params: Vec<String> = (0..arity).map(|i| format!("a{i}: u32")).collect();
        let mut sum = String::from("1u32");
        for i in 0..arity {
            let _ = write!(sum, ".wrapping_add(a{i})");
        }
        let _ = writeln!(
            out,
            "#[allow(clippy::too_many_arguments)]\npub async fn {}({}) -> Result<u32, StepError> {{ Ok({sum}) }}",
            join_fn(arity),
            params.join(", ")
        );
    }
    out
}

/// What `join{k}` computes, for the hand-written baselines.
pub fn join_values(args: &[u32]) -> u32 {
    args.iter().fold(1u32, |acc, v| acc.wrapping_add(*v))
}

//! The cost of `workflow!` at compile time, for generated specs of 10, 100 and 1000 steps
//! shaped as a chain and as a seeded random DAG (about 2 edges per step, each to an
//! earlier step).
//!
//! - `parse_check`: `workflow_spec::parse::parse` alone (syntax, name resolution, every
//!   check, lowering to the model);
//! - `expand`: the macro's whole job, `expand::workflow` (the above, plus the diagrams
//!   embedded in the docs and constants, plus code generation);
//! - `render`: the three diagram renderers alone (SVG for the docs, Mermaid, DOT);
//! - B8-file, `macro_file/{shape}`: `expand_file`, the whole of `workflow_file!` on the
//!   same spec written as a YAML file (read, YAML parse, lowering, the checks, expansion),
//!   next to `expand_inline`, `workflow!` on the inline spec.
//!
//! The token stream is built outside the timed part. Run with
//! `cargo bench -p benches --bench macro_expand`.

use std::hint::black_box;

use benches::gen;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use proc_macro2::TokenStream;
use workflow_spec::render;

/// The macro's codegen, compiled into this benchmark as it is into the proc-macro crate.
#[path = "../../workflow-macros/src/expand/mod.rs"]
mod expand;
/// The path the generated code names the runtime by, which `expand` asks.
#[path = "../../workflow-macros/src/krate.rs"]
mod krate;

const SIZES: [usize; 3] = [10, 100, 1000];

fn shapes() -> Vec<(&'static str, usize, gen::Deps)> {
    let mut shapes = Vec::new();
    for n in SIZES {
        shapes.push(("chain", n, gen::chain(n)));
        shapes.push(("dag", n, gen::random_dag(n, gen::DAG_SEED)));
    }
    shapes
}

fn macro_expand(c: &mut Criterion) {
    for (shape, n, deps) in shapes() {
        let source = gen::spec_source("W", &deps);
        let tokens: TokenStream = match source.parse() {
            Ok(tokens) => tokens,
            Err(error) => panic!("generated spec does not tokenize: {error}"),
        };
        let parsed = workflow_spec::parse::parse(tokens.clone());
        if let Some(error) = parsed.error() {
            panic!("generated {shape} of {n} steps has errors: {error}");
        }
        let Some(spec) = parsed.spec else {
            panic!("generated {shape} of {n} steps was not lowered");
        };

        let mut group = c.benchmark_group(format!("macro/{shape}"));
        // Elements are steps; criterion also prints steps per second.
        group.throughput(Throughput::Elements(n as u64));
        if n >= 1000 {
            group.sample_size(10).sampling_mode(SamplingMode::Flat);
        } else {
            group.sample_size(30);
        }
        group.bench_with_input(BenchmarkId::new("parse_check", n), &tokens, |b, tokens| {
            b.iter_batched(
                || tokens.clone(),
                workflow_spec::parse::parse,
                BatchSize::SmallInput,
            );
        });
        group.bench_with_input(BenchmarkId::new("expand", n), &tokens, |b, tokens| {
            b.iter_batched(|| tokens.clone(), expand::workflow, BatchSize::SmallInput);
        });
        group.bench_with_input(BenchmarkId::new("render", n), &spec, |b, spec| {
            b.iter(|| {
                (
                    black_box(render::svg(spec)),
                    black_box(render::mermaid(spec)),
                    black_box(render::dot(spec)),
                )
            });
        });
        group.finish();
    }
}

/// B8-file: `workflow_file!` against `workflow!` on the same spec.
fn macro_file(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("workflow-bench-b8-{}", std::process::id()));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        panic!("cannot create {}: {error}", dir.display());
    }
    for (shape, n, deps) in shapes() {
        let tokens: TokenStream = match gen::spec_source("W", &deps).parse() {
            Ok(tokens) => tokens,
            Err(error) => panic!("generated spec does not tokenize: {error}"),
        };
        let file = dir.join(format!("{shape}-{n}.yaml"));
        if let Err(error) = std::fs::write(&file, gen::spec_yaml("W", &deps)) {
            panic!("cannot write {}: {error}", file.display());
        }
        let literal = file.to_string_lossy().into_owned();
        let args = quote::quote!(#literal);
        // The file must be the inline spec's twin, without errors.
        let checked = workflow_spec::yaml::check(&gen::spec_yaml("W", &deps), &Default::default());
        let inline = workflow_spec::parse::parse(tokens.clone()).spec;
        match (&checked.spec, &inline) {
            (Some(file), Some(inline)) if file.fingerprint() == inline.fingerprint() => {}
            _ => panic!(
                "the {shape} of {n} steps as a file is not its inline twin: {:?}",
                checked.errors
            ),
        }
        // And the macro reads that file and expands it without an error.
        if expand::file::workflow_file(args.clone())
            .to_string()
            .contains("compile_error")
        {
            panic!("workflow_file! on {} reports an error", file.display());
        }

        let mut group = c.benchmark_group(format!("macro_file/{shape}"));
        group.throughput(Throughput::Elements(n as u64));
        if n >= 1000 {
            group.sample_size(10).sampling_mode(SamplingMode::Flat);
        } else {
            group.sample_size(30);
        }
        group.bench_with_input(
            BenchmarkId::new("expand_inline", n),
            &tokens,
            |b, tokens| {
                b.iter_batched(|| tokens.clone(), expand::workflow, BatchSize::SmallInput);
            },
        );
        group.bench_with_input(BenchmarkId::new("expand_file", n), &args, |b, args| {
            b.iter_batched(
                || args.clone(),
                expand::file::workflow_file,
                BatchSize::SmallInput,
            );
        });
        group.finish();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(macro_benches, macro_expand, macro_file);
criterion_main!(macro_benches);

//! Support for the workspace's benchmarks (see `BENCHMARKS.md` at the workspace root).
//!
//! The benchmarks live in `benches/`; this library only holds the graph shapes and the
//! `workflow!` source generator they share with the build script.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod gen;

//! Support for the workspace's benchmarks (see `BENCHMARKS.md` at the workspace root).
//!
//! The benchmarks live in `benches/`; this library only holds the graph shapes and the
//! `workflow!` source generator they share with the build script, and what several
//! benchmarks measure alike.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod gen;

/// A numeric setting from the environment, or `default` when unset or not a number.
pub fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The wall clock in ms since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// User + system CPU time of this process, from `/proc/self/stat` (clock ticks of 10 ms;
/// zero where unavailable).
pub fn cpu_time() -> std::time::Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit(')').next().unwrap_or_default();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Fields 14 and 15 of the file (utime, stime) are 11 and 12 after the name.
    std::time::Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

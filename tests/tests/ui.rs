//! Compile-time checks of `workflow!`: one mistake per compile-fail case, each with the
//! exact error rustc prints (`tests/ui/<area>/<case>.stderr`), and specs that must compile.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test -p tests --test ui`
//! and read every diff.

/// The folders of compile-fail cases, one per family of checks.
const AREAS: &[&str] = &[
    "deps",
    "keys",
    "durations",
    "retry",
    "human",
    "effects",
    "conditions",
    "types",
    "recovery",
    "versions",
    "map",
    "child",
    "event",
    "spawn",
    "yaml",
    "schedule",
    "search",
    "forms",
    "flow",
];

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    for area in AREAS {
        t.compile_fail(format!("ui/{area}/*.rs"));
    }
    t.pass("ui/pass/*.rs");
}

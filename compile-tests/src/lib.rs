//! Compile-time checks of `workflow!` and `workflow_file!`, as users meet them.
//!
//! Each folder of `ui/` holds one family of checks: a case per mistake (`ui/<area>/<case>.rs`)
//! with the exact error rustc prints (`.stderr`); `ui/pass/` holds specs that must compile.
//! Run them with `cargo test -p compile-tests`; regenerate the expected output with
//! `TRYBUILD=overwrite cargo test -p compile-tests` and read every diff.

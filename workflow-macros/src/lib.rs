//! The `workflow!` macro: parse -> check -> expand.
//!
//! Use it through `workflow_core`, which re-exports it together with the runtime the
//! generated code needs. The grammar and the checks are documented there and in the
//! `workflow-spec` crate, which holds the parser and the checks shared with the CLI.
#![warn(missing_docs, rust_2018_idioms, unreachable_pub)]

mod expand;
#[cfg(test)]
mod tests;

/// Declares a workflow: its inputs, environment, steps and human checkpoints.
///
/// See the `workflow_core` crate for the grammar, the compile-time checks and what the
/// macro generates.
#[proc_macro]
pub fn workflow(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::workflow(input.into()).into()
}

//! The `workflow!` macro: parse -> check -> expand.
//!
//! Use it through the `workflow` crate (or `workflow_core`), which re-export it together with the runtime the
//! generated code needs. The grammar and the checks are documented there and in the
//! `workflow-spec` crate, which holds the parser and the checks shared with the CLI.
#![deny(missing_docs)]
#![warn(rust_2018_idioms, unreachable_pub)]

mod expand;
mod form;
mod krate;
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

/// Declares a workflow from a spec file: `workflow_file!("specs/onboarding.yaml",
/// actions: crate::onboarding, env: Services)`.
///
/// The path is relative to the calling crate's `CARGO_MANIFEST_DIR`; `actions` is the
/// module the file's `action: name` functions live in (without it, actions are paths as
/// written) and `env` the environment type (overriding the file's `env:`). The file is
/// checked by the same checks as `workflow!`; an error names the file's `path:line:col`
/// and quotes the line. The expansion includes the file, so cargo rebuilds when it
/// changes. The generated API, fingerprint and diagrams are those of the equivalent
/// inline `workflow!`.
#[proc_macro]
pub fn workflow_file(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand::file::workflow_file(input.into()).into()
}

/// `#[derive(DecisionForm)]`: a human step's decision type made of typed fields (on a
/// struct with named fields: `String`, integers, `bool`, enums of unit variants deriving
/// `DecisionForm`, and `Option`s of those), or a choice among unit variants (on an enum).
/// The inbox renders the form; a decision is checked field by field. See
/// `workflow_core::form`.
#[proc_macro_derive(DecisionForm)]
pub fn decision_form(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    form::derive(input.into()).into()
}

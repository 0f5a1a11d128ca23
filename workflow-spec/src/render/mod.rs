//! Diagram renderers: pure functions from a [`Spec`](crate::Spec) to text.
//!
//! Three formats draw the same picture:
//! - [`mermaid`]: a Mermaid `flowchart TD`, for Markdown and rustdoc;
//! - [`dot`]: a Graphviz `digraph`, for `dot -Tsvg` and friends;
//! - [`svg`]: a self-contained SVG laid out here, with no external tool.
//!
//! [`mermaid_with_states`] and [`svg_with_states`] draw a run's state on the same picture:
//! each step coloured by its [`StepMark`] (done, failed, running, waiting, skipped, pending).
//!
//! Every step is a node labelled `id: Output`; human checkpoints are hexagons showing their
//! assignee, timeout and what happens on timeout (`on timeout: escalate -> group`).
//! Edges run from a dependency to its dependent, and the edges into a conditional step
//! carry its condition (`if human_review.approved`). Retry policies, per-attempt timeouts,
//! external effects, compensations (`undo: path`) and `on_failure: continue` (dashed) are
//! noted on the node.
//!
//! The renderers do no I/O and never panic: out-of-range dependency indices are skipped,
//! repeated ones drawn once, and every text is escaped for its format. Output follows
//! declaration order, so it is stable from one build to the next.
//!
//! ```
//! use workflow_spec::render;
//! use workflow_spec::Spec;
//!
//! let spec = Spec { name: "Empty".into(), ..Spec::default() };
//! assert!(render::mermaid(&spec).starts_with("flowchart TD"));
//! assert!(render::dot(&spec).starts_with("digraph"));
//! assert!(render::svg(&spec).starts_with("<svg"));
//! ```

mod dot;
mod layout;
mod mermaid;
mod states;
mod svg;
mod text;

pub use dot::dot;
pub use mermaid::mermaid;
pub use states::{mermaid_with_states, svg_with_states, StepMark};
pub use svg::svg;

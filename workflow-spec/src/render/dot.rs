//! The Graphviz DOT renderer.

use std::fmt::Write as _;

use crate::model::{Effect, OnFailure, Spec, StepKind};

use super::text::{condition_label, edges, has_edge_in, node_names, node_text, one_line};

/// Renders `spec` as a Graphviz `digraph`, top to bottom.
///
/// Action steps are rounded boxes, map steps stacked boxes (`shape=box3d`), child
/// workflows components (`shape=component`), events signal shapes (`shape=cds`) and human
/// checkpoints hexagons (`shape=hexagon`), the last four filled, each labelled
/// `id: Output` with its notes on further lines.
/// External effects get a double outline (`peripheries=2`); `on_failure: continue` steps
/// a dashed outline and dashed outgoing edges. Edges run from a dependency to its
/// dependent; the edges into a conditional step are labelled `if condition`. Every id and
/// label is a quoted string with `"` and `\` escaped.
///
/// ```
/// use workflow_spec::render::dot;
/// use workflow_spec::Spec;
///
/// let spec = Spec { name: "Empty".into(), ..Spec::default() };
/// assert!(dot(&spec).starts_with("digraph \"Empty\" {"));
/// ```
pub fn dot(spec: &Spec) -> String {
    let names = node_names(spec);
    let edges = edges(spec);
    let has_edge_in = has_edge_in(spec.steps.len(), &edges);
    let mut out = format!("digraph \"{}\" {{\n", escape(&spec.name));
    out.push_str("    rankdir=TB;\n");
    out.push_str(
        "    node [shape=box, style=rounded, fontname=\"Helvetica,Arial,sans-serif\", fontsize=12];\n",
    );
    out.push_str("    edge [fontname=\"Helvetica,Arial,sans-serif\", fontsize=10];\n");
    for (index, step) in spec.steps.iter().enumerate() {
        let text = node_text(step, !has_edge_in[index]);
        let label = text.lines().map(escape).collect::<Vec<_>>().join("\\n");
        let dashed = step.on_failure == OnFailure::Continue;
        let mut attrs = vec![format!("label=\"{label}\"")];
        match &step.kind {
            StepKind::Human(_) => {
                attrs.push("shape=hexagon".to_owned());
                attrs.push(
                    if dashed {
                        "style=\"filled,dashed\""
                    } else {
                        "style=filled"
                    }
                    .to_owned(),
                );
                attrs.push("fillcolor=\"#fff4d6\"".to_owned());
                attrs.push("color=\"#b7791f\"".to_owned());
            }
            StepKind::Action(action) => {
                if action.for_each.is_some() {
                    attrs.push("shape=box3d".to_owned());
                    attrs.push(filled(dashed));
                    attrs.push("fillcolor=\"#e6fffa\"".to_owned());
                    attrs.push("color=\"#2c7a7b\"".to_owned());
                } else if dashed {
                    attrs.push("style=\"rounded,dashed\"".to_owned());
                }
                if action.effect == Effect::External {
                    attrs.push("peripheries=2".to_owned());
                }
            }
            StepKind::Child(_) => {
                attrs.push("shape=component".to_owned());
                attrs.push(filled(dashed));
                attrs.push("fillcolor=\"#f3e8ff\"".to_owned());
                attrs.push("color=\"#6b46c1\"".to_owned());
            }
            StepKind::Event(_) => {
                attrs.push("shape=cds".to_owned());
                attrs.push(filled(dashed));
                attrs.push("fillcolor=\"#ebf8ff\"".to_owned());
                attrs.push("color=\"#2b6cb0\"".to_owned());
            }
        }
        let _ = writeln!(
            out,
            "    \"{}\" [{}];",
            escape(&names[index]),
            attrs.join(", ")
        );
    }
    for &(from, to) in &edges {
        let mut attrs = Vec::new();
        if let Some(label) = condition_label(&spec.steps[to]) {
            attrs.push(format!("label=\"{}\"", escape(&label)));
        }
        if spec.steps[from].on_failure == OnFailure::Continue {
            attrs.push("style=dashed".to_owned());
        }
        let (from_name, to_name) = (escape(&names[from]), escape(&names[to]));
        if attrs.is_empty() {
            let _ = writeln!(out, "    \"{from_name}\" -> \"{to_name}\";");
        } else {
            let _ = writeln!(
                out,
                "    \"{from_name}\" -> \"{to_name}\" [{}];",
                attrs.join(", ")
            );
        }
    }
    out.push_str("}\n");
    out
}

/// `style=filled`, dashed for an `on_failure: continue` step.
fn filled(dashed: bool) -> String {
    if dashed {
        "style=\"filled,dashed\"".to_owned()
    } else {
        "style=filled".to_owned()
    }
}

/// Escapes text for a DOT quoted string: `\` and `"` get a backslash, line breaks become
/// spaces (the renderer joins lines with `\n` itself).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in one_line(text) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_quotes_and_backslashes() {
        assert_eq!(escape(r#"a"b\n<c>"#), r#"a\"b\\n<c>"#);
        assert_eq!(escape("two\nlines"), "two lines");
    }
}

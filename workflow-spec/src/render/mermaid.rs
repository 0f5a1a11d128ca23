//! The Mermaid renderer.

use std::fmt::Write as _;

use crate::model::{Effect, OnFailure, Spec, StepKind};

use super::text::{condition_label, edges, has_edge_in, node_names, node_text, one_line};

/// Renders `spec` as a Mermaid `flowchart TD`.
///
/// Action steps are rectangles, map steps parallelograms (`id[/"..."/]`, noting their
/// items and concurrency), child workflows subroutines (`id[["..."]]`, naming the workflow
/// they run), events flags (`id>"..."]`) and human checkpoints hexagons (`id{{"..."}}`),
/// each labelled `id: Output` with its notes on further lines (`<br/>`). Edges run from a
/// dependency to its dependent; the edges into a conditional step are labelled
/// `if condition`, and the edges out of an `on_failure: continue` step are dotted.
/// Class definitions colour human checkpoints, maps, child workflows and events, thicken
/// external effects and dash `continue` steps. Text is escaped with Mermaid entity codes (`#quot;`, `#lt;`, ...),
/// so any id, type or group name is safe inside the quoted labels.
///
/// ```
/// use workflow_spec::render::mermaid;
/// use workflow_spec::Spec;
///
/// let spec = Spec { name: "Empty".into(), ..Spec::default() };
/// assert_eq!(mermaid(&spec), "flowchart TD\n");
/// ```
pub fn mermaid(spec: &Spec) -> String {
    let names = node_names(spec);
    let edges = edges(spec);
    let has_edge_in = has_edge_in(spec.steps.len(), &edges);
    let mut out = String::from("flowchart TD\n");
    let mut human = Vec::new();
    let mut maps = Vec::new();
    let mut children = Vec::new();
    let mut events = Vec::new();
    let mut external = Vec::new();
    let mut continues = Vec::new();
    for (index, step) in spec.steps.iter().enumerate() {
        let text = node_text(step, !has_edge_in[index]);
        let label = text.lines().map(escape).collect::<Vec<_>>().join("<br/>");
        let name = &names[index];
        match &step.kind {
            StepKind::Human(_) => {
                human.push(name.as_str());
                let _ = writeln!(out, "    {name}{{{{\"{label}\"}}}}");
            }
            StepKind::Action(action) => {
                if action.effect == Effect::External {
                    external.push(name.as_str());
                }
                if action.for_each.is_some() {
                    maps.push(name.as_str());
                    let _ = writeln!(out, "    {name}[/\"{label}\"/]");
                } else {
                    let _ = writeln!(out, "    {name}[\"{label}\"]");
                }
            }
            StepKind::Child(_) => {
                children.push(name.as_str());
                let _ = writeln!(out, "    {name}[[\"{label}\"]]");
            }
            StepKind::Event(_) => {
                events.push(name.as_str());
                let _ = writeln!(out, "    {name}>\"{label}\"]");
            }
        }
        if step.on_failure == OnFailure::Continue {
            continues.push(name.as_str());
        }
    }
    for &(from, to) in &edges {
        let arrow = if spec.steps[from].on_failure == OnFailure::Continue {
            "-.->"
        } else {
            "-->"
        };
        let (from_name, to_name) = (&names[from], &names[to]);
        match condition_label(&spec.steps[to]) {
            Some(label) => {
                let label = escape(&label);
                let _ = writeln!(out, "    {from_name} {arrow}|\"{label}\"| {to_name}");
            }
            None => {
                let _ = writeln!(out, "    {from_name} {arrow} {to_name}");
            }
        }
    }
    let classes = [
        ("human", "fill:#fff4d6,stroke:#b7791f,color:#222", &human),
        ("map", "fill:#e6fffa,stroke:#2c7a7b,color:#222", &maps),
        ("child", "fill:#f3e8ff,stroke:#6b46c1,color:#222", &children),
        ("event", "fill:#ebf8ff,stroke:#2b6cb0,color:#222", &events),
        ("external", "stroke-width:3px", &external),
        ("continueOnFailure", "stroke-dasharray:5 5", &continues),
    ];
    for (class, style, members) in classes {
        if !members.is_empty() {
            let _ = writeln!(out, "    classDef {class} {style}");
            let _ = writeln!(out, "    class {} {class}", members.join(","));
        }
    }
    out
}

/// Escapes text for a quoted Mermaid label: entity codes for the characters Mermaid or its
/// HTML labels would read (`"` `#` `&` `<` `>` `|` `%` and the backtick of markdown
/// strings), spaces for line breaks.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in one_line(text) {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '&' => out.push_str("#amp;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '|' => out.push_str("#124;"),
            '%' => out.push_str("#37;"),
            '`' => out.push_str("#96;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_mermaid_reads() {
        assert_eq!(
            escape("a\"b<c>&d|e#f%g`h\ni"),
            "a#quot;b#lt;c#gt;#amp;d#124;e#35;f#37;g#96;h i"
        );
        assert_eq!(escape("Vec[u8] (x) {y}"), "Vec[u8] (x) {y}");
    }
}

//! The self-contained SVG renderer.

use std::fmt::Write as _;

use crate::model::{Effect, OnFailure, Spec, Step, StepKind};

use super::layout::{layout, NodeSize, Rect, LABEL_HEIGHT};
use super::text::{condition_label, edges, has_edge_in, node_text, one_line, NodeText};

const FONT: &str = "Helvetica, Arial, sans-serif";
/// Font size and width reserved per character of a node's title (bold).
const TITLE_SIZE: i64 = 13;
const TITLE_CHAR: i64 = 8;
/// Font size and width reserved per character of a node's detail lines.
const DETAIL_SIZE: i64 = 12;
const DETAIL_CHAR: i64 = 7;
/// Font size and width reserved per character of an edge label.
const LABEL_SIZE: i64 = 11;
const LABEL_CHAR: i64 = 7;
const LABEL_PAD: i64 = 4;
/// Padding inside a box, the height of a text line and where its baseline sits.
const PAD_X: i64 = 12;
const PAD_Y: i64 = 8;
const LINE: i64 = 16;
const BASELINE: i64 = 12;
/// How far a hexagon's corners cut in on each side.
const HEX_INSET: i64 = 16;
/// How far the second box of a map's stack sits behind the first.
const STACK: i64 = 6;
/// How far a child workflow's inner bars sit from its sides.
const BAR_INSET: i64 = 10;
/// How deep an event's notch cuts into its left side.
const NOTCH: i64 = 14;
const MIN_WIDTH: i64 = 60;

const EDGE_COLOR: &str = "#555555";
const ACTION_FILL: &str = "#eef4ff";
const ACTION_STROKE: &str = "#4a6fa5";
const HUMAN_FILL: &str = "#fff4d6";
const HUMAN_STROKE: &str = "#b7791f";
const MAP_FILL: &str = "#e6fffa";
const MAP_STROKE: &str = "#2c7a7b";
const CHILD_FILL: &str = "#f3e8ff";
const CHILD_STROKE: &str = "#6b46c1";
const EVENT_FILL: &str = "#ebf8ff";
const EVENT_STROKE: &str = "#2b6cb0";

/// Renders `spec` as a standalone SVG document, laid out here without any external tool.
///
/// Steps are placed in layers (a step sits one row below its deepest dependency) and
/// boxes are sized from their text, so no two boxes or labels overlap. Action steps are
/// rounded rectangles, map steps a stack of two, child workflows rectangles with a bar
/// inside each side (a subroutine), events rectangles with a notch on the left, human
/// checkpoints hexagons; all but actions have a fill of their own. Each shows
/// `id: Output` in bold and its notes below (retry, per-attempt timeout, external effect,
/// `undo: path`, assignee, timeout and `on timeout: escalate -> group`). External effects
/// have a thick outline, `on_failure: continue` steps a dashed outline and dashed edges
/// out. Edges end in arrowheads; the condition of a conditional step is a label where its
/// incoming edges meet. All text is XML-escaped. The document sets `width`, `height` and
/// `viewBox` and uses no external resources.
///
/// ```
/// use workflow_spec::render::svg;
/// use workflow_spec::Spec;
///
/// let spec = Spec { name: "Empty".into(), ..Spec::default() };
/// let svg = svg(&spec);
/// assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
/// assert!(svg.ends_with("</svg>\n"));
/// ```
pub fn svg(spec: &Spec) -> String {
    let edges: Vec<(usize, usize)> = edges(spec)
        .into_iter()
        .filter(|(from, to)| from != to)
        .collect();
    let has_edge_in = has_edge_in(spec.steps.len(), &edges);
    let texts: Vec<NodeText> = spec
        .steps
        .iter()
        .zip(&has_edge_in)
        .map(|(step, has_edge_in)| node_text(step, !has_edge_in))
        .collect();
    let labels: Vec<Option<String>> = spec
        .steps
        .iter()
        .zip(&has_edge_in)
        .map(|(step, &has_edge_in)| condition_label(step).filter(|_| has_edge_in))
        .collect();
    let sizes: Vec<NodeSize> = spec
        .steps
        .iter()
        .zip(&texts)
        .zip(&labels)
        .map(|((step, text), label)| {
            let title = chars(&text.title) * TITLE_CHAR;
            let details = text.details.iter().map(|line| chars(line) * DETAIL_CHAR);
            let mut width = details.fold(title, i64::max) + 2 * PAD_X;
            let mut height = 2 * PAD_Y + LINE * (1 + text.details.len() as i64);
            match shape(step) {
                Shape::Hexagon => width += 2 * HEX_INSET,
                Shape::Stack => {
                    width += STACK;
                    height += STACK;
                }
                Shape::Bars => width += 2 * BAR_INSET,
                Shape::Notched => width += NOTCH,
                Shape::Box => {}
            }
            NodeSize {
                width: width.max(MIN_WIDTH),
                height,
                label_width: label
                    .as_ref()
                    .map_or(0, |label| chars(label) * LABEL_CHAR + 2 * LABEL_PAD),
            }
        })
        .collect();
    let layout = layout(&sizes, &edges);
    let (width, height) = (layout.width, layout.height);

    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" font-family=\"{FONT}\" font-size=\"{DETAIL_SIZE}\" \
         role=\"img\" aria-label=\"workflow {}\">",
        escape(&spec.name)
    );
    let _ = writeln!(out, "  <title>{}</title>", escape(&spec.name));
    out.push_str("  <defs>\n");
    let _ = writeln!(
        out,
        "    <marker id=\"wf-arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
         markerWidth=\"8\" markerHeight=\"8\" markerUnits=\"userSpaceOnUse\" orient=\"auto\">\
         <path d=\"M0,0 L10,5 L0,10 z\" fill=\"{EDGE_COLOR}\"/></marker>"
    );
    out.push_str("  </defs>\n");
    let _ = writeln!(
        out,
        "  <rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>"
    );

    out.push_str("  <g class=\"edges\" fill=\"none\" stroke-width=\"1.5\">\n");
    for (&(from, _), route) in edges.iter().zip(&layout.routes) {
        if route.is_empty() {
            continue;
        }
        let d: Vec<String> = route
            .iter()
            .enumerate()
            .map(|(at, (x, y))| format!("{}{x},{y}", if at == 0 { "M" } else { "L" }))
            .collect();
        let dash = if spec.steps[from].on_failure == OnFailure::Continue {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "    <path d=\"{}\" stroke=\"{EDGE_COLOR}\"{dash} marker-end=\"url(#wf-arrow)\"/>",
            d.join(" ")
        );
    }
    out.push_str("  </g>\n");

    out.push_str("  <g class=\"conditions\">\n");
    for (label, rect) in labels.iter().zip(&layout.labels) {
        if let (Some(label), Some(rect)) = (label, rect) {
            let Rect { x, y, width, .. } = *rect;
            let _ = writeln!(
                out,
                "    <rect x=\"{x}\" y=\"{y}\" width=\"{width}\" height=\"{LABEL_HEIGHT}\" rx=\"3\" \
                 fill=\"#ffffff\" fill-opacity=\"0.9\"/>"
            );
            let _ = writeln!(
                out,
                "    <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{LABEL_SIZE}\" \
                 font-style=\"italic\" fill=\"#333333\">{}</text>",
                rect.center_x(),
                y + BASELINE,
                escape(label)
            );
        }
    }
    out.push_str("  </g>\n");

    out.push_str("  <g class=\"steps\">\n");
    for ((step, text), rect) in spec.steps.iter().zip(&texts).zip(&layout.boxes) {
        let Rect {
            x,
            y,
            width,
            height,
        } = *rect;
        let dash = if step.on_failure == OnFailure::Continue {
            " stroke-dasharray=\"6 4\""
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "    <g class=\"step\" id=\"step-{}\">",
            escape(&step.id)
        );
        // The text sits in the front box: for a map, the lower-left one of the stack.
        let (front, shift) = match shape(step) {
            Shape::Stack => (
                Rect {
                    x,
                    y: y + STACK,
                    width: width - STACK,
                    height: height - STACK,
                },
                STACK,
            ),
            _ => (*rect, 0),
        };
        let stroke_width = match &step.kind {
            StepKind::Action(action) if action.effect == Effect::External => "3",
            _ => "1.5",
        };
        match shape(step) {
            Shape::Hexagon => {
                let (right, bottom, middle) = (x + width, y + height, y + height / 2);
                let points = [
                    (x + HEX_INSET, y),
                    (right - HEX_INSET, y),
                    (right, middle),
                    (right - HEX_INSET, bottom),
                    (x + HEX_INSET, bottom),
                    (x, middle),
                ];
                polygon(&mut out, &points, HUMAN_FILL, HUMAN_STROKE, dash);
            }
            Shape::Box => {
                let _ = writeln!(
                    out,
                    "      <rect x=\"{x}\" y=\"{y}\" width=\"{width}\" height=\"{height}\" rx=\"6\" \
                     fill=\"{ACTION_FILL}\" stroke=\"{ACTION_STROKE}\" \
                     stroke-width=\"{stroke_width}\"{dash}/>"
                );
            }
            Shape::Stack => {
                for (bx, by) in [(x + STACK, y), (x, y + STACK)] {
                    let _ = writeln!(
                        out,
                        "      <rect x=\"{bx}\" y=\"{by}\" width=\"{}\" height=\"{}\" rx=\"6\" \
                         fill=\"{MAP_FILL}\" stroke=\"{MAP_STROKE}\" \
                         stroke-width=\"{stroke_width}\"{dash}/>",
                        width - STACK,
                        height - STACK
                    );
                }
            }
            Shape::Bars => {
                let _ = writeln!(
                    out,
                    "      <rect x=\"{x}\" y=\"{y}\" width=\"{width}\" height=\"{height}\" \
                     fill=\"{CHILD_FILL}\" stroke=\"{CHILD_STROKE}\" stroke-width=\"1.5\"{dash}/>"
                );
                for bar in [x + BAR_INSET, x + width - BAR_INSET] {
                    let _ = writeln!(
                        out,
                        "      <line x1=\"{bar}\" y1=\"{y}\" x2=\"{bar}\" y2=\"{}\" \
                         stroke=\"{CHILD_STROKE}\" stroke-width=\"1.5\"/>",
                        y + height
                    );
                }
            }
            Shape::Notched => {
                let (right, bottom) = (x + width, y + height);
                let points = [
                    (x, y),
                    (right, y),
                    (right, bottom),
                    (x, bottom),
                    (x + NOTCH, y + height / 2),
                ];
                polygon(&mut out, &points, EVENT_FILL, EVENT_STROKE, dash);
            }
        }
        let center = front.center_x();
        let y = y + shift;
        let _ = writeln!(
            out,
            "      <text x=\"{center}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{TITLE_SIZE}\" \
             font-weight=\"bold\" fill=\"#111111\">{}</text>",
            y + PAD_Y + BASELINE,
            escape(&text.title)
        );
        for (line, detail) in text.details.iter().enumerate() {
            let _ = writeln!(
                out,
                "      <text x=\"{center}\" y=\"{}\" text-anchor=\"middle\" fill=\"#333333\">{}</text>",
                y + PAD_Y + LINE * (line as i64 + 1) + BASELINE,
                escape(detail)
            );
        }
        out.push_str("    </g>\n");
    }
    out.push_str("  </g>\n");
    out.push_str("</svg>\n");
    out
}

/// How a step is drawn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// An action: a rounded rectangle.
    Box,
    /// A map: two rounded rectangles, one behind the other.
    Stack,
    /// A child workflow: a rectangle with a bar inside each side.
    Bars,
    /// An event: a rectangle with a notch in its left side.
    Notched,
    /// A human checkpoint: a hexagon.
    Hexagon,
}

fn shape(step: &Step) -> Shape {
    match &step.kind {
        StepKind::Action(action) if action.for_each.is_some() => Shape::Stack,
        StepKind::Action(_) => Shape::Box,
        StepKind::Child(_) => Shape::Bars,
        StepKind::Event(_) => Shape::Notched,
        StepKind::Human(_) => Shape::Hexagon,
    }
}

fn polygon(out: &mut String, points: &[(i64, i64)], fill: &str, stroke: &str, dash: &str) {
    let points = points
        .iter()
        .map(|(px, py)| format!("{px},{py}"))
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(
        out,
        "      <polygon points=\"{points}\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"{dash}/>"
    );
}

/// The number of characters of `text`, as the layout counts them.
fn chars(text: &str) -> i64 {
    text.chars().count() as i64
}

/// Escapes text for XML character data and attribute values; control characters and the
/// two characters XML forbids become spaces and replacement characters.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in one_line(text) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_xml() {
        assert_eq!(
            escape("a<b>&\"c\"'d'\n\u{0}\u{ffff}"),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;  \u{fffd}"
        );
    }
}

//! The diagrams of map steps, child workflows and events: snapshots of the `Fulfil` spec
//! in every format, what each diagram must show of the three, and a run's state drawn on
//! their shapes.
//!
//! Regenerate the snapshots with
//! `UPDATE_SNAPSHOTS=1 cargo test -p workflow-spec --test render_language` and read the diff.

mod support;

use support::{assert_snapshot, assert_well_formed, spec, FULFIL};
use workflow_spec::render::{dot, mermaid, mermaid_with_states, svg, svg_with_states, StepMark};

/// The lines of the SVG group of step `id`.
fn svg_group<'a>(svg: &'a str, id: &str) -> Vec<&'a str> {
    let start = format!("    <g class=\"step\" id=\"step-{id}\">");
    let mut lines = svg.lines().skip_while(|line| *line != start);
    let mut group = Vec::new();
    for line in lines.by_ref() {
        group.push(line);
        if line == "    </g>" {
            break;
        }
    }
    assert!(!group.is_empty(), "no group for {id}");
    group
}

#[test]
fn fulfil_snapshots() {
    let spec = spec(FULFIL);
    assert_snapshot("fulfil.mmd", &mermaid(&spec));
    assert_snapshot("fulfil.dot", &dot(&spec));
    assert_snapshot("fulfil.svg", &svg(&spec));
}

#[test]
fn mermaid_draws_each_construct_with_its_own_shape_and_notes() {
    let drawn = mermaid(&spec(FULFIL));
    // A map: a parallelogram with its items, concurrency and what a failed item does.
    assert!(drawn.contains(
        "    reserve_lines[/\"reserve_lines: Vec#lt;Hold#gt;<br/>for each line in order.lines<br/>8 at a time<br/>retry 3x exponential 1s..1m, jitter full<br/>undo: stock::release\"/]\n"
    ));
    assert!(drawn.contains("price[/\"price: Vec#lt;Option#lt;u64#gt;#gt;<br/>for each hold in "));
    assert!(drawn.contains("<br/>16 at a time, failed items skipped\"/]\n"));
    // A child workflow: a subroutine naming the workflow it runs.
    assert!(drawn.contains("    ship[[\"ship: ShippingOutputs<br/>workflow Shipping\"]]\n"));
    // An event: a flag with its deadline and what happens then.
    assert!(drawn.contains(
        "    payment>\"payment: PaymentConfirmed<br/>waits for an event, 1h<br/>on timeout: continue\"]\n"
    ));
    // Edges from what each reads.
    for edge in [
        "    reserve_lines --> price\n",
        "    reserve_lines --> ship\n",
        "    reserve_lines --> payment\n",
        "    ship --> confirm\n",
        "    payment --> confirm\n",
    ] {
        assert!(drawn.contains(edge), "missing {edge:?} in\n{drawn}");
    }
    // A class per construct.
    assert!(drawn.contains("    classDef map fill:#e6fffa,stroke:#2c7a7b,color:#222\n    class reserve_lines,price map\n"));
    assert!(drawn.contains(
        "    classDef child fill:#f3e8ff,stroke:#6b46c1,color:#222\n    class ship child\n"
    ));
    assert!(drawn.contains(
        "    classDef event fill:#ebf8ff,stroke:#2b6cb0,color:#222\n    class payment event\n"
    ));
}

#[test]
fn dot_draws_each_construct_with_its_own_shape() {
    let drawn = dot(&spec(FULFIL));
    assert!(drawn.contains("    \"reserve_lines\" [label=\"reserve_lines: Vec<Hold>\\nfor each line in order.lines\\n8 at a time\\nretry 3x exponential 1s..1m, jitter full\\nundo: stock::release\", shape=box3d, style=filled, fillcolor=\"#e6fffa\", color=\"#2c7a7b\"];\n"));
    assert!(drawn.contains("    \"ship\" [label=\"ship: ShippingOutputs\\nworkflow Shipping\", shape=component, style=filled, fillcolor=\"#f3e8ff\", color=\"#6b46c1\"];\n"));
    assert!(drawn.contains("    \"payment\" [label=\"payment: PaymentConfirmed\\nwaits for an event, 1h\\non timeout: continue\", shape=cds, style=filled, fillcolor=\"#ebf8ff\", color=\"#2b6cb0\"];\n"));
    assert!(drawn.contains("    \"reserve_lines\" -> \"ship\";\n"));
}

#[test]
fn svg_draws_a_stack_bars_and_a_notch() {
    let drawn = svg(&spec(FULFIL));
    assert_well_formed(&drawn);
    // A map is two boxes, the one behind shifted up and right.
    let map = svg_group(&drawn, "reserve_lines");
    let rects: Vec<&&str> = map.iter().filter(|line| line.contains("<rect")).collect();
    assert_eq!(rects.len(), 2, "{map:#?}");
    assert!(rects.iter().all(|line| line.contains("fill=\"#e6fffa\"")));
    // A child workflow is a box with a bar inside each side.
    let child = svg_group(&drawn, "ship");
    assert_eq!(
        child.iter().filter(|line| line.contains("<rect")).count(),
        1
    );
    assert_eq!(
        child.iter().filter(|line| line.contains("<line ")).count(),
        2
    );
    assert!(child
        .iter()
        .any(|line| line.contains(">workflow Shipping</text>")));
    // An event is a five-cornered shape, notched on the left.
    let event = svg_group(&drawn, "payment");
    let polygon = event
        .iter()
        .find(|line| line.contains("<polygon"))
        .expect("a polygon");
    let points = polygon
        .split("points=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("points");
    assert_eq!(points.split(' ').count(), 5, "{points}");
    assert!(event
        .iter()
        .any(|line| line.contains(">waits for an event, 1h</text>")));
}

#[test]
fn the_text_of_a_map_sits_in_its_front_box() {
    let drawn = svg(&spec(FULFIL));
    let map = svg_group(&drawn, "reserve_lines");
    let number = |line: &str, attr: &str| -> i64 {
        line.split(&format!(" {attr}=\""))
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {attr} in {line}"))
    };
    let front = map
        .iter()
        .filter(|line| line.contains("<rect"))
        .nth(1)
        .expect("the front box");
    let (x, y) = (number(front, "x"), number(front, "y"));
    let (width, height) = (number(front, "width"), number(front, "height"));
    for text in map.iter().filter(|line| line.contains("<text")) {
        let (tx, ty) = (number(text, "x"), number(text, "y"));
        assert_eq!(tx, x + width / 2, "centred in the front box: {text}");
        assert!(ty > y && ty < y + height, "inside the front box: {text}");
    }
}

#[test]
fn a_run_state_colours_the_new_shapes() {
    let spec = spec(FULFIL);
    let marks = [
        StepMark::Done,
        StepMark::Running,
        StepMark::Waiting,
        StepMark::Waiting,
        StepMark::Pending,
    ];
    let drawn = svg_with_states(&spec, &marks);
    assert!(drawn.contains("<g class=\"step state-running\" id=\"step-price\">"));
    assert!(drawn.contains("<g class=\"step state-waiting\" id=\"step-ship\">"));
    assert!(drawn.contains("<g class=\"step state-waiting\" id=\"step-payment\">"));
    // The bars of a child workflow take the state's stroke, as its box does.
    assert!(drawn.contains(".state-waiting > line { stroke: #c05621; }"));
    assert!(drawn.contains(".state-waiting > rect, .state-waiting > polygon { fill: #fbd38d;"));
    let mermaid_drawn = mermaid_with_states(&spec, &marks);
    let own = mermaid_drawn.find("classDef event").expect("event class");
    let state = mermaid_drawn
        .find("classDef waiting")
        .expect("waiting class");
    assert!(own < state, "the state's class comes last, so it wins");
    assert!(mermaid_drawn.contains("    class ship,payment waiting\n"));
}

//! A run's state drawn on the diagram: the same picture as [`mermaid`] and [`svg`], with
//! each step coloured by where the run is (done, failed, running, waiting, skipped,
//! pending).

use std::fmt::Write as _;

use crate::model::Spec;

use super::{mermaid, svg};

/// Where one step of a run is, as the diagram colours it.
///
/// The CLI maps the runtime's step states onto these: a step between two attempts is
/// `Running`, a human task that is open is `Waiting`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepMark {
    /// Settled with an output (or a decision).
    Done,
    /// Failed for good.
    Failed,
    /// An attempt is in flight, or the next one is due.
    Running,
    /// A human task is open.
    Waiting,
    /// Skipped: false condition, absent upstream, or proposed in a dry run.
    Skipped,
    /// Not started.
    Pending,
}

impl StepMark {
    /// Every mark, in the order their styles are declared.
    pub const ALL: [StepMark; 6] = [
        StepMark::Pending,
        StepMark::Skipped,
        StepMark::Done,
        StepMark::Running,
        StepMark::Waiting,
        StepMark::Failed,
    ];

    /// The mark's name, also its class name in the diagrams: `done`, `failed`, `running`,
    /// `waiting`, `skipped`, `pending`.
    pub fn as_str(self) -> &'static str {
        match self {
            StepMark::Done => "done",
            StepMark::Failed => "failed",
            StepMark::Running => "running",
            StepMark::Waiting => "waiting",
            StepMark::Skipped => "skipped",
            StepMark::Pending => "pending",
        }
    }

    /// Fill, stroke and text colour.
    fn colours(self) -> (&'static str, &'static str, &'static str) {
        match self {
            StepMark::Done => ("#d3f4dc", "#2f855a", "#1a202c"),
            StepMark::Failed => ("#fed7d7", "#c53030", "#1a202c"),
            StepMark::Running => ("#bee3f8", "#2b6cb0", "#1a202c"),
            StepMark::Waiting => ("#fbd38d", "#c05621", "#1a202c"),
            StepMark::Skipped => ("#edf2f7", "#a0aec0", "#718096"),
            StepMark::Pending => ("#ffffff", "#cbd5e0", "#4a5568"),
        }
    }

    /// A dash pattern for the outline, if any.
    fn dash(self) -> Option<&'static str> {
        match self {
            StepMark::Skipped => Some("3 3"),
            _ => None,
        }
    }
}

/// Renders `spec` as [`mermaid`] does and colours each step by its mark: `marks[i]` is the
/// mark of step `i`. Steps without a mark (a short slice) are drawn as in [`mermaid`];
/// marks past the last step are ignored.
///
/// The output is the plain diagram followed by one `classDef` per mark in use and the
/// `class` lines assigning it, declared after the diagram's own classes so that a state's
/// colour wins over the human checkpoints' fill.
///
/// ```
/// use workflow_spec::render::{mermaid, mermaid_with_states, StepMark};
/// use workflow_spec::Spec;
///
/// let spec = Spec { name: "Empty".into(), ..Spec::default() };
/// assert_eq!(mermaid_with_states(&spec, &[]), mermaid(&spec));
/// ```
pub fn mermaid_with_states(spec: &Spec, marks: &[StepMark]) -> String {
    let mut out = mermaid(spec);
    let names = super::text::node_names(spec);
    for mark in StepMark::ALL {
        let members: Vec<&str> = names
            .iter()
            .zip(marks)
            .filter(|(_, m)| **m == mark)
            .map(|(name, _)| name.as_str())
            .collect();
        if members.is_empty() {
            continue;
        }
        let (fill, stroke, color) = mark.colours();
        let dash = mark
            .dash()
            .map_or(String::new(), |d| format!(",stroke-dasharray:{d}"));
        let _ = writeln!(
            out,
            "    classDef {} fill:{fill},stroke:{stroke},color:{color}{dash}",
            mark.as_str()
        );
        let _ = writeln!(out, "    class {} {}", members.join(","), mark.as_str());
    }
    out
}

/// Renders `spec` as [`svg`] does and colours each step by its mark (`marks[i]` is the
/// mark of step `i`; steps without one are drawn as in [`svg`]).
///
/// Each marked step's group gets the class `state-<mark>` and a `<title>` (`id: mark`,
/// shown as a tooltip); a `<style>` element after `<defs>` colours the classes, which
/// overrides the shapes' own fill and stroke attributes (boxes, stacks, hexagons, notched
/// event shapes, and the bars of a child workflow).
///
/// ```
/// use workflow_spec::render::{svg_with_states, StepMark};
/// use workflow_spec::Spec;
///
/// let spec = Spec { name: "Empty".into(), ..Spec::default() };
/// assert!(svg_with_states(&spec, &[StepMark::Done]).ends_with("</svg>\n"));
/// ```
pub fn svg_with_states(spec: &Spec, marks: &[StepMark]) -> String {
    let plain = svg(spec);
    let mut style = String::from("  <style>\n");
    for mark in StepMark::ALL {
        let (fill, stroke, color) = mark.colours();
        let class = mark.as_str();
        let dash = mark
            .dash()
            .map_or(String::new(), |d| format!(" stroke-dasharray: {d};"));
        let _ = writeln!(
            style,
            "    .state-{class} > rect, .state-{class} > polygon {{ fill: {fill}; stroke: {stroke};{dash} }}"
        );
        let _ = writeln!(style, "    .state-{class} > line {{ stroke: {stroke}; }}");
        let _ = writeln!(style, "    .state-{class} > text {{ fill: {color}; }}");
    }
    style.push_str("  </style>\n");

    let mut out = String::with_capacity(plain.len() + style.len() + 64 * marks.len());
    let mut step = 0;
    for line in plain.split_inclusive('\n') {
        if line.starts_with("    <g class=\"step\"") {
            match (marks.get(step), spec.steps.get(step)) {
                (Some(mark), Some(spec_step)) => {
                    let class = format!("class=\"step state-{}\"", mark.as_str());
                    out.push_str(&line.replacen("class=\"step\"", &class, 1));
                    let _ = writeln!(
                        out,
                        "      <title>{}: {}</title>",
                        escape(&spec_step.id),
                        mark.as_str()
                    );
                }
                _ => out.push_str(line),
            }
            step += 1;
            continue;
        }
        out.push_str(line);
        if line == "  </defs>\n" {
            out.push_str(&style);
        }
    }
    out
}

/// Escapes text for XML character data.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in super::text::one_line(text) {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ActionStep, Call, Effect, HumanStep, OnFailure, OnTimeout, Step, StepKind};

    fn step(id: &str, deps: Vec<usize>, human: bool) -> Step {
        Step {
            id: id.to_owned(),
            doc: String::new(),
            output: if human { "Approval" } else { "()" }.to_owned(),
            kind: if human {
                StepKind::Human(HumanStep::new("mods", OnTimeout::Abort))
            } else {
                StepKind::Action(ActionStep {
                    call: Call {
                        path: format!("do_{id}"),
                        args: vec![],
                    },
                    compensate: None,
                    reconcile: None,
                    effect: Effect::Internal,
                    idempotent: false,
                    spawn: false,
                    for_each: None,
                })
            },
            deps,
            on_failure: OnFailure::Abort,
            timeout: human.then(|| std::time::Duration::from_secs(3600)),
            retry: None,
            condition: None,
            optional: false,
            concurrency: None,
            rate: None,
        }
    }

    fn spec() -> Spec {
        Spec {
            name: "Review".to_owned(),
            journal_name: None,
            doc: String::new(),
            inputs: vec![],
            env: None,
            steps: vec![
                step("prepare", vec![], false),
                step("review", vec![0], true),
                step("publish", vec![1], false),
                // A Mermaid keyword as an id: drawn under a safe node name.
                step("end", vec![2], false),
            ],
            schedule: None,
            search: Vec::new(),
            retention: None,
            concurrency: None,
            priority: None,
            debounce: None,
        }
    }

    #[test]
    fn mermaid_appends_one_class_per_mark_in_use_after_the_plain_diagram() {
        let spec = spec();
        let marks = [
            StepMark::Done,
            StepMark::Waiting,
            StepMark::Pending,
            StepMark::Pending,
        ];
        let drawn = mermaid_with_states(&spec, &marks);
        let plain = mermaid(&spec);
        let extra = drawn
            .strip_prefix(plain.as_str())
            .expect("plain diagram first");
        assert_eq!(
            extra,
            "    classDef pending fill:#ffffff,stroke:#cbd5e0,color:#4a5568\n\
             \x20   class publish,step3 pending\n\
             \x20   classDef done fill:#d3f4dc,stroke:#2f855a,color:#1a202c\n\
             \x20   class prepare done\n\
             \x20   classDef waiting fill:#fbd38d,stroke:#c05621,color:#1a202c\n\
             \x20   class review waiting\n"
        );
        // The state classes come after the diagram's own `human` class, so they win.
        let human = drawn.find("classDef human").expect("human class");
        let waiting = drawn.find("classDef waiting").expect("waiting class");
        assert!(human < waiting);
    }

    #[test]
    fn mermaid_skips_missing_and_extra_marks() {
        let spec = spec();
        assert_eq!(mermaid_with_states(&spec, &[]), mermaid(&spec));
        let drawn = mermaid_with_states(&spec, &[StepMark::Failed]);
        assert!(drawn.ends_with(
            "    classDef failed fill:#fed7d7,stroke:#c53030,color:#1a202c\n    class prepare failed\n"
        ));
        let many = [StepMark::Skipped; 9];
        let drawn = mermaid_with_states(&spec, &many);
        assert!(drawn.ends_with("    class prepare,review,publish,step3 skipped\n"));
        assert!(drawn.contains("stroke-dasharray:3 3"));
    }

    #[test]
    fn every_mark_has_a_distinct_name_and_fill() {
        let mut names: Vec<&str> = StepMark::ALL.iter().map(|m| m.as_str()).collect();
        let mut fills: Vec<&str> = StepMark::ALL.iter().map(|m| m.colours().0).collect();
        names.sort_unstable();
        names.dedup();
        fills.sort_unstable();
        fills.dedup();
        assert_eq!(names.len(), StepMark::ALL.len());
        assert_eq!(fills.len(), StepMark::ALL.len());
    }

    #[test]
    fn svg_classes_each_marked_step_and_styles_the_classes() {
        let spec = spec();
        let marks = [StepMark::Done, StepMark::Waiting, StepMark::Running];
        let drawn = svg_with_states(&spec, &marks);
        assert!(drawn.contains("<g class=\"step state-done\" id=\"step-prepare\">"));
        assert!(drawn.contains("<g class=\"step state-waiting\" id=\"step-review\">"));
        assert!(drawn.contains("<g class=\"step state-running\" id=\"step-publish\">"));
        assert!(drawn.contains("<g class=\"step\" id=\"step-end\">"));
        assert!(drawn.contains("      <title>review: waiting</title>\n"));
        let style = drawn.find("  <style>").expect("style");
        assert!(drawn.find("  </defs>").expect("defs") < style);
        assert!(drawn.contains(".state-waiting > rect, .state-waiting > polygon { fill: #fbd38d;"));
        // Without the additions, the plain drawing is left.
        let plain = svg(&spec);
        let stripped: String = drawn
            .split_inclusive('\n')
            .filter(|line| {
                !line.trim_start().starts_with("<title>review")
                    && !line.trim_start().starts_with("<title>prepare")
                    && !line.trim_start().starts_with("<title>publish")
            })
            .collect::<String>()
            .replace(" state-done", "")
            .replace(" state-waiting", "")
            .replace(" state-running", "");
        let start = stripped.find("  <style>").expect("style");
        let end = stripped.find("  </style>\n").expect("style end") + "  </style>\n".len();
        assert_eq!(format!("{}{}", &stripped[..start], &stripped[end..]), plain);
    }
}

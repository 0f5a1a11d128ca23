//! What the diagrams say, independent of the format: node labels, edges and node names.

use std::collections::HashSet;

use crate::kind::ErrorKind;
use crate::model::{
    format_duration, Effect, OnEventTimeout, OnFailure, OnItemFailure, OnTimeout, Spec, Step,
    StepKind,
};
use crate::retry::{Backoff, Jitter, RetryPolicy};

/// The text of one node: a title line and detail lines, all unescaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeText {
    /// `id: Output`.
    pub(crate) title: String,
    /// One note per line: retry, timeout, effect, undo, assignee, ...
    pub(crate) details: Vec<String>,
}

impl NodeText {
    /// The title followed by the details.
    pub(crate) fn lines(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.title.as_str()).chain(self.details.iter().map(String::as_str))
    }
}

/// The text of `step`'s node. `condition_in_node` puts the condition on the node itself,
/// for a conditional step that has no edge in to carry it.
///
/// The title is `id: Output` with the step's journaled output type (`Vec<T>` for a map).
/// A map notes its items (`for each line in order.lines`) and how many run at once, a
/// child workflow the workflow it runs, an event that it waits and until when.
pub(crate) fn node_text(step: &Step, condition_in_node: bool) -> NodeText {
    let title = format!("{}: {}", step.id, step.output_type());
    let mut details = Vec::new();
    match &step.kind {
        StepKind::Human(human) => {
            details.push(format!("assignee: {}", human.assignee));
            if let Some(timeout) = step.timeout {
                details.push(format!("timeout {}", format_duration(timeout)));
            }
            details.push(match &human.on_timeout {
                OnTimeout::Escalate(group) => format!("on timeout: escalate -> {group}"),
                OnTimeout::Abort => "on timeout: abort".to_owned(),
                OnTimeout::Approve => "on timeout: approve".to_owned(),
                OnTimeout::Reject => "on timeout: reject".to_owned(),
            });
            if let Some(retry) = &step.retry {
                details.extend(retry_lines(retry));
            }
        }
        StepKind::Action(action) => {
            if let Some(for_each) = &action.for_each {
                details.push(format!(
                    "for each {} in {}",
                    for_each.binding, for_each.source
                ));
                let mut line = format!("{} at a time", for_each.concurrency);
                if for_each.on_item_failure == OnItemFailure::Skip {
                    line.push_str(", failed items skipped");
                }
                details.push(line);
            }
            if let Some(retry) = &step.retry {
                details.extend(retry_lines(retry));
            }
            if let Some(timeout) = step.timeout {
                details.push(format!("timeout {} per attempt", format_duration(timeout)));
            }
            if action.effect == Effect::External {
                details.push(if action.idempotent {
                    "effect: external, idempotent".to_owned()
                } else {
                    "effect: external".to_owned()
                });
            }
            if let Some(reconcile) = &action.reconcile {
                details.push(format!("reconcile: {}", reconcile.path));
            }
            if let Some(compensate) = &action.compensate {
                details.push(format!("undo: {}", compensate.path));
            }
        }
        StepKind::Child(child) => {
            details.push(format!("workflow {}", child.workflow));
            if let Some(timeout) = step.timeout {
                details.push(format!("timeout {}", format_duration(timeout)));
            }
        }
        StepKind::Event(event) => {
            details.push(match step.timeout {
                Some(timeout) => format!("waits for an event, {}", format_duration(timeout)),
                None => "waits for an event".to_owned(),
            });
            details.push(match event.on_timeout {
                OnEventTimeout::Abort => "on timeout: abort".to_owned(),
                OnEventTimeout::Continue => "on timeout: continue".to_owned(),
            });
        }
    }
    if step.on_failure == OnFailure::Continue {
        details.push("on failure: continue".to_owned());
    }
    if condition_in_node {
        if let Some(label) = condition_label(step) {
            details.push(label);
        }
    }
    NodeText { title, details }
}

/// `retry 3x exponential 1s..60s, jitter full`, and a second line when `retry_on` is not
/// the default.
fn retry_lines(retry: &RetryPolicy) -> Vec<String> {
    let mut line = format!("retry {}x {}", retry.max_attempts, retry.backoff.as_str());
    match retry.backoff {
        Backoff::Fixed => line.push_str(&format!(" {}", format_duration(retry.initial))),
        Backoff::Linear | Backoff::Exponential => line.push_str(&format!(
            " {}..{}",
            format_duration(retry.initial),
            format_duration(retry.max)
        )),
    }
    if retry.backoff == Backoff::Exponential && (retry.multiplier - 2.0).abs() > f64::EPSILON {
        line.push_str(&format!(" factor {}", retry.multiplier));
    }
    if retry.jitter != Jitter::None {
        line.push_str(&format!(", jitter {}", retry.jitter));
    }
    if let Some(deadline) = retry.deadline {
        line.push_str(&format!(", deadline {}", format_duration(deadline)));
    }
    let mut lines = vec![line];
    if retry.retry_on[..] != ErrorKind::TRANSIENT[..] {
        let kinds: Vec<&str> = retry.retry_on.iter().map(|kind| kind.as_str()).collect();
        lines.push(format!("retry on: {}", kinds.join(", ")));
    }
    lines
}

/// The label of the edges into a conditional step: `if human_review.approved`.
pub(crate) fn condition_label(step: &Step) -> Option<String> {
    step.condition
        .as_ref()
        .map(|condition| format!("if {condition}"))
}

/// Every dependency edge `(dependency, dependent)`, dependents in declaration order and
/// each one's dependencies in their order. Out-of-range indices are skipped and repeated
/// ones kept once; self-loops are kept (the caller decides whether it can draw them).
pub(crate) fn edges(spec: &Spec) -> Vec<(usize, usize)> {
    let n = spec.steps.len();
    let mut edges = Vec::new();
    for (to, step) in spec.steps.iter().enumerate() {
        let start = edges.len();
        for &from in &step.deps {
            if from < n && !edges[start..].contains(&(from, to)) {
                edges.push((from, to));
            }
        }
    }
    edges
}

/// For each of `n` nodes, whether some edge ends in it.
pub(crate) fn has_edge_in(n: usize, edges: &[(usize, usize)]) -> Vec<bool> {
    let mut has = vec![false; n];
    for &(_, to) in edges {
        if let Some(slot) = has.get_mut(to) {
            *slot = true;
        }
    }
    has
}

/// Words a Mermaid node id must not be (compared case-insensitively).
const RESERVED: &[&str] = &[
    "end",
    "graph",
    "flowchart",
    "subgraph",
    "style",
    "classdef",
    "class",
    "click",
    "linkstyle",
    "direction",
    "default",
    "call",
    "href",
    "interpolate",
    "node",
    "edge",
    "digraph",
    "strict",
];

/// A safe, unique node name per step: the step id when it is a plain identifier that is
/// not a keyword of Mermaid or DOT and not taken yet, else `step{index}` (with `_` added
/// until unique).
pub(crate) fn node_names(spec: &Spec) -> Vec<String> {
    let mut taken = HashSet::new();
    let mut names = Vec::with_capacity(spec.steps.len());
    for (index, step) in spec.steps.iter().enumerate() {
        let id = step.id.as_str();
        let plain = id
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !RESERVED.iter().any(|word| word.eq_ignore_ascii_case(id));
        let mut name = if plain && !taken.contains(id) {
            id.to_owned()
        } else {
            format!("step{index}")
        };
        while taken.contains(&name) {
            name.push('_');
        }
        taken.insert(name.clone());
        names.push(name);
    }
    names
}

/// Replaces line breaks and other control characters by spaces: every format here draws
/// one piece of text on one line.
pub(crate) fn one_line(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars().map(|c| if c.is_control() { ' ' } else { c })
}

//! The Grafana dashboard in `ops/grafana/workflow.json` is built from the metrics the
//! engine emits: every metric a panel queries is in `workflow_core::telemetry::METRICS`
//! (a histogram by its name or its exported `_sum`/`_count` series), every label a query
//! selects on is one of that metric's labels, and every metric the engine documents is on
//! the dashboard.

use std::collections::BTreeSet;

use serde_json::Value;
use workflow_core::telemetry::{Metric, MetricKind, METRICS};

const DASHBOARD: &str = include_str!("../../ops/grafana/workflow.json");

/// Labels Prometheus or the exporter add: the scrape target and a summary's quantile.
const ADDED_LABELS: &[&str] = &["instance", "job"];

/// Every `expr` of every panel target, rows' nested panels included.
fn exprs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(expr)) = map.get("expr") {
                out.push(expr.clone());
            }
            for child in map.values() {
                exprs(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| exprs(item, out)),
        _ => {}
    }
}

/// A metric named in a query: its name, and the labels its `{...}` selector names.
#[derive(Debug)]
struct Selector {
    name: String,
    labels: Vec<String>,
}

/// The metric selectors of a PromQL expression: identifiers starting `workflow_`, with the
/// label names of the braces that follow them.
fn selectors(expr: &str) -> Vec<Selector> {
    let bytes = expr.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !ident(bytes[i]) || (i > 0 && ident(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && ident(bytes[i]) {
            i += 1;
        }
        let name = &expr[start..i];
        if !name.starts_with("workflow_") {
            continue;
        }
        let mut labels = Vec::new();
        if bytes.get(i) == Some(&b'{') {
            let end = expr[i..]
                .find('}')
                .map(|n| i + n)
                .expect("a closed selector");
            for matcher in expr[i + 1..end].split(',') {
                let label: String = matcher
                    .trim()
                    .chars()
                    .take_while(|c| *c == '_' || c.is_ascii_alphanumeric())
                    .collect();
                if !label.is_empty() {
                    labels.push(label);
                }
            }
            i = end + 1;
        }
        found.push(Selector {
            name: name.to_owned(),
            labels,
        });
    }
    found
}

/// The documented metric a series name belongs to: itself, or a histogram's `_sum` or
/// `_count` series (the exporter renders histograms as summaries).
fn metric_of(series: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| {
        m.name == series
            || (m.kind == MetricKind::Histogram
                && ["_sum", "_count"]
                    .iter()
                    .any(|suffix| series.strip_suffix(suffix) == Some(m.name)))
    })
}

fn dashboard_selectors() -> Vec<(String, Selector)> {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let mut all = Vec::new();
    exprs(&dashboard["panels"], &mut all);
    assert!(all.len() >= 10, "the dashboard's queries: {all:?}");
    all.iter()
        .flat_map(|expr| selectors(expr).into_iter().map(|s| (expr.clone(), s)))
        .collect()
}

#[test]
fn every_metric_the_dashboard_queries_is_one_the_engine_emits_with_its_labels() {
    let selectors = dashboard_selectors();
    assert!(!selectors.is_empty());
    for (expr, selector) in &selectors {
        let metric = metric_of(&selector.name)
            .unwrap_or_else(|| panic!("`{}` is not in METRICS: {expr}", selector.name));
        for label in &selector.labels {
            let quantile = label == "quantile" && metric.kind == MetricKind::Histogram;
            assert!(
                metric.labels.contains(&label.as_str())
                    || ADDED_LABELS.contains(&label.as_str())
                    || quantile,
                "`{}` has no label `{label}`: {expr}",
                selector.name
            );
        }
    }
}

#[test]
fn every_metric_the_engine_emits_is_on_the_dashboard() {
    let queried: BTreeSet<&'static str> = dashboard_selectors()
        .iter()
        .filter_map(|(_, s)| metric_of(&s.name))
        .map(|m| m.name)
        .collect();
    let missing: Vec<&str> = METRICS
        .iter()
        .map(|m| m.name)
        .filter(|name| !queried.contains(name))
        .collect();
    assert!(missing.is_empty(), "not on the dashboard: {missing:?}");
}

#[test]
fn the_selector_reader_finds_names_and_labels() {
    let found = selectors(
        r#"sum by (workflow) (rate(workflow_action_total{outcome="failure", workflow=~"$workflow"}[5m])) / workflow_runs"#,
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].name, "workflow_action_total");
    assert_eq!(found[0].labels, ["outcome", "workflow"]);
    assert_eq!(found[1].name, "workflow_runs");
    assert!(found[1].labels.is_empty());
    // A name that is not the engine's is caught.
    assert!(metric_of("workflow_runz").is_none());
    assert!(metric_of("workflow_step_duration_seconds_count").is_some());
    assert!(
        metric_of("workflow_runs_count").is_none(),
        "a gauge has no _count"
    );
}

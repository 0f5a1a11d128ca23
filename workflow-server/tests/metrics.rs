//! `GET /metrics`: the engine's metrics in Prometheus' text format, every line parsed,
//! the gauges read from the store, labels bounded, and the route checked like the API.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use common::*;
use workflow_server::metrics;

/// One sample line: `name{label="value",...} value`.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// Parses a Prometheus text exposition, panicking at the first line that is neither a
/// comment, blank, nor a sample.
fn parse(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("no value: {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            other => other
                .parse()
                .unwrap_or_else(|e| panic!("bad value in {line:?}: {e}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let inner = rest
                    .strip_suffix('}')
                    .unwrap_or_else(|| panic!("unclosed labels: {line:?}"));
                let labels = inner
                    .split("\",")
                    .filter(|pair| !pair.is_empty())
                    .map(|pair| {
                        let (key, value) = pair
                            .split_once("=\"")
                            .unwrap_or_else(|| panic!("bad label {pair:?} in {line:?}"));
                        (key.to_owned(), value.trim_end_matches('"').to_owned())
                    })
                    .collect();
                (name, labels)
            }
            None => (series, Vec::new()),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    samples
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|s| s.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_scraped_parsed_and_checked_like_the_api() {
    let handle = metrics::install_recorder().expect("the first recorder of this process");
    let (engine, desk) = engine(false);
    // One run waiting on a person, one failed for good (a dead letter).
    let waiting = engine
        .start::<Triage>(TriageInput {
            ticket: Ticket {
                ticket_id: "T-1".into(),
                text: "locked out".into(),
            },
        })
        .await
        .unwrap();
    wait_for_task(&engine, waiting.id(), "approve_alert").await;
    desk.broken.store(true, Ordering::SeqCst);
    let failing = engine
        .start::<Triage>(TriageInput {
            ticket: Ticket {
                ticket_id: "T-2".into(),
                text: "locked out".into(),
            },
        })
        .await
        .unwrap();
    wait_for_task(&engine, failing.id(), "approve_alert").await;
    failing.approve_alert().approve(LEAD, None).await.unwrap();
    assert!(failing.outputs().await.is_err());

    let addr = serve(server(&engine, standard()).metrics(handle).router()).await;

    // Checked like the API: nobody signed in, someone without a role on every workflow.
    assert_eq!(get(addr, "/metrics", None).await.status, 401);
    let refused = get(addr, "/metrics", Some(VIEWER)).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(refused.code(), "forbidden");

    let answer = get(addr, "/metrics", Some(LEAD)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let samples = parse(&answer.body);

    // The gauges, read from the store.
    let triage = [("workflow", "Triage")];
    assert_eq!(
        value(
            &samples,
            "workflow_runs",
            &[("workflow", "Triage"), ("status", "running")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &samples,
            "workflow_runs",
            &[("workflow", "Triage"), ("status", "failed")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &samples,
            "workflow_runs",
            &[("workflow", "Shipment"), ("status", "completed")]
        ),
        Some(0.0),
        "every registered workflow has every status"
    );
    assert_eq!(value(&samples, "workflow_open_tasks", &triage), Some(1.0));
    assert!(value(&samples, "workflow_oldest_open_task_age_seconds", &triage).is_some());
    assert_eq!(value(&samples, "workflow_dead_letters", &triage), Some(1.0));
    assert_eq!(value(&samples, "workflow_damaged_runs", &[]), Some(0.0));
    // What happened: attempts by outcome, commit latency.
    assert!(
        value(
            &samples,
            "workflow_action_total",
            &[
                ("step", "send_alert"),
                ("outcome", "failure"),
                ("error_type", "internal")
            ]
        )
        .is_some_and(|n| n >= 1.0),
        "{}",
        answer.body
    );
    assert!(
        samples
            .iter()
            .any(|s| s.name.starts_with("workflow_store_commit_seconds")),
        "{}",
        answer.body
    );
    assert!(answer.body.contains("# HELP workflow_runs "), "described");

    // Labels are bounded: never a run id, a key or a payload.
    let allowed: BTreeSet<&str> = [
        "workflow",
        "step",
        "outcome",
        "error_type",
        "status",
        "reason",
        "quantile",
        "le",
    ]
    .into();
    for sample in samples.iter().filter(|s| s.name.starts_with("workflow_")) {
        for (key, value) in &sample.labels {
            assert!(
                allowed.contains(key.as_str()),
                "label {key} on {}",
                sample.name
            );
            assert!(!value.starts_with("run-"), "{}: {key}={value}", sample.name);
            assert!(
                !value.contains("T-1") && !value.contains("locked"),
                "{value}"
            );
        }
    }
    // Every gauge the engine documents is there (those by limit once a step of a
    // registered workflow has a limit: none here).
    for metric in workflow_core::telemetry::METRICS
        .iter()
        .filter(|m| m.kind == workflow_core::telemetry::MetricKind::Gauge)
        .filter(|m| !m.labels.contains(&"limit"))
    {
        assert!(
            samples.iter().any(|s| s.name == metric.name),
            "{} missing",
            metric.name
        );
    }
}

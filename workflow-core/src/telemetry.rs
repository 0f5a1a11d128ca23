//! The metrics the engine emits, by name: what an on-call person looks at first. Every
//! label is bounded (a workflow, a step, a status, an outcome, an error kind or a reason),
//! never a run id, a key or a payload.
//!
//! Counters and histograms are recorded as things happen; the gauges (runs by status,
//! open tasks, dead letters, damaged runs) are read from the store by
//! [`Engine::record_gauges`](crate::Engine::record_gauges), which an exporter calls
//! before each scrape (`workflow-server`'s `/metrics` does).

/// The kind of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only grows.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A distribution of observations.
    Histogram,
}

/// One metric: its name, kind, labels and what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// The name, as exported.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Its labels.
    pub labels: &'static [&'static str],
    /// What it says.
    pub help: &'static str,
}

const fn metric(
    name: &'static str,
    kind: MetricKind,
    labels: &'static [&'static str],
    help: &'static str,
) -> Metric {
    Metric {
        name,
        kind,
        labels,
        help,
    }
}

/// Every metric the engine emits.
pub const METRICS: &[Metric] = &[
    metric(
        "workflow_action_total",
        MetricKind::Counter,
        &["workflow", "step", "outcome", "error_type"],
        "Attempts of step actions, by outcome and bounded error kind.",
    ),
    metric(
        "workflow_step_duration_seconds",
        MetricKind::Histogram,
        &["workflow", "step"],
        "How long an attempt of a step's action took.",
    ),
    metric(
        "workflow_store_commit_seconds",
        MetricKind::Histogram,
        &["workflow"],
        "How long a run's journal commit took to become durable, retries included.",
    ),
    metric(
        "workflow_runs",
        MetricKind::Gauge,
        &["workflow", "status"],
        "Runs in the store, by workflow and status.",
    ),
    metric(
        "workflow_open_tasks",
        MetricKind::Gauge,
        &["workflow"],
        "Open human tasks of running runs.",
    ),
    metric(
        "workflow_oldest_open_task_age_seconds",
        MetricKind::Gauge,
        &["workflow"],
        "How long the oldest open human task has waited.",
    ),
    metric(
        "workflow_dead_letters",
        MetricKind::Gauge,
        &["workflow"],
        "Failed runs waiting for an operator (the dead-letter list).",
    ),
    metric(
        "workflow_damaged_runs",
        MetricKind::Gauge,
        &[],
        "Runs this engine found damaged in the store and does not drive.",
    ),
    metric(
        "workflow_draining",
        MetricKind::Gauge,
        &[],
        "1 once this engine drains (Engine::drain): it takes no more work and hands its runs over.",
    ),
    metric(
        "workflow_runs_handed_over_total",
        MetricKind::Counter,
        &[],
        "Runs this engine released to other workers while draining.",
    ),
    metric(
        "workflow_lease_takeovers_total",
        MetricKind::Counter,
        &[],
        "Runs this engine took over after their owner's lease lapsed.",
    ),
    metric(
        "workflow_fenced_writes_total",
        MetricKind::Counter,
        &["workflow"],
        "Writes of this engine the store refused because another owner holds the run.",
    ),
    metric(
        "workflow_self_fenced_total",
        MetricKind::Counter,
        &["workflow"],
        "Runs whose user code this engine stopped because their lease was not renewed in time.",
    ),
    metric(
        "workflow_runs_parked_total",
        MetricKind::Counter,
        &["workflow", "reason"],
        "Runs parked for a person: the store refused a write for good (store_rejected).",
    ),
    metric(
        "workflow_schedule_lag_seconds",
        MetricKind::Histogram,
        &["schedule"],
        "How late a scheduled run started: its fire time minus its scheduled time.",
    ),
    metric(
        "workflow_schedule_missed_total",
        MetricKind::Counter,
        &["schedule"],
        "Ticks missed while no engine ran that were not run (past the catch-up or the window).",
    ),
    metric(
        "workflow_limit_wait_seconds",
        MetricKind::Histogram,
        &["limit"],
        "How long a gated run waited for admission, or an attempt for its slot and rate token, by limit name (never a key's value).",
    ),
    metric(
        "workflow_limit_slots_in_use",
        MetricKind::Gauge,
        &["limit"],
        "Step slots this engine holds now, by limit name (never a key's value); sum over workers.",
    ),
];

/// Registers the description of every metric with the installed recorder, so exporters
/// show them (`# HELP` lines).
pub fn describe() {
    for metric in METRICS {
        match metric.kind {
            MetricKind::Counter => metrics::describe_counter!(metric.name, metric.help),
            MetricKind::Gauge => metrics::describe_gauge!(metric.name, metric.help),
            MetricKind::Histogram => metrics::describe_histogram!(metric.name, metric.help),
        }
    }
}

//! The command line, declared with clap's derive API: every command, its arguments and
//! its `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use workflow_core::store::RunStatus;
use workflow_core::RunId;

/// Draw workflows, inspect runs, decide human tasks and retry dead letters.
///
/// `diagram`, `lint`, `schema` and `export` read files and need no store (`diagram`
/// without a file draws a workflow the store holds). Every other command works on the
/// store a running engine writes (`--store`, default `workflow.db`): a SQLite file, never
/// created here, or a PostgreSQL database (`postgres://user@host:5432/db?schema=workflow`).
/// Decisions and retries are appended to the store's journals: a running engine picks them
/// up, a stopped one when it resumes.
#[derive(Debug, Parser)]
#[command(name = "workflow", version, propagate_version = true)]
pub struct Cli {
    /// The store of runs, as the engine opened it: the path of a SQLite file, or a
    /// PostgreSQL URL (`postgres://user:password@host:5432/database`, optionally
    /// `?schema=name`; default schema `workflow`).
    #[arg(
        long,
        global = true,
        env = "WORKFLOW_STORE",
        default_value = "workflow.db",
        value_name = "PATH|URL"
    )]
    pub store: PathBuf,

    /// Print machine-readable JSON on stdout (errors stay one line on stderr, as JSON).
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Draw a workflow from a Rust source file, a spec file, or the store.
    ///
    /// A Rust source file: finds every `workflow! { ... }` in it (at item level, inside
    /// modules and inside function bodies), checks it exactly as the macro does, and
    /// renders it with the macro's renderers. A `.yaml` / `.yml` file is a spec file
    /// (`workflow_file!`), checked as that macro checks it. A spec with errors prints each
    /// error as FILE:LINE:COLUMN.
    ///
    /// Without FILE, `--workflow NAME` draws the newest version of NAME that an engine
    /// recorded in the store (`--store`): the spec its runs use, without its code. With a
    /// file the store is not opened.
    Diagram(DiagramArgs),

    /// Check spec files (`.yaml`) without compiling: their YAML, their keys and every
    /// check of the spec language that needs no Rust types. Prints each error with the
    /// file's line; exits with 1 when any file has an error.
    Lint(LintArgs),

    /// Print the JSON Schema of spec files, for editors (see the guide's chapter "Spec
    /// files" for the set-up).
    Schema,

    /// Write a `workflow!` spec of a Rust source file as a spec file (`--yaml`), which
    /// `workflow_file!` compiles back to the same fingerprint.
    Export(ExportArgs),

    /// List runs and show one run: status, timeline of attempts, errors and decisions.
    #[command(subcommand)]
    Runs(RunsCommand),

    /// List open human tasks and decide them.
    #[command(subcommand)]
    Tasks(TasksCommand),

    /// List failed runs (dead letters) and retry them.
    #[command(subcommand)]
    Dead(DeadCommand),

    /// List schedules with their next fire times, pause, resume, trigger, delete and
    /// backfill them.
    ///
    /// A schedule is a row in the store: one declared in a workflow's spec
    /// (`schedule: { ... }`), recorded when an engine registers the workflow, or one
    /// created at run time with `Engine::schedules()`. Triggers and backfills are left in
    /// the row for an engine with the workflow registered, which starts each tick's run
    /// once, under the tick's key.
    #[command(subcommand)]
    Schedules(SchedulesCommand),

    /// Serve the JSON API, the console and the approval inbox over HTTP for the store.
    ///
    /// The console (`/console`) shows runs, each on its diagram with live step states,
    /// dead letters, schedules, flow control and workers, and cancels, retries and
    /// restarts runs behind a confirmation. Runs, open tasks, decisions (left in the run's inbox
    /// for the engine that drives it, which admits the approver with its authorizer),
    /// cancellations, dead letters, and starting runs: `POST /api/runs` queues a run on
    /// the newest version of the workflow a worker recorded in the store, its inputs
    /// checked by name only (a worker that registers the workflow decodes them, and
    /// claims and drives the run). Webhook intake needs the workflows' code to verify and
    /// map a payload, so it is served by a binary of your own that mounts
    /// `workflow_server::Server`.
    ///
    /// People are signed in by a reverse proxy that sets a trusted header (default
    /// `X-Forwarded-User`), or by bearer tokens (`--tokens FILE`, one `TOKEN IDENTITY
    /// [ROLE:WORKFLOW...]` a line). Listen on loopback behind the proxy. Roles (`viewer`,
    /// `operator`, `payloads`, per workflow or `*`) come from the tokens file or `--roles
    /// FILE`; without one, people see only the runs whose tasks they may decide.
    Serve(ServeArgs),

    /// Verify a store: SQLite's integrity check (for a file), then the checksum of every
    /// journal entry, run, spec, dead letter and inbox message, and every journal for gaps.
    /// Prints each damaged row and run; exits with 1 when anything is damaged. Reads only.
    Check,
}

/// The arguments of `workflow serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,

    /// The header a reverse proxy puts the signed-in person's name in.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "X-Forwarded-User",
        conflicts_with = "tokens"
    )]
    pub trusted_header: String,

    /// Sign people in with bearer tokens from this file instead (`TOKEN IDENTITY
    /// [ROLE:WORKFLOW...]` per line, roles `viewer`, `operator`, `payloads`, workflow `*`
    /// for all; `#` comments).
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,

    /// Roles of people signed in by the trusted header: `PRINCIPAL ROLE:WORKFLOW...` per
    /// line, the principal an identity or `group:NAME`.
    #[arg(long, value_name = "FILE")]
    pub roles: Option<PathBuf>,

    /// The header a reverse proxy puts the person's groups in (comma-separated), for
    /// `group:NAME` roles.
    #[arg(long, value_name = "NAME", conflicts_with = "tokens")]
    pub groups_header: Option<String>,

    /// Show runs' inputs and outputs in the inbox and the API (default: redacted).
    #[arg(long)]
    pub show_payloads: bool,

    /// The path a proxy serves this under (`/workflow`), for the inbox's links.
    #[arg(long, value_name = "PATH", default_value = "")]
    pub base_path: String,

    /// Link each run's trace id on the console's run page through this URL, `{trace_id}`
    /// standing for the id (`https://grafana.example.com/explore?traceId={trace_id}`).
    #[arg(long, value_name = "URL")]
    pub trace_url: Option<String>,

    /// Serve the evidence of failed browser steps (screenshots, pages' HTML) on the
    /// console's run pages from this directory, the browser steps' artifacts directory.
    #[arg(long, value_name = "DIR")]
    pub evidence_dir: Option<PathBuf>,

    /// Also serve `GET /metrics` (Prometheus' text format) to callers with a role on
    /// every workflow (`viewer:*` or `operator:*`): runs by status, open tasks, dead
    /// letters and what this process saw.
    #[arg(long)]
    pub metrics: bool,

    /// The origin people reach this at through the proxy (`https://ops.example.com`), when
    /// the proxy rewrites `Host` (nginx's default `proxy_set_header Host $proxy_host`):
    /// state changes from it are not refused as cross-site. May be repeated.
    #[arg(long, value_name = "URL")]
    pub public_origin: Vec<String>,

    /// Honour the trusted header only on connections from this address (the proxy's). May
    /// be repeated. Needed to listen beyond loopback with the trusted header.
    #[arg(long, value_name = "IP", conflicts_with = "tokens")]
    pub trusted_proxy: Vec<std::net::IpAddr>,
}

/// The arguments of `workflow diagram`.
#[derive(Debug, Args)]
pub struct DiagramArgs {
    /// The Rust source file declaring the workflow, or a spec file (`.yaml`); without
    /// one, the workflow `--workflow` names is read from the store.
    #[arg(value_name = "FILE", required_unless_present = "workflow")]
    pub file: Option<PathBuf>,

    /// Which workflow to draw, by name: required when the file declares several, or
    /// without a file (the name runs are journaled under).
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,

    /// The diagram format.
    #[arg(long, value_enum, default_value_t = Format::Mermaid)]
    pub format: Format,

    /// Write the diagram to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// The arguments of `workflow lint`.
#[derive(Debug, Args)]
pub struct LintArgs {
    /// The spec files to check.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
}

/// The arguments of `workflow export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Write a spec file (YAML), the format `workflow_file!` reads.
    #[arg(long)]
    pub yaml: bool,

    /// The Rust source file declaring the workflow.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    /// Which workflow to export, by name; required when the file declares several.
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,

    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// A diagram format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A Mermaid `flowchart TD`, for Markdown and rustdoc.
    Mermaid,
    /// A Graphviz `digraph`, for `dot -Tsvg`.
    Dot,
    /// A self-contained SVG document.
    Svg,
}

impl Format {
    /// The format's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Mermaid => "mermaid",
            Format::Dot => "dot",
            Format::Svg => "svg",
        }
    }
}

/// `workflow runs ...`.
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List runs, newest first.
    List(RunsListArgs),

    /// Show one run: status, steps, the timeline of its journal (times relative to the
    /// start), errors and human decisions.
    Show(RunsShowArgs),

    /// Cancel a run. A parked run is cancelled at once; a running one is asked to stop
    /// through its inbox, and the engine that drives it compensates.
    Cancel(OperatorArgs),

    /// Restart a parked run under the newest registered spec of its workflow: a new run
    /// with the same inputs; the parked run is marked cancelled. An engine with the
    /// workflow registered takes the new run up.
    Restart(OperatorArgs),

    /// Delete finished runs (completed, failed, cancelled) that finished before a time,
    /// with their journals, inboxes, dead letters and search values, in batches (each one
    /// transaction). Running, waiting and parked runs are never purged.
    Purge(PurgeArgs),
}

/// The arguments of `workflow runs purge`.
#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Runs that finished before this: an RFC 3339 time (`2026-01-05T09:00:00Z`), a date
    /// (`2026-01-05`, midnight UTC) or an age (`30d`: finished more than 30 days ago).
    #[arg(long, value_name = "WHEN")]
    pub before: String,

    /// Only runs of this workflow.
    #[arg(long, value_name = "W")]
    pub workflow: Option<String>,

    /// List the runs that would be purged; delete nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// How many runs one batch (one transaction) purges.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub batch: usize,
}

/// The arguments of operator commands on one run.
#[derive(Debug, Args)]
pub struct OperatorArgs {
    /// The run: `run-7` or `7`.
    #[arg(value_name = "RUN", value_parser = parse_run)]
    pub run: RunId,

    /// Who acts, as recorded in the journal (default: $USER, else `cli`).
    #[arg(long = "as", value_name = "WHO")]
    pub who: Option<String>,
}

/// The arguments of `workflow runs list`.
#[derive(Debug, Args)]
pub struct RunsListArgs {
    /// Only runs of this workflow.
    #[arg(long, value_name = "W")]
    pub workflow: Option<String>,

    /// Only runs with this status.
    #[arg(long, value_enum, value_name = "S")]
    pub status: Option<StatusArg>,

    /// At most this many runs (one page).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,

    /// The page after this run: runs older than it (pass the `next` of the previous page).
    #[arg(long, value_name = "RUN", value_parser = parse_run)]
    pub after: Option<RunId>,

    /// Only runs with this search value (`customer_id=c-42`, a name from the spec's
    /// `search: [..]`); repeat it for runs with all of them.
    #[arg(long = "where", value_name = "NAME=VALUE", value_parser = parse_where)]
    pub conditions: Vec<(String, String)>,
}

/// Parses `--where name=value`.
pub fn parse_where(text: &str) -> Result<(String, String), String> {
    workflow_core::search::parse_condition(text, '=')
}

/// A run status, as `--status` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusArg {
    /// Not finished: being driven, waiting on a person or a timer, or interrupted.
    Running,
    /// Every step settled.
    Completed,
    /// Aborted; a dead letter was recorded.
    Failed,
    /// Cancelled by an operator.
    Cancelled,
    /// Not driven: its spec changed since it started, or the store refused one of its
    /// writes for good (the store's reason is in its note).
    Parked,
}

impl From<StatusArg> for RunStatus {
    fn from(status: StatusArg) -> Self {
        match status {
            StatusArg::Running => RunStatus::Running,
            StatusArg::Completed => RunStatus::Completed,
            StatusArg::Failed => RunStatus::Failed,
            StatusArg::Cancelled => RunStatus::Cancelled,
            StatusArg::Parked => RunStatus::Parked,
        }
    }
}

/// The arguments of `workflow runs show`.
#[derive(Debug, Args)]
pub struct RunsShowArgs {
    /// The run: `run-7` or `7`.
    #[arg(value_name = "RUN", value_parser = parse_run)]
    pub run: RunId,

    /// Print the workflow's Mermaid diagram with each step coloured by its state
    /// (done, failed, running, waiting, skipped, pending) instead of the report.
    #[arg(long)]
    pub diagram: bool,
}

/// `workflow tasks ...`.
#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// List the open human tasks of running runs: run, step, assignee, deadline, prompt.
    List,

    /// Approve a task (its decision type must be `Approval`).
    Approve(ApprovalArgs),

    /// Reject a task (its decision type must be `Approval`).
    Reject(ApprovalArgs),

    /// Decide a task with a decision given as JSON (for decision types other than
    /// `Approval`; a `by` field is set to the approver, as the engine does).
    Decide(DecideArgs),
}

/// The arguments of `workflow tasks approve` and `reject`.
#[derive(Debug, Args)]
pub struct ApprovalArgs {
    /// The task: `run-7/human_review` (or `7/human_review`).
    #[arg(value_name = "TASK", value_parser = parse_task)]
    pub task: TaskRef,

    /// Who decides. The engine that drives the run admits the approver with its
    /// authorizer when it takes the decision in (by default the assignee itself, or
    /// `name@assignee`), and journals a refusal otherwise.
    #[arg(long = "as", value_name = "WHO")]
    pub who: String,

    /// Wait up to this many seconds for the engine that drives the run to take the
    /// decision in, and report whether it was admitted (exit code 1 when refused or not
    /// taken in in time).
    #[arg(long, value_name = "SECS")]
    pub wait: Option<u64>,

    /// A comment recorded with the decision.
    #[arg(long, value_name = "TEXT")]
    pub comment: Option<String>,
}

/// The arguments of `workflow tasks decide`.
#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The task: `run-7/human_review` (or `7/human_review`).
    #[arg(value_name = "TASK", value_parser = parse_task)]
    pub task: TaskRef,

    /// Who decides. The engine that drives the run admits the approver with its
    /// authorizer when it takes the decision in (by default the assignee itself, or
    /// `name@assignee`), and journals a refusal otherwise.
    #[arg(long = "as", value_name = "WHO")]
    pub who: String,

    /// Wait up to this many seconds for the engine that drives the run to take the
    /// decision in, and report whether it was admitted (exit code 1 when refused or not
    /// taken in in time).
    #[arg(long, value_name = "SECS")]
    pub wait: Option<u64>,

    /// The decision, as JSON of the step's decision type.
    #[arg(long, value_name = "JSON", value_parser = parse_json)]
    pub decision: serde_json::Value,
}

/// `workflow schedules ...`.
#[derive(Debug, Subcommand)]
pub enum SchedulesCommand {
    /// Every schedule: its cron and zone, next fire times in its zone, last run, lag,
    /// missed and skipped ticks.
    List(ScheduleListArgs),
    /// Pause a schedule: it fires nothing until resumed.
    Pause(ScheduleIdArgs),
    /// Resume a paused schedule from now (ticks that passed while it was paused do not run).
    Resume(ScheduleIdArgs),
    /// Run a tick now, outside the cron (an engine with the workflow starts it).
    Trigger(ScheduleIdArgs),
    /// Delete a schedule; the runs it started are kept.
    Delete(ScheduleIdArgs),
    /// Run the ticks of a past range; `--dry-run` lists them and runs nothing. A tick that
    /// ran already is not run again.
    Backfill(BackfillArgs),
    /// The ticks a schedule missed (too old for its window, or left out by its catch-up
    /// policy), newest first: each record a range of consecutive ticks and its count.
    Missed(MissedArgs),
}

/// The arguments of `workflow schedules missed`.
#[derive(Debug, Args)]
pub struct MissedArgs {
    /// The schedule's id.
    #[arg(value_name = "SCHEDULE")]
    pub id: String,
    /// How many records to show, newest first.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
}

/// The arguments of `workflow schedules list`.
#[derive(Debug, Args)]
pub struct ScheduleListArgs {
    /// How many next fire times to show per schedule.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub next: usize,
}

/// A schedule, by id.
#[derive(Debug, Args)]
pub struct ScheduleIdArgs {
    /// The schedule's id (a declared schedule's id is its workflow's name).
    #[arg(value_name = "SCHEDULE")]
    pub id: String,
}

/// The arguments of `workflow schedules backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// The schedule's id.
    #[arg(value_name = "SCHEDULE")]
    pub id: String,
    /// The first instant of the range (RFC 3339, e.g. `2026-01-05T00:00:00Z`).
    #[arg(long, value_name = "TIME")]
    pub from: String,
    /// The last instant of the range (RFC 3339), included.
    #[arg(long, value_name = "TIME")]
    pub to: String,
    /// List the ticks only; run nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `workflow dead ...`.
#[derive(Debug, Subcommand)]
pub enum DeadCommand {
    /// List the dead letters (failed runs), newest first.
    List,

    /// Retry a failed run from its failed step. Completed outputs are kept; an engine with
    /// its workflow registered takes the run up (at once if one is running on a shared
    /// store, else when it starts: `engine.resume_all()`).
    Retry(RetryArgs),
}

/// The arguments of `workflow dead retry`.
#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The failed run: `run-7` or `7`.
    #[arg(value_name = "RUN", value_parser = parse_run)]
    pub run: RunId,

    /// Who retries, as recorded in the journal (default: $USER, else `cli`).
    #[arg(long = "as", value_name = "WHO")]
    pub who: Option<String>,

    /// Retry even if the run's spec is not among the versions engines registered most
    /// recently (an engine that still registers it must take the run up, or it is parked).
    #[arg(long)]
    pub force: bool,

    /// Retry a run whose interrupted external effect has an unknown outcome even before
    /// its previous owner's lease and the self-fencing margin have passed (that owner
    /// might otherwise still be inside the effect). Only when that owner is known gone.
    #[arg(long)]
    pub insist: bool,
}

/// A human task of a run: `run-7/human_review`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// The run.
    pub run: RunId,
    /// The human step's id.
    pub step: String,
}

impl std::fmt::Display for TaskRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.run, self.step)
    }
}

/// Parses `run-7` or `7`.
pub fn parse_run(text: &str) -> Result<RunId, String> {
    text.trim()
        .parse::<RunId>()
        .map_err(|_| format!("`{text}` is not a run: expected `run-7` or `7`"))
}

/// Parses `run-7/human_review` or `7/human_review`.
pub fn parse_task(text: &str) -> Result<TaskRef, String> {
    let invalid = || format!("`{text}` is not a task: expected `run-7/step` or `7/step`");
    let (run, step) = text.split_once('/').ok_or_else(invalid)?;
    let step = step.trim();
    if step.is_empty() || step.contains('/') {
        return Err(invalid());
    }
    Ok(TaskRef {
        run: parse_run(run).map_err(|_| invalid())?,
        step: step.to_owned(),
    })
}

/// Parses a JSON value.
pub fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|error| format!("not valid JSON: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn runs_and_tasks_parse_with_or_without_the_prefix() {
        assert_eq!(parse_run("run-7"), Ok(RunId(7)));
        assert_eq!(parse_run("7"), Ok(RunId(7)));
        assert!(parse_run("run-x").is_err());
        assert!(parse_run("").is_err());
        let task = parse_task("run-7/human_review").unwrap();
        assert_eq!((task.run, task.step.as_str()), (RunId(7), "human_review"));
        assert_eq!(parse_task("7/review").unwrap().to_string(), "run-7/review");
        assert!(parse_task("7").is_err());
        assert!(parse_task("7/").is_err());
        assert!(parse_task("x/review").is_err());
        assert!(parse_task("7/a/b").is_err());
    }
}

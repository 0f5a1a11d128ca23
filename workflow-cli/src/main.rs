//! `workflow`: the command line of typed workflows.
//!
//! - `workflow diagram FILE.rs`: draws a workflow declared with `workflow!` in a source
//!   file (Mermaid, DOT or SVG), after checking it as the macro does; also a spec file,
//!   or without a file (`--workflow NAME`) the newest version the store holds.
//! - `workflow lint FILE.yaml...`, `workflow schema`, `workflow export --yaml FILE.rs`:
//!   spec files checked without compiling, their JSON Schema, and an inline spec written
//!   as a file.
//! - `workflow runs list | show RUN | cancel RUN | restart RUN`: runs in the engine's
//!   store, one run explained from its journal (steps, timeline, errors, decisions;
//!   `--diagram` colours its state), and the operator's cancel and restart.
//! - `workflow tasks list | approve | reject | decide`: open human tasks; a decision is
//!   checked by the run's machine and left in the run's inbox for the engine that drives
//!   it, which admits the approver with its authorizer.
//! - `workflow dead list | retry RUN`: failed runs, and sending them back to the engine.
//! - `workflow schedules list | pause | resume | trigger | delete | backfill | missed`: schedules
//!   with their next fire times in their zones; triggers and backfills are left in the
//!   schedule's row for an engine to start.
//! - `workflow serve`: the HTTP API and approval inbox of `workflow-server` over the store.
//! - `workflow check`: verifies a store (SQLite's integrity check for a file, and every
//!   row's checksum) and lists what is damaged.
//!
//! Store commands open the SQLite file the engine writes (`--store`, `WORKFLOW_STORE`,
//! default `workflow.db`) and never create it. `--json` prints JSON on stdout for every
//! command. Errors are one line on stderr with exit code 1; usage errors exit with 2.

mod check;
mod cli;
mod dead;
mod diagram;
mod error;
mod files;
mod purge;
mod runs;
mod schedules;
mod serve;
mod store;
mod tasks;
mod text;

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser as _;
use workflow_core::store::Store;

use crate::cli::{Cli, Command, DeadCommand, RunsCommand, SchedulesCommand, TasksCommand};
use crate::error::Result;
use crate::tasks::Verdict;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.json;
    match run(cli) {
        Ok(out) => write_stdout(&out),
        Err(error) => {
            if let Some(report) = &error.report {
                write_stdout(report);
            }
            let text = if json {
                error.to_json()
            } else {
                error.to_text()
            };
            let _ = std::io::stderr().write_all(text.as_bytes());
            ExitCode::FAILURE
        }
    }
}

/// Runs a command; returns what to print on stdout.
fn run(cli: Cli) -> Result<String> {
    let json = cli.json;
    match cli.command {
        Command::Diagram(args) => match &args.file {
            Some(file) => diagram::run(&args, file, json),
            None => {
                let (store, runtime) = open(&cli.store)?;
                runtime.block_on(diagram::stored(&*store, &args, json))
            }
        },
        Command::Lint(args) => files::lint(&args, json),
        Command::Schema => Ok(files::schema()),
        Command::Export(args) => files::export(&args, json),
        Command::Runs(command) => {
            let (store, runtime) = open(&cli.store)?;
            runtime.block_on(async {
                match &command {
                    RunsCommand::List(args) => runs::list(&*store, args, json).await,
                    RunsCommand::Show(args) => runs::show(&*store, args, json).await,
                    RunsCommand::Cancel(args) => runs::cancel(&*store, args, json).await,
                    RunsCommand::Restart(args) => runs::restart(&*store, args, json).await,
                    RunsCommand::Purge(args) => purge::run(&*store, args, json).await,
                }
            })
        }
        Command::Tasks(command) => {
            let (store, runtime) = open(&cli.store)?;
            let approved = matches!(command, TasksCommand::Approve(_));
            let (task, who, verdict, wait) = match command {
                TasksCommand::List => return runtime.block_on(tasks::list(&*store, json)),
                TasksCommand::Approve(args) | TasksCommand::Reject(args) => {
                    let verdict = Verdict::Approval {
                        approved,
                        comment: args.comment,
                    };
                    (args.task, args.who, verdict, args.wait)
                }
                TasksCommand::Decide(args) => {
                    (args.task, args.who, Verdict::Json(args.decision), args.wait)
                }
            };
            runtime.block_on(tasks::decide(&*store, &task, &who, &verdict, wait, json))
        }
        Command::Schedules(command) => {
            let (store, runtime) = open(&cli.store)?;
            runtime.block_on(async {
                match &command {
                    SchedulesCommand::List(args) => schedules::list(&*store, args, json).await,
                    SchedulesCommand::Pause(args) => schedules::pause(&*store, args, json).await,
                    SchedulesCommand::Resume(args) => schedules::resume(&*store, args, json).await,
                    SchedulesCommand::Trigger(args) => {
                        schedules::trigger(&*store, args, json).await
                    }
                    SchedulesCommand::Delete(args) => schedules::delete(&*store, args, json).await,
                    SchedulesCommand::Backfill(args) => {
                        schedules::backfill(&*store, args, json).await
                    }
                    SchedulesCommand::Missed(args) => schedules::missed(&*store, args, json).await,
                }
            })
        }
        Command::Serve(args) => {
            let store = store::open(&cli.store)?;
            let runtime = store::runtime()?;
            runtime.block_on(serve::run(store, &args))
        }
        Command::Check => {
            let runtime = store::runtime()?;
            runtime.block_on(check::run(&cli.store, json))
        }
        Command::Dead(command) => {
            let (store, runtime) = open(&cli.store)?;
            runtime.block_on(async {
                match &command {
                    DeadCommand::List => dead::list(&*store, json).await,
                    DeadCommand::Retry(args) => dead::retry(&*store, args, json).await,
                }
            })
        }
    }
}

/// The store at `path` and a runtime for its async API.
fn open(path: &Path) -> Result<(Box<dyn Store>, tokio::runtime::Runtime)> {
    let store = store::open(path)?;
    let runtime = store::runtime()?;
    Ok((store, runtime))
}

/// Prints a command's output; a closed pipe (`workflow runs list | head`) is not an error.
fn write_stdout(out: &str) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "error: cannot write the output: {error}");
            ExitCode::FAILURE
        }
    }
}

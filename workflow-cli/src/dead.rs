//! `workflow dead`: the runs that failed for good, and retrying them.
//!
//! A retry does what the engine's `retry_dead_letter` does, minus launching the run: the
//! run must be failed; `Retried` is appended to its journal, its dead letter removed and
//! its status set back to running with a note. An engine with the workflow registered
//! resumes it on start (`engine.resume_all()`), from its failed step.

use serde_json::{json, Value};
use workflow_core::journal::Event;
use workflow_core::store::{RunStatus, SqliteStore, Store, StoreError};

use crate::cli::RetryArgs;
use crate::error::{CliError, Result};
use crate::runs::load;
use crate::store::Specs;
use crate::text::{now_ms, relative, rfc3339, short, table, timestamp};

/// How many times a retry is re-checked after losing a race to another writer.
const CONFLICT_RETRIES: usize = 20;

/// Runs `workflow dead list`.
pub async fn list(store: &SqliteStore, json: bool) -> Result<String> {
    let letters = store.dead_letters().await?;
    if json {
        let letters: Vec<Value> = letters
            .iter()
            .map(|letter| {
                json!({
                    "run": letter.run.to_string(),
                    "id": letter.run.0,
                    "workflow": letter.workflow,
                    "step": letter.step,
                    "attempts": letter.attempts,
                    "kind": letter.kind.as_str(),
                    "message": letter.message,
                    "trace_id": letter.trace_id,
                    "at_ms": letter.at,
                    "at": rfc3339(letter.at),
                })
            })
            .collect();
        return Ok(format!("{:#}\n", Value::Array(letters)));
    }
    if letters.is_empty() {
        return Ok("no dead letters\n".to_owned());
    }
    let now = now_ms();
    let rows: Vec<Vec<String>> = letters
        .iter()
        .map(|letter| {
            vec![
                letter.run.to_string(),
                letter.workflow.clone(),
                if letter.step.is_empty() {
                    "-".to_owned()
                } else {
                    letter.step.clone()
                },
                letter.attempts.to_string(),
                format!("{} ({})", timestamp(letter.at), relative(letter.at, now)),
                letter.trace_id.clone(),
                format!("{}: {}", letter.kind, short(&letter.message, 80)),
            ]
        })
        .collect();
    Ok(table(
        &[
            "RUN", "WORKFLOW", "STEP", "ATTEMPTS", "FAILED", "TRACE", "ERROR",
        ],
        &rows,
    ))
}

/// Who an operator is when `--as` is not given.
fn default_operator() -> String {
    std::env::var("USER")
        .ok()
        .filter(|user| !user.trim().is_empty())
        .unwrap_or_else(|| "cli".to_owned())
}

/// Runs `workflow dead retry`.
pub async fn retry(store: &SqliteStore, args: &RetryArgs, json: bool) -> Result<String> {
    let run = args.run;
    let who = args
        .who
        .as_deref()
        .map(str::trim)
        .filter(|who| !who.is_empty())
        .map_or_else(default_operator, str::to_owned);
    for _ in 0..CONFLICT_RETRIES {
        let stored = load(store, run).await?;
        if stored.record.status != RunStatus::Failed {
            return Err(CliError::new(format!(
                "{run} is {}, not failed: only failed runs are retried",
                stored.record.status.as_str()
            )));
        }
        let event = Event::Retried {
            by: who.clone(),
            at: now_ms(),
        };
        let seq = stored.events.len() as u64;
        match store.append(run, seq, &event).await {
            Ok(()) => {}
            Err(StoreError::Conflict { .. }) => continue,
            Err(error) => return Err(error.into()),
        }
        store.remove_dead_letter(run).await?;
        let note = format!("retried by {who}");
        store
            .set_status(run, RunStatus::Running, Some(&note), None)
            .await?;

        let failed_step = stored.record.note.clone();
        let spec_known = Specs::default()
            .get(store, &stored.record.fingerprint)
            .await?
            .is_some();
        return Ok(if json {
            format!(
                "{:#}\n",
                json!({
                    "run": run.to_string(),
                    "workflow": stored.record.workflow,
                    "by": who,
                    "status": RunStatus::Running.as_str(),
                    "previous_note": failed_step,
                    "seq": seq,
                })
            )
        } else {
            let mut out = format!(
                "{run} ({}) marked for retry by {who}.\n",
                stored.record.workflow
            );
            if let Some(note) = failed_step {
                out.push_str(&format!("It had {note}.\n"));
            }
            out.push_str(&format!(
                "It resumes from its failed step when an engine with `{}` registered starts \
                 (`engine.resume_all()`).\n",
                stored.record.workflow
            ));
            if !spec_known {
                out.push_str(
                    "note: the store has no spec for this run; an engine whose spec changed \
                     since parks it instead.\n",
                );
            }
            out
        });
    }
    Err(CliError::new(format!(
        "{run} keeps changing under us; try again"
    )))
}

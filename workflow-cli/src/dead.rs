//! `workflow dead`: the runs that failed for good, and retrying them.
//!
//! A retry is the engine's own: [`workflow_core::admin::retry_dead_letter`] journals
//! `Retried`, removes the dead letter and marks the run running in one transaction. An
//! engine with the workflow registered takes the run up from its failed step.

use serde_json::{json, Value};
use workflow_core::admin;
use workflow_core::store::{RunStatus, Store};
use workflow_core::{ErrorKind, RunError};

use crate::cli::RetryArgs;
use crate::error::{CliError, Result};
use crate::runs::load;
use crate::store::Specs;
use crate::text::{now_ms, relative, rfc3339, short, table, timestamp};

/// Runs `workflow dead list`.
pub async fn list(store: &dyn Store, json: bool) -> Result<String> {
    let letters = store.dead_letters().await?;
    // From when each may be retried: only an interrupted external effect whose outcome is
    // unknown waits (its journal says until when).
    let mut safe = Vec::with_capacity(letters.len());
    for letter in &letters {
        safe.push(if letter.kind == ErrorKind::OutcomeUnknown {
            let events = store.load(letter.run).await?.map(|stored| stored.events);
            events.and_then(|events| admin::retry_safe_after(&events))
        } else {
            None
        });
    }
    if json {
        let letters: Vec<Value> = letters
            .iter()
            .zip(&safe)
            .map(|(letter, safe)| {
                json!({
                    "retry_after_ms": safe,
                    "retry_after": safe.map(rfc3339),
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
        .zip(&safe)
        .map(|(letter, safe)| {
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
                match safe {
                    Some(at) if *at > now => {
                        format!("after {} ({})", timestamp(*at), relative(*at, now))
                    }
                    Some(at) => format!("yes (safe since {})", timestamp(*at)),
                    None => "yes".to_owned(),
                },
                letter.trace_id.clone(),
                format!("{}: {}", letter.kind, short(&letter.message, 80)),
            ]
        })
        .collect();
    Ok(table(
        &[
            "RUN", "WORKFLOW", "STEP", "ATTEMPTS", "FAILED", "RETRY", "TRACE", "ERROR",
        ],
        &rows,
    ))
}

/// Who an operator is when `--as` is not given.
pub fn operator(who: Option<&str>) -> String {
    who.map(str::trim)
        .filter(|who| !who.is_empty())
        .map(str::to_owned)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.trim().is_empty()))
        .unwrap_or_else(|| "cli".to_owned())
}

/// Runs `workflow dead retry`: [`admin::retry_dead_letter`], one transaction, checked
/// against the versions of the workflow engines registered most recently.
pub async fn retry(store: &dyn Store, args: &RetryArgs, json: bool) -> Result<String> {
    let run = args.run;
    let who = operator(args.who.as_deref());
    let stored = load(store, run).await?;
    let record = &stored.record;
    let spec = Specs::default()
        .get(store, &record.fingerprint)
        .await?
        .cloned()
        .ok_or_else(|| {
            CliError::new(format!(
                "cannot retry {run}: the store has no spec recorded for fingerprint {}; \
                 retry it through the engine",
                record.fingerprint
            ))
        })?;
    let mut current = admin::current_fingerprints(store, &record.workflow).await?;
    if args.force {
        current.push(record.fingerprint.clone());
    }
    let current: Vec<&str> = current.iter().map(String::as_str).collect();
    admin::retry_dead_letter(store, run, &who, now_ms(), &spec, &current, args.insist)
        .await
        .map_err(|error| match error {
            RunError::NotFailed(_) => CliError::new(format!(
                "{run} is {}, not failed: only failed runs are retried",
                record.status.as_str()
            )),
            RunError::SpecChanged { current, .. } => CliError::new(format!(
                "{run} was started under spec {} but engines now register `{}` as {current}: \
                 an engine would park it. Restart it under the new spec (`workflow runs \
                 restart`), or pass --force if an engine still registers the old version",
                record.fingerprint, record.workflow
            )),
            RunError::TooSoon { safe_after, .. } => CliError::new(format!(
                "not retried: {run} failed on an interrupted external effect, and its \
                 previous owner could still be inside that effect, or a request it sent \
                 still be decided by the service it called, until {} (its lease ended, \
                 plus the self-fencing margin and twice the clock-skew bound). Retry \
                 after that, or pass --insist if that worker is known to be gone and \
                 the service refuses requests past their `valid_until`",
                rfc3339(safe_after)
            )),
            other => CliError::new(other.to_string()),
        })?;
    let previous = record.note.clone();
    Ok(if json {
        format!(
            "{:#}\n",
            json!({
                "run": run.to_string(),
                "workflow": record.workflow,
                "by": who,
                "status": RunStatus::Running.as_str(),
                "previous_note": previous,
                "seq": stored.events.len(),
            })
        )
    } else {
        let mut out = format!("{run} ({}) marked for retry by {who}.\n", record.workflow);
        if let Some(note) = previous {
            out.push_str(&format!("It had {note}.\n"));
        }
        out.push_str(&format!(
            "An engine with `{}` registered takes it up from its failed step (at once if one \
             runs on this store, else when one starts: `engine.resume_all()`).\n",
            record.workflow
        ));
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use workflow_core::journal::Event;
    use workflow_core::store::{Commit, DeadLetter, DeadLetterChange, MemoryStore, NewRun};

    async fn failed(store: &MemoryStore, kind: ErrorKind, safe_after: Option<u64>) {
        let start = [Event::RunStarted {
            workflow: "Pay".to_owned(),
            fingerprint: "fp".to_owned(),
            input: serde_json::json!({}),
            seed: 1,
            trace_id: "t".to_owned(),
            parent_span: None,
            dry_run: false,
            deadline: None,
            at: 1_000,
        }];
        let run = store
            .create_run(NewRun {
                workflow: "Pay",
                fingerprint: "fp",
                idempotency_key: None,
                events: &start,
                parent: None,
                owner: None,
                supersedes: None,
                at: 1_000,
                search: &[],
            })
            .await
            .unwrap()
            .id();
        let failure = [Event::AttemptFailed {
            step: 0,
            attempt: 1,
            kind,
            message: "interrupted".to_owned(),
            retry_after: None,
            safe_after,
            at: 2_000,
        }];
        let letter = DeadLetter {
            run,
            workflow: "Pay".to_owned(),
            step: "charge".to_owned(),
            attempts: 1,
            kind,
            message: "interrupted".to_owned(),
            trace_id: "t".to_owned(),
            at: 2_000,
        };
        store
            .commit(Commit {
                status: Some((RunStatus::Failed, None)),
                dead_letter: DeadLetterChange::Put(&letter),
                ..Commit::events(run, 1, &failure, 2_000)
            })
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn dead_list_says_from_when_an_interrupted_effect_may_be_retried() {
        let store = MemoryStore::new();
        let later = now_ms() + 3_600_000;
        failed(&store, ErrorKind::OutcomeUnknown, Some(later)).await;
        failed(&store, ErrorKind::Internal, None).await;
        let text = list(&store, false).await.unwrap();
        assert!(text.contains("RETRY"), "{text}");
        assert!(
            text.contains(&format!("after {}", timestamp(later))),
            "{text}"
        );
        assert!(
            text.contains(" yes "),
            "the other may be retried now: {text}"
        );
        let json: Value = serde_json::from_str(&list(&store, true).await.unwrap()).unwrap();
        let letters = json.as_array().unwrap();
        let waits = |kind: &str| {
            letters
                .iter()
                .find(|l| l["kind"] == kind)
                .map(|l| l["retry_after_ms"].clone())
        };
        assert_eq!(waits("outcome_unknown"), Some(Value::from(later)));
        assert_eq!(waits("internal"), Some(Value::Null));
    }
}

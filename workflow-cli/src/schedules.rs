//! `workflow schedules`: the schedule rows of the store, through
//! [`workflow_core::admin::schedules`], the same operations as `Engine::schedules()`.

use serde_json::{json, Value};
use workflow_core::admin::schedules::{self as rows, RowError, ScheduleInfo};
use workflow_core::store::Store;

use crate::cli::{BackfillArgs, MissedArgs, ScheduleIdArgs, ScheduleListArgs};
use crate::error::{CliError, Result};
use crate::text::{duration, now_ms, relative, rfc3339, table, timestamp};

impl From<RowError> for CliError {
    fn from(error: RowError) -> Self {
        CliError::new(error.to_string())
    }
}

fn info_json(info: &ScheduleInfo) -> Value {
    let row = &info.row;
    let state = &row.state;
    json!({
        "id": row.id,
        "workflow": row.workflow,
        "cron": row.schedule.cron,
        "tz": row.schedule.tz,
        "overlap": row.schedule.overlap.as_str(),
        "catchup": row.schedule.catchup.to_string(),
        "paused": row.paused,
        "next": info.next_local,
        "next_ms": info.next,
        "last_run": state.last_run.map(|run| run.to_string()),
        "last_tick": state.last_tick.map(rfc3339),
        "last_lag_ms": state.last_fired.zip(state.last_tick).map(|(f, t)| f.saturating_sub(t)),
        "missed": state.missed,
        "last_missed": state.last_missed.map(rfc3339),
        "skipped": state.skipped,
        "pending": state.pending.len(),
    })
}

/// Runs `workflow schedules list`.
pub async fn list(store: &dyn Store, args: &ScheduleListArgs, json: bool) -> Result<String> {
    let now = now_ms();
    let infos = rows::list(store, now, args.next).await?;
    if json {
        let list: Vec<Value> = infos.iter().map(info_json).collect();
        return Ok(format!("{:#}\n", Value::Array(list)));
    }
    if infos.is_empty() {
        return Ok("no schedules\n".to_owned());
    }
    let lines: Vec<Vec<String>> = infos
        .iter()
        .map(|info| {
            let row = &info.row;
            let state = &row.state;
            let next = if row.paused {
                "paused".to_owned()
            } else {
                let mut next = info.next_local.join(", ");
                if let Some(&first) = info.next.first() {
                    next = format!("{next} ({})", relative(first, now));
                }
                next
            };
            let last = match (state.last_run, state.last_tick, state.last_fired) {
                (Some(run), Some(tick), Some(fired)) => format!(
                    "{run} at {} (lag {})",
                    timestamp(tick),
                    duration(fired.saturating_sub(tick))
                ),
                _ => "-".to_owned(),
            };
            vec![
                row.id.clone(),
                row.workflow.clone(),
                format!("{} {}", row.schedule.cron, row.schedule.tz),
                last,
                state.missed.to_string(),
                state.skipped.to_string(),
                next,
            ]
        })
        .collect();
    Ok(table(
        &[
            "SCHEDULE", "WORKFLOW", "CRON", "LAST RUN", "MISSED", "SKIPPED", "NEXT",
        ],
        &lines,
    ))
}

fn done(json: bool, id: &str, what: &str) -> String {
    if json {
        format!("{:#}\n", json!({ "schedule": id, "done": what }))
    } else {
        format!("schedule {id} {what}\n")
    }
}

/// Runs `workflow schedules pause`.
pub async fn pause(store: &dyn Store, args: &ScheduleIdArgs, json: bool) -> Result<String> {
    rows::pause(store, &args.id).await?;
    Ok(done(json, &args.id, "paused"))
}

/// Runs `workflow schedules resume`.
pub async fn resume(store: &dyn Store, args: &ScheduleIdArgs, json: bool) -> Result<String> {
    rows::resume(store, &args.id, now_ms()).await?;
    Ok(done(json, &args.id, "resumed"))
}

/// Runs `workflow schedules delete`.
pub async fn delete(store: &dyn Store, args: &ScheduleIdArgs, json: bool) -> Result<String> {
    rows::delete(store, &args.id).await?;
    Ok(done(json, &args.id, "deleted"))
}

/// Runs `workflow schedules trigger`.
pub async fn trigger(store: &dyn Store, args: &ScheduleIdArgs, json: bool) -> Result<String> {
    let now = now_ms();
    rows::request_ticks(store, &args.id, &[now]).await?;
    Ok(done(
        json,
        &args.id,
        &format!(
            "triggered: a tick at {} waits for an engine with the workflow",
            timestamp(now)
        ),
    ))
}

fn instant(text: &str, flag: &str) -> Result<u64> {
    let parsed: std::result::Result<jiff::Timestamp, _> = text.parse();
    parsed
        .ok()
        .and_then(|at| u64::try_from(at.as_millisecond()).ok())
        .ok_or_else(|| {
            CliError::new(format!(
                "{flag} `{text}` is not an RFC 3339 time such as 2026-01-05T09:00:00Z"
            ))
        })
}

/// Runs `workflow schedules backfill`.
pub async fn backfill(store: &dyn Store, args: &BackfillArgs, json: bool) -> Result<String> {
    let from = instant(&args.from, "--from")?;
    let to = instant(&args.to, "--to")?;
    if to < from {
        return Err(CliError::new("--to is before --from"));
    }
    let row = rows::get(store, &args.id).await?;
    let ticks = rows::ticks_between(&row, from, to)?;
    if !args.dry_run {
        let times: Vec<u64> = ticks.iter().map(|(at, _)| *at).collect();
        rows::request_ticks(store, &args.id, &times).await?;
    }
    if json {
        let list: Vec<Value> = ticks
            .iter()
            .map(|(at, local)| json!({ "scheduled_ms": at, "scheduled": local }))
            .collect();
        return Ok(format!(
            "{:#}\n",
            json!({ "schedule": args.id, "dry_run": args.dry_run, "ticks": list })
        ));
    }
    let mut out = String::new();
    let verb = if args.dry_run {
        "would run"
    } else {
        "asked to run (an engine with the workflow starts them; a tick that ran already is not run again)"
    };
    out.push_str(&format!("{} ticks {verb}:\n", ticks.len()));
    for (_, local) in &ticks {
        out.push_str(&format!("  {local}\n"));
    }
    Ok(out)
}

/// Runs `workflow schedules missed`.
pub async fn missed(store: &dyn Store, args: &MissedArgs, json: bool) -> Result<String> {
    rows::get(store, &args.id).await?;
    let records = store.missed_ticks(&args.id, args.limit.max(1)).await?;
    if json {
        let list: Vec<Value> = records
            .iter()
            .map(|m| {
                json!({
                    "first": rfc3339(m.first),
                    "first_ms": m.first,
                    "last": rfc3339(m.last),
                    "last_ms": m.last,
                    "count": m.count,
                    "recorded_at": rfc3339(m.recorded_at),
                })
            })
            .collect();
        return Ok(format!(
            "{:#}\n",
            json!({ "schedule": args.id, "missed": list })
        ));
    }
    if records.is_empty() {
        return Ok(format!("schedule {} missed no ticks\n", args.id));
    }
    let lines: Vec<Vec<String>> = records
        .iter()
        .map(|m| {
            vec![
                timestamp(m.first),
                timestamp(m.last),
                m.count.to_string(),
                timestamp(m.recorded_at),
            ]
        })
        .collect();
    Ok(table(&["FIRST", "LAST", "TICKS", "RECORDED"], &lines))
}

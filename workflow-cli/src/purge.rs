//! `workflow runs purge --before WHEN [--workflow W] [--dry-run]`: deletes finished runs in
//! batches, each batch one transaction of the store ([`workflow_core::search::purge_all`]),
//! and says on stderr how far it got after every batch, so an interrupted purge can be
//! seen and run again.

use std::io::Write as _;

use serde_json::json;
use workflow_core::search::purge_all;
use workflow_core::store::{PurgeFilter, Store};

use crate::cli::PurgeArgs;
use crate::error::{CliError, Result};
use crate::text::{now_ms, rfc3339, timestamp};

/// How many run ids a text report lists before it says "and N more".
const LISTED: usize = 20;

/// Runs `workflow runs purge`.
pub async fn run(store: &dyn Store, args: &PurgeArgs, json: bool) -> Result<String> {
    let before = when(&args.before, now_ms())?;
    let filter = PurgeFilter {
        before,
        workflow: args.workflow.clone(),
        limit: args.batch.max(1),
        dry_run: args.dry_run,
        ..PurgeFilter::default()
    };
    let mut total = 0usize;
    let report = purge_all(store, filter, None, |batch| {
        total += batch.len();
        if !args.dry_run && !batch.is_empty() {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "purged {} run(s), {total} so far", batch.len());
            let _ = err.flush();
        }
    })
    .await?;
    let runs: Vec<String> = report.runs.iter().map(ToString::to_string).collect();
    if json {
        let out = json!({
            "dry_run": args.dry_run,
            "before": rfc3339(before),
            "workflow": args.workflow,
            "count": runs.len(),
            "batches": report.batches,
            "runs": runs,
        });
        return Ok(format!("{out:#}\n"));
    }
    let scope = args
        .workflow
        .as_ref()
        .map_or_else(String::new, |w| format!(" of {w}"));
    let what = if args.dry_run {
        "would purge"
    } else {
        "purged"
    };
    let mut out = format!(
        "{what} {} finished run(s){scope} that finished before {}",
        runs.len(),
        timestamp(before)
    );
    if !runs.is_empty() {
        let shown: Vec<&str> = runs.iter().take(LISTED).map(String::as_str).collect();
        out.push_str(&format!(": {}", shown.join(", ")));
        if runs.len() > LISTED {
            out.push_str(&format!(" and {} more", runs.len() - LISTED));
        }
    }
    out.push('\n');
    Ok(out)
}

/// `--before`: an RFC 3339 time, a date (midnight UTC) or an age before `now`.
fn when(text: &str, now: u64) -> Result<u64> {
    let text = text.trim();
    if let Some(age) = age_ms(text) {
        return Ok(now.saturating_sub(age));
    }
    let full = if text.len() == 10 && !text.contains('T') {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    full.parse::<jiff::Timestamp>()
        .ok()
        .and_then(|at| u64::try_from(at.as_millisecond()).ok())
        .ok_or_else(|| {
            CliError::new(format!(
                "--before `{text}` is not a time: write an RFC 3339 time (2026-01-05T09:00:00Z), a date (2026-01-05) or an age (30d, 12h)"
            ))
        })
}

/// `30d`, `12h`, `90m`, `45s`, `500ms` in milliseconds.
fn age_ms(text: &str) -> Option<u64> {
    let digits = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    number.checked_mul(unit_ms)
}

#[cfg(test)]
mod tests {
    use super::when;

    #[test]
    fn before_takes_times_dates_and_ages() {
        let now = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        assert_eq!(when("2026-01-01T00:00:00Z", now).ok(), Some(now));
        assert_eq!(when("2026-01-01", now).ok(), Some(now));
        assert_eq!(when("1d", now).ok(), Some(now - 86_400_000));
        assert_eq!(when("90m", now).ok(), Some(now - 5_400_000));
        assert!(when("yesterday", now).is_err());
        assert!(when("30x", now).is_err());
    }
}

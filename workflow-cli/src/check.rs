//! `workflow check`: verifies a store and lists what is damaged.
//!
//! For a SQLite file, SQLite's own integrity check runs first; then, for any store, every
//! row's checksum is verified (journal entries, runs, specs, dead letters, inbox
//! messages), every journal is checked for gaps, and every run's spec must be found. The
//! store is only read. Damage is
//! reported per row and per run, and the command exits with 1 when it finds any.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::json;
use workflow_core::store::{Damage, RunFilter, Store, Verification};
use workflow_core::RunId;

use crate::error::{CliError, Result};

/// Runs `workflow check`.
pub async fn run(path: &Path, json: bool) -> Result<String> {
    let store = crate::store::open_for_check(path)?;
    let mut verification = store.verify().await?;
    missing_specs(&*store, &mut verification).await;
    index_agrees(&*store, &mut verification).await;
    let shown = crate::store::shown(path);
    let report = if json {
        json_report(&shown, &verification)
    } else {
        text_report(&shown, &verification)
    };
    if verification.is_clean() {
        Ok(report)
    } else {
        let runs = damaged_runs(&verification).len();
        Err(CliError::with_report(
            format!(
                "{shown} is damaged: {} damaged row(s) in {runs} run(s){}",
                verification.damaged.len(),
                if verification.integrity.is_empty() {
                    ""
                } else {
                    ", and SQLite's integrity check failed"
                }
            ),
            report,
        ))
    }
}

/// Every run names the spec it was started under, and engines record a spec before they
/// start a run under it. A spec row that cannot be found is damage the row checksums cannot
/// see (its key itself was damaged, so the lookup misses it): the runs that name it are
/// reported. Runs or specs unreadable for other reasons are already in `verification`.
async fn missing_specs(store: &dyn Store, verification: &mut Verification) {
    let Ok(runs) = store.runs(RunFilter::default()).await else {
        return;
    };
    let mut present: BTreeMap<&str, bool> = BTreeMap::new();
    for run in &runs {
        let fingerprint = run.fingerprint.as_str();
        if !present.contains_key(fingerprint) {
            let found = !matches!(store.spec(fingerprint).await, Ok(None));
            present.insert(fingerprint, found);
        }
        if !present[fingerprint] {
            verification.damaged.push(Damage {
                table: "runs".to_owned(),
                run: Some(run.id),
                key: run.id.to_string(),
                reason: format!("the spec it was started under ({fingerprint}) is missing"),
            });
        }
    }
}

/// The open-task index must hold exactly the tasks the journals of running runs have
/// open: a row it lacks or holds wrongly is reported (a store whose journals cannot be
/// read is reported above, row by row).
async fn index_agrees(store: &dyn Store, verification: &mut Verification) {
    let Ok(mismatch) = workflow_core::store::tasks::check_index(store).await else {
        return;
    };
    let rows = mismatch
        .missing
        .iter()
        .map(|task| {
            (
                task,
                "open by the run's journal, missing from the open-task index",
            )
        })
        .chain(mismatch.stale.iter().map(|task| {
            (
                task,
                "in the open-task index, not open by the run's journal",
            )
        }));
    for (task, reason) in rows {
        verification.damaged.push(Damage {
            table: "open_tasks".to_owned(),
            run: None,
            key: format!("{}/{}", task.run, task.step),
            reason: reason.to_owned(),
        });
    }
}

fn damaged_runs(verification: &Verification) -> BTreeSet<RunId> {
    verification.damaged.iter().filter_map(|d| d.run).collect()
}

fn text_report(shown: &str, verification: &Verification) -> String {
    let mut out = format!("{shown}: {} rows checked\n", verification.rows);
    if verification.is_clean() {
        out.push_str(if crate::store::postgres::is_url(shown) {
            "ok: every checksum matches and no journal has a gap\n"
        } else {
            "ok: SQLite's integrity check passed and every checksum matches\n"
        });
        return out;
    }
    for line in &verification.integrity {
        out.push_str(&format!("integrity: {line}\n"));
    }
    for damage in &verification.damaged {
        out.push_str(&format!(
            "damaged: {} {}: {}\n",
            damage.table, damage.key, damage.reason
        ));
    }
    let runs: Vec<String> = damaged_runs(verification)
        .iter()
        .map(ToString::to_string)
        .collect();
    if !runs.is_empty() {
        out.push_str(&format!(
            "damaged runs (engines do not drive them): {}\n",
            runs.join(", ")
        ));
    }
    out
}

fn json_report(shown: &str, verification: &Verification) -> String {
    let runs: Vec<String> = damaged_runs(verification)
        .iter()
        .map(ToString::to_string)
        .collect();
    let damaged: Vec<serde_json::Value> = verification
        .damaged
        .iter()
        .map(|d| {
            json!({
                "table": d.table,
                "run": d.run.map(|r| r.to_string()),
                "key": d.key,
                "reason": d.reason,
            })
        })
        .collect();
    format!(
        "{:#}\n",
        json!({
            "store": shown,
            "ok": verification.is_clean(),
            "rows": verification.rows,
            "integrity": verification.integrity,
            "damaged": damaged,
            "damaged_runs": runs,
        })
    )
}

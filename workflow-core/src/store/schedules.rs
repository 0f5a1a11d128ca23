//! What every store shares of schedule rows: deciding due rows one by one, for a store
//! without an index of next fire times. The rows themselves are
//! [`crate::schedule`]'s.

use crate::journal::Timestamp;
use crate::schedule::{Decider, DueBatch, DueDecision, DueRow, DueSchedules, ScheduleRow};

/// [`crate::store::Store::decide_schedules`] for a store without an index of next fire
/// times: reads every row and applies each answer with
/// [`crate::store::Store::update_schedule`].
pub(super) async fn decide_one_by_one<S: crate::store::Store + ?Sized>(
    store: &S,
    due: DueSchedules,
    decide: Decider,
) -> Result<DueBatch, crate::store::StoreError> {
    let mut rows = store.schedules().await?;
    rows.retain(|row| due.workflows.contains(&row.workflow));
    let mut taken: Vec<(Timestamp, ScheduleRow)> = Vec::new();
    let mut next: Option<Timestamp> = None;
    for row in rows {
        match crate::schedule::next_fire(&row) {
            Some(at) if at <= due.now => taken.push((at, row)),
            Some(at) => next = Some(next.map_or(at, |n| n.min(at))),
            None => {}
        }
    }
    taken.sort_by_key(|(at, _)| *at);
    let later = taken.split_off(taken.len().min(due.limit));
    for (at, _) in later {
        next = Some(next.map_or(at, |n| n.min(at)));
    }
    let mut out = Vec::with_capacity(taken.len());
    for (_, row) in taken {
        match decide(&row) {
            DueDecision::Change { change, next_fire } => {
                let missed = change.missed.clone();
                let version = row.version;
                let written = store
                    .update_schedule(&row.id, version, change.clone())
                    .await?;
                let mut row = row;
                if written {
                    if let Some(state) = change.state {
                        row.state = state;
                    }
                    if let Some(paused) = change.paused {
                        row.paused = paused;
                    }
                    row.version += 1;
                    if let Some(at) = next_fire.filter(|&at| at > due.now) {
                        next = Some(next.map_or(at, |n| n.min(at)));
                    }
                }
                out.push(DueRow {
                    row,
                    decided: written,
                    missed: missed.filter(|_| written),
                });
            }
            DueDecision::Later(_) => out.push(DueRow {
                row,
                decided: false,
                missed: None,
            }),
        }
    }
    Ok(DueBatch { rows: out, next })
}

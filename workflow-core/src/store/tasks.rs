//! The open-task index: one row per open human task of a running run, so a task list
//! costs its open tasks instead of a replay of every running run.
//!
//! Every store keeps the index in the same atomic write as the journal entries that open
//! and close its tasks. What a write does to the index is decided here, once, from the
//! entries being written ([`changes`]), so the stores cannot disagree: a row is opened by
//! `TaskOpened`, moved by `TaskEscalated` (new assignee and deadline, first opening kept)
//! and by `TaskDelegated` (new assignee),
//! and closed by anything that settles or restarts its step (`TaskDecided`,
//! `TaskExpired`, a step result); all rows of a run go when the run stops running
//! (finished or parked), and come back from the whole journal when it runs again (a
//! retried failed run). The rule the index keeps: the rows of a run are
//! [`open_in`] its journal while it is running, and none otherwise.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{RunFilter, RunStatus, Store, StoreError};
use crate::error::RunId;
use crate::future::BoxFuture;
use crate::journal::{Event, Timestamp};

/// One open human task, as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenTask {
    /// The run.
    pub run: RunId,
    /// The run's workflow.
    pub workflow: String,
    /// The human step's index in the spec.
    pub step: usize,
    /// Who may decide now (after escalations).
    pub assignee: String,
    /// When it times out now (after escalations).
    pub deadline: Timestamp,
    /// When the task was first opened.
    pub opened_at: Timestamp,
    /// Whether it was escalated.
    pub escalated: bool,
    /// The prompt journaled when it opened.
    pub prompt: Option<String>,
}

impl OpenTask {
    /// The task's position in the index's order (soonest deadline first).
    pub fn key(&self) -> TaskKey {
        TaskKey {
            deadline: self.deadline,
            run: self.run,
            step: self.step,
        }
    }
}

/// A position in the index's order: deadline, then run, then step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskKey {
    /// The deadline.
    pub deadline: Timestamp,
    /// The run.
    pub run: RunId,
    /// The step index.
    pub step: usize,
}

/// Which open tasks to list ([`Store::open_tasks`]), soonest deadline first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks of these workflows (all when `None`).
    pub workflows: Option<Vec<String>>,
    /// Only tasks assigned to one of these (all when `None`).
    pub assignees: Option<Vec<String>>,
    /// Only tasks of these runs (all when `None`).
    pub runs: Option<Vec<RunId>>,
    /// Only tasks after this one (for paging: pass the last key of the previous page).
    pub after: Option<TaskKey>,
    /// Skip this many (after `after`).
    pub offset: usize,
    /// At most this many (all when `None`).
    pub limit: Option<usize>,
}

impl TaskFilter {
    /// Whether `task` passes the workflow, assignee and `after` filters.
    pub fn admits(&self, task: &OpenTask) -> bool {
        self.workflows
            .as_ref()
            .is_none_or(|w| w.contains(&task.workflow))
            && self
                .assignees
                .as_ref()
                .is_none_or(|a| a.contains(&task.assignee))
            && self.runs.as_ref().is_none_or(|r| r.contains(&task.run))
            && self.after.is_none_or(|after| task.key() > after)
    }

    /// Filters, orders and pages `tasks`: what a store without an index of its own does.
    pub fn page(&self, tasks: impl IntoIterator<Item = OpenTask>) -> Vec<OpenTask> {
        let mut tasks: Vec<OpenTask> = tasks.into_iter().filter(|t| self.admits(t)).collect();
        tasks.sort_by_key(OpenTask::key);
        tasks
            .into_iter()
            .skip(self.offset)
            .take(self.limit.unwrap_or(usize::MAX))
            .collect()
    }
}

/// How many tasks are open for one assignee of one workflow, and since when the oldest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCount {
    /// The workflow.
    pub workflow: String,
    /// The assignee.
    pub assignee: String,
    /// Open tasks.
    pub count: u64,
    /// When the oldest of them was first opened.
    pub oldest_opened_at: Timestamp,
}

/// Groups tasks by workflow and assignee: what a store without an index of its own does.
pub fn count(tasks: impl IntoIterator<Item = OpenTask>) -> Vec<TaskCount> {
    let mut groups: BTreeMap<(String, String), (u64, Timestamp)> = BTreeMap::new();
    for task in tasks {
        let entry = groups
            .entry((task.workflow, task.assignee))
            .or_insert((0, Timestamp::MAX));
        entry.0 += 1;
        entry.1 = entry.1.min(task.opened_at);
    }
    groups
        .into_iter()
        .map(|((workflow, assignee), (count, oldest))| TaskCount {
            workflow,
            assignee,
            count,
            oldest_opened_at: oldest,
        })
        .collect()
}

/// One change a write makes to the index, for the run it writes to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(hidden)]
pub enum TaskChange {
    /// Insert (or replace) the row of `step`.
    Open {
        /// The step index.
        step: usize,
        /// The assignee.
        assignee: String,
        /// The deadline.
        deadline: Timestamp,
        /// When it opened.
        at: Timestamp,
        /// The prompt.
        prompt: Option<String>,
    },
    /// Move the row of `step` to a new assignee and deadline, marked escalated.
    Escalate {
        /// The step index.
        step: usize,
        /// The new assignee.
        assignee: String,
        /// The new deadline.
        deadline: Timestamp,
    },
    /// Hand the row of `step` to a new assignee, deadline kept (a delegation).
    Delegate {
        /// The step index.
        step: usize,
        /// The delegate.
        assignee: String,
    },
    /// Remove the row of `step`.
    Close {
        /// The step index.
        step: usize,
    },
    /// Remove every row of the run.
    CloseAll,
    /// Replace the run's rows by [`open_in`] its whole journal (this write's entries
    /// included): the run runs again after it stopped.
    Rebuild,
}

/// The index changes of one write to a run: its entries (`events`), the status it sets
/// (if any) and the run's status before it (`Running` for a new run). The one place the
/// stores take their index changes from.
#[doc(hidden)]
pub fn changes(events: &[Event], status: Option<RunStatus>, before: RunStatus) -> Vec<TaskChange> {
    match status {
        Some(status) if status != RunStatus::Running => return vec![TaskChange::CloseAll],
        Some(_) if before != RunStatus::Running => return vec![TaskChange::Rebuild],
        None if before != RunStatus::Running => return Vec::new(),
        _ => {}
    }
    events.iter().filter_map(change).collect()
}

/// Whether [`changes`] of the same commit would open or rebuild rows, not only close them.
pub fn opens(events: &[Event], status: Option<RunStatus>, before: RunStatus) -> bool {
    match status {
        Some(status) if status != RunStatus::Running => false,
        Some(_) if before != RunStatus::Running => true,
        None if before != RunStatus::Running => false,
        _ => events
            .iter()
            .filter_map(change)
            .any(|c| !matches!(c, TaskChange::Close { .. } | TaskChange::CloseAll)),
    }
}

fn change(event: &Event) -> Option<TaskChange> {
    match event {
        Event::TaskOpened {
            step,
            assignee,
            prompt,
            deadline,
            at,
        } => Some(TaskChange::Open {
            step: *step,
            assignee: assignee.clone(),
            deadline: *deadline,
            at: *at,
            prompt: prompt.clone(),
        }),
        Event::TaskEscalated {
            step, to, deadline, ..
        } => Some(TaskChange::Escalate {
            step: *step,
            assignee: to.clone(),
            deadline: *deadline,
        }),
        Event::TaskDelegated { step, to, .. } => Some(TaskChange::Delegate {
            step: *step,
            assignee: to.clone(),
        }),
        Event::TaskDecided { step, .. }
        | Event::TaskExpired { step, .. }
        | Event::StepSucceeded { step, .. }
        | Event::StepFailed { step, .. }
        | Event::StepSkipped { step, .. }
        | Event::AttemptStarted { step, .. } => Some(TaskChange::Close { step: *step }),
        Event::Retried { .. } => Some(TaskChange::Rebuild),
        _ => None,
    }
}

/// A row of the index without its run and workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(hidden)]
pub struct Row {
    /// The step index.
    pub step: usize,
    /// The assignee.
    pub assignee: String,
    /// The deadline.
    pub deadline: Timestamp,
    /// When it first opened.
    pub opened_at: Timestamp,
    /// Whether it was escalated.
    pub escalated: bool,
    /// The prompt.
    pub prompt: Option<String>,
}

impl Row {
    /// The row as an [`OpenTask`] of `run`.
    pub fn task(self, run: RunId, workflow: &str) -> OpenTask {
        OpenTask {
            run,
            workflow: workflow.to_owned(),
            step: self.step,
            assignee: self.assignee,
            deadline: self.deadline,
            opened_at: self.opened_at,
            escalated: self.escalated,
            prompt: self.prompt,
        }
    }
}

/// Applies `changes` to one run's rows (by step); `journal` is the run's whole journal,
/// read only for a [`TaskChange::Rebuild`].
#[doc(hidden)]
pub fn apply(rows: &mut BTreeMap<usize, Row>, changes: &[TaskChange], journal: &[Event]) {
    for change in changes {
        match change {
            TaskChange::Open {
                step,
                assignee,
                deadline,
                at,
                prompt,
            } => {
                rows.insert(
                    *step,
                    Row {
                        step: *step,
                        assignee: assignee.clone(),
                        deadline: *deadline,
                        opened_at: *at,
                        escalated: false,
                        prompt: prompt.clone(),
                    },
                );
            }
            TaskChange::Escalate {
                step,
                assignee,
                deadline,
            } => {
                if let Some(row) = rows.get_mut(step) {
                    row.assignee.clone_from(assignee);
                    row.deadline = *deadline;
                    row.escalated = true;
                }
            }
            TaskChange::Delegate { step, assignee } => {
                if let Some(row) = rows.get_mut(step) {
                    row.assignee.clone_from(assignee);
                }
            }
            TaskChange::Close { step } => {
                rows.remove(step);
            }
            TaskChange::CloseAll => rows.clear(),
            TaskChange::Rebuild => *rows = open_in(journal),
        }
    }
}

/// The open tasks of a running run with this journal, by step.
pub fn open_in(journal: &[Event]) -> BTreeMap<usize, Row> {
    let mut rows = BTreeMap::new();
    for event in journal {
        if let Some(change) = change(event) {
            if change != TaskChange::Rebuild {
                apply(&mut rows, &[change], &[]);
            }
        }
    }
    rows
}

/// Whether any change needs the whole journal.
#[doc(hidden)]
pub fn needs_journal(changes: &[TaskChange]) -> bool {
    changes.contains(&TaskChange::Rebuild)
}

/// The open tasks of every running run, from their journals: what the index holds when it
/// is right, for stores without one and for checks of one.
pub fn from_journals<S: Store + ?Sized>(
    store: &S,
) -> BoxFuture<'_, Result<Vec<OpenTask>, StoreError>> {
    Box::pin(async move {
        let runs = store
            .runs(RunFilter {
                status: Some(RunStatus::Running),
                ..RunFilter::default()
            })
            .await?;
        let mut tasks = Vec::new();
        for record in runs {
            let Some(stored) = store.load(record.id).await? else {
                continue;
            };
            tasks.extend(
                open_in(&stored.events)
                    .into_values()
                    .map(|row| row.task(record.id, &record.workflow)),
            );
        }
        Ok(tasks)
    })
}

/// Where the index and the journals disagree: tasks missing from the index, and rows it
/// holds that no journal has open (or holds differently).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMismatch {
    /// Open by the journals, absent or different in the index.
    pub missing: Vec<OpenTask>,
    /// In the index, not open (or open differently) by the journals.
    pub stale: Vec<OpenTask>,
}

impl IndexMismatch {
    /// Whether the index agrees with the journals.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.stale.is_empty()
    }
}

/// Compares the store's open-task index with its journals (reads every running run).
pub async fn check_index<S: Store + ?Sized>(store: &S) -> Result<IndexMismatch, StoreError> {
    let mut expected = from_journals(store).await?;
    let mut indexed = store.open_tasks(TaskFilter::default()).await?;
    expected.sort_by_key(OpenTask::key);
    indexed.sort_by_key(OpenTask::key);
    Ok(IndexMismatch {
        missing: expected
            .iter()
            .filter(|t| !indexed.contains(t))
            .cloned()
            .collect(),
        stale: indexed
            .iter()
            .filter(|t| !expected.contains(t))
            .cloned()
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(step: usize, at: Timestamp) -> Event {
        Event::TaskOpened {
            step,
            assignee: "finance".into(),
            prompt: None,
            deadline: at + 100,
            at,
        }
    }

    #[test]
    fn a_task_opens_moves_and_closes_with_its_entries() {
        let escalated = Event::TaskEscalated {
            step: 1,
            to: "leads".into(),
            deadline: 500,
            at: 120,
        };
        let journal = [opened(1, 10), opened(2, 20), escalated];
        let rows = open_in(&journal);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[&1].assignee, "leads");
        assert_eq!((rows[&1].deadline, rows[&1].opened_at), (500, 10));
        assert!(rows[&1].escalated && !rows[&2].escalated);
        let decided = Event::TaskDecided {
            step: 2,
            by: "ana".into(),
            decision: serde_json::json!(true),
            inbox: None,
            via: None,
            at: 30,
        };
        assert_eq!(
            changes(&[decided], None, RunStatus::Running),
            [TaskChange::Close { step: 2 }]
        );
    }

    #[test]
    fn a_run_that_stops_or_runs_again_drops_or_rebuilds_its_rows() {
        let open = [opened(1, 10)];
        assert_eq!(
            changes(&open, Some(RunStatus::Parked), RunStatus::Running),
            [TaskChange::CloseAll]
        );
        assert_eq!(
            changes(&[], Some(RunStatus::Running), RunStatus::Failed),
            [TaskChange::Rebuild]
        );
        assert!(changes(&open, None, RunStatus::Parked).is_empty());
        let mut rows = BTreeMap::new();
        apply(&mut rows, &[TaskChange::Rebuild], &open);
        assert_eq!(rows.keys().copied().collect::<Vec<_>>(), [1]);
    }
}

//! Task lists (the inbox's pages and `GET /api/tasks`), read from the store's open-task
//! index: the caller's scope (the assignees the engine's authorizer admits it for, the
//! workflows the policy lets it view and decide) comes from the index's counts, and a page
//! loads and replays only the runs of its tasks.

use std::collections::{BTreeSet, HashMap};

use axum::http::StatusCode;
use workflow_core::spec::Spec;
use workflow_core::store::{StoredRun, TaskFilter, TaskKey};
use workflow_core::{admin, RunId, TaskInfo};

use crate::error::ApiError;
use crate::permissions::{Action, Caller};
use crate::App;

/// The open tasks a caller may decide: an index filter, and how many tasks it selects.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// Selects the caller's tasks (`None` when it may decide none).
    filter: Option<TaskFilter>,
    /// How many there are.
    pub(crate) total: u64,
}

/// One page of a caller's tasks, with the runs and specs read to make it.
#[derive(Debug, Clone)]
pub(crate) struct Page {
    /// The tasks, soonest deadline first.
    pub(crate) tasks: Vec<TaskInfo>,
    /// Where the next page starts, when the page was full.
    pub(crate) next: Option<TaskKey>,
    /// The runs of the tasks (read once for the page, in one store read).
    pub(crate) runs: HashMap<RunId, StoredRun>,
    /// Their specs, by fingerprint (each read once).
    pub(crate) specs: HashMap<String, Spec>,
}

/// The tasks `caller` may decide (by the engine's authorizer) of workflows the policy lets
/// it view and decide as an approver, optionally of one workflow only.
pub(crate) async fn scope(
    app: &App,
    caller: &Caller,
    workflow: Option<&str>,
) -> Result<Scope, ApiError> {
    let counts = app.engine.store().task_counts().await?;
    let name = caller.identity().name();
    let mut assignees = BTreeSet::new();
    let mut workflows = BTreeSet::new();
    let mut refused = BTreeSet::new();
    let mut total = 0;
    let mut asked = false;
    for group in &counts {
        if workflow.is_some_and(|w| w != group.workflow)
            || refused.contains(&group.workflow)
            || !app.admitted(&group.assignee, name)
        {
            continue;
        }
        if !workflows.contains(&group.workflow) {
            asked = true;
            let allowed = app
                .allows(caller, Action::View, &group.workflow, true)
                .await?
                && app
                    .allows(caller, Action::Decide, &group.workflow, true)
                    .await?;
            if !allowed {
                refused.insert(group.workflow.clone());
                continue;
            }
            workflows.insert(group.workflow.clone());
        }
        assignees.insert(group.assignee.clone());
        total += group.count;
    }
    if !asked {
        // Nothing to ask about, but a policy that cannot answer is still a 503, never an
        // empty list that reads as "no tasks for you".
        app.allows(caller, Action::View, "*", true).await?;
    }
    let filter = (!workflows.is_empty()).then(|| TaskFilter {
        workflows: Some(workflows.into_iter().collect()),
        assignees: Some(assignees.into_iter().collect()),
        ..TaskFilter::default()
    });
    Ok(Scope { filter, total })
}

/// A page of the scope's tasks (only those of `runs`, when given): after `after`,
/// skipping `offset`, at most `limit`.
pub(crate) async fn page(
    app: &App,
    scope: &Scope,
    runs: Option<Vec<RunId>>,
    after: Option<TaskKey>,
    offset: usize,
    limit: usize,
) -> Result<Page, ApiError> {
    let Some(filter) = &scope.filter else {
        return Ok(Page {
            tasks: Vec::new(),
            next: None,
            runs: HashMap::new(),
            specs: HashMap::new(),
        });
    };
    let filter = TaskFilter {
        runs,
        after,
        offset,
        limit: Some(limit),
        ..filter.clone()
    };
    let page = admin::loaded_task_page(&**app.engine.store(), filter).await?;
    let next = page
        .rows
        .last()
        .filter(|_| page.rows.len() == limit)
        .map(|row| row.key());
    Ok(Page {
        tasks: page.tasks,
        next,
        runs: page.runs,
        specs: page.specs,
    })
}

/// How many of the scope's tasks belong to `runs`: read from the index, loading no run.
pub(crate) async fn count_of(app: &App, scope: &Scope, runs: Vec<RunId>) -> Result<u64, ApiError> {
    let Some(filter) = &scope.filter else {
        return Ok(0);
    };
    let filter = TaskFilter {
        runs: Some(runs),
        ..filter.clone()
    };
    let rows = app.engine.store().open_tasks(filter).await?;
    Ok(rows.len() as u64)
}

/// Whether a caller sees the payloads of each workflow's tasks, asked of the policy once
/// per workflow for a page.
#[derive(Debug, Default)]
pub(crate) struct Payloads(HashMap<String, bool>);

impl Payloads {
    /// Whether `caller` sees payloads of `workflow` (never when the server hides them).
    pub(crate) async fn shown(
        &mut self,
        app: &App,
        caller: &Caller,
        workflow: &str,
    ) -> Result<bool, ApiError> {
        if let Some(&shown) = self.0.get(workflow) {
            return Ok(shown);
        }
        let shown = app.show_payloads
            && app
                .allows(caller, Action::ViewPayloads, workflow, true)
                .await?;
        self.0.insert(workflow.to_owned(), shown);
        Ok(shown)
    }
}

/// A task list's cursor as text: `DEADLINE-RUN-STEP` (`1767225600000-17-2`).
pub(crate) fn cursor_text(key: TaskKey) -> String {
    format!("{}-{}-{}", key.deadline, key.run.0, key.step)
}

/// Parses [`cursor_text`]; 400 `bad_request` otherwise.
pub(crate) fn parse_cursor(text: &str) -> Result<TaskKey, ApiError> {
    let bad = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("`{text}` is not a task cursor (DEADLINE-RUN-STEP, as `next` gives it)"),
        )
    };
    let mut parts = text.splitn(3, '-').map(str::parse::<u64>);
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(deadline)), Some(Ok(run)), Some(Ok(step))) => Ok(TaskKey {
            deadline,
            run: RunId(run),
            step: usize::try_from(step).map_err(|_| bad())?,
        }),
        _ => Err(bad()),
    }
}

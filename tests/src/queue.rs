//! The workflow of the PostgreSQL queued-starts test (`tests/tests/queued_pg.rs`), shared
//! by the test and its processes (`src/bin/queue_node.rs`): one step that takes a while
//! and answers with the name of the worker that ran it.

use std::time::Duration;

use workflow_core::prelude::*;

/// How long the step takes.
pub const WORK: Duration = Duration::from_millis(400);

/// A worker's environment: its name.
#[derive(Debug, Clone)]
pub struct Node {
    /// The worker's name (its engine's owner name).
    pub name: String,
}

/// Works for [`WORK`], then says who did.
pub async fn work(node: &Node, _n: u32) -> Result<String, StepError> {
    tokio::time::sleep(WORK).await;
    Ok(node.name.clone())
}

workflow! {
    /// One job, queued by the intake process and run by a worker.
    pub workflow Job(n: u32) env Node {
        step work -> String { action: work(env, n) }
    }
}

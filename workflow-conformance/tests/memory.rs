//! The suite against the in-memory store (damaged through its test hook).

use workflow_conformance::Subject;

#[tokio::test]
async fn the_memory_store_conforms() {
    workflow_conformance::run(|| async { Subject::memory() }).await;
}

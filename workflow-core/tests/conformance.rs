//! The `Store` conformance suite against the in-memory store (damaged through its test
//! hook).

use workflow_core::store::conformance::{self, Subject};

#[tokio::test]
async fn the_memory_store_conforms() {
    conformance::run(|| async { Subject::memory() }).await;
}

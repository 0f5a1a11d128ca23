//! `PgStore` on a real PostgreSQL server: the `Store` conformance suite (a fresh schema per
//! check, damaged by raw SQL), then what only a database shared by many processes has to
//! show: lease expiry by the server's clock, fencing, `SKIP LOCKED` claims under
//! concurrency, uniqueness under racing starts, `NOTIFY` wake-ups, reconnects, schema
//! versions and migrations, checksums and an unreachable host.
//!
//! The server comes from `WORKFLOW_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). Without one, each test prints a line saying
//! it was skipped; under `CI=true` they fail instead.

#![cfg(feature = "test-util")]

mod pg;

use std::sync::{Arc, Mutex};

use workflow_conformance as conformance;
use workflow_postgres::testing::{self as pg_testing, Schema};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_store_conforms() {
    let Some(url) = pg_testing::server("the_postgres_store_conforms").await else {
        return;
    };
    let schemas = Arc::new(Mutex::new(Vec::new()));
    let made = Arc::clone(&schemas);
    conformance::run(move || {
        let schema = Schema::new(&url, "conformance");
        made.lock().unwrap().push(schema.clone());
        async move { schema.subject().await }
    })
    .await;
    let schemas = schemas.lock().unwrap().clone();
    for schema in schemas {
        schema.drop().await;
    }
}

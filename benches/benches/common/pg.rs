//! What the PostgreSQL benchmarks share (`postgres`, `flow`): the server and a schema of
//! their own on it.

use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::{Connection, Executor};
use workflow_postgres::{PgOptions, PgStore};

/// A schema of its own on the server, dropped with [`Schema::drop`]. (The benches do not
/// use `workflow_postgres::testing`: its feature, `test-util`, changes how
/// `SqliteStore` waits for its writer, which the SQLite benches of this crate measure.)
pub(crate) struct Schema {
    url: String,
    name: String,
}

impl Schema {
    pub(crate) fn new(url: &str, label: &str) -> Schema {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        Schema {
            url: url.to_owned(),
            name: format!(
                "wfb_{label}_{}_{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) async fn store_with(&self, options: PgOptions) -> PgStore {
        let options = PgOptions {
            schema: self.name.clone(),
            ..options
        };
        PgStore::connect_with(&self.url, options)
            .await
            .unwrap_or_else(|e| panic!("cannot open a store: {e}"))
    }

    pub(crate) async fn execute(&self, sql: &str) -> Result<(), sqlx::Error> {
        let mut conn = sqlx::PgConnection::connect(&self.url).await?;
        conn.execute(sql).await?;
        conn.close().await
    }

    pub(crate) async fn drop(&self) {
        let _ = self
            .execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name))
            .await;
    }
}

/// The server: `WORKFLOW_TEST_DATABASE_URL`, or the local default.
pub(crate) async fn server() -> Option<String> {
    let url = std::env::var("WORKFLOW_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    match sqlx::PgConnection::connect(&url).await {
        Ok(conn) => {
            let _ = conn.close().await;
            Some(url)
        }
        Err(error) => {
            eprintln!("no PostgreSQL server at WORKFLOW_TEST_DATABASE_URL: {error}");
            None
        }
    }
}

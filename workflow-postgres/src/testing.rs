//! Tests on a real PostgreSQL server (feature `test-util`): the server's
//! URL, a rule for machines without one, and a fresh schema per test so tests run in
//! parallel on one database.
//!
//! The URL comes from `WORKFLOW_TEST_DATABASE_URL` (default [`DEFAULT_URL`]). Where no
//! server answers, [`server`] prints one line saying the test is skipped and why, and
//! returns `None`; under `CI=true` it panics instead, so CI never passes without the
//! database.
//!
//! ```no_run
//! # async fn demo() {
//! use workflow_postgres::testing as pg_testing;
//!
//! let Some(url) = pg_testing::server("my_test").await else { return };
//! let db = pg_testing::Schema::new(&url, "my_test");
//! let store = db.store().await;
//! // ... use the store ...
//! db.drop().await;
//! # }
//! ```

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Executor};

use super::{schema::quote, PgOptions, PgStore};
use workflow_core::BoxFuture;
use workflow_core::RunId;

/// The server tests use when `WORKFLOW_TEST_DATABASE_URL` is not set.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The test server's URL: `WORKFLOW_TEST_DATABASE_URL`, or [`DEFAULT_URL`].
pub fn url() -> String {
    std::env::var("WORKFLOW_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_owned())
}

/// Whether this runs under CI (`CI=true`), where a missing server fails the tests.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The test server's URL when a server answers there. Otherwise prints one line naming
/// `test` and why it is skipped and returns `None`, or panics under CI.
pub async fn server(test: &str) -> Option<String> {
    let url = url();
    let Ok(options) = PgConnectOptions::from_str(&url) else {
        return skip(test, "WORKFLOW_TEST_DATABASE_URL is not a PostgreSQL URL");
    };
    let shown = format!("{}:{}", options.get_host(), options.get_port());
    match tokio::time::timeout(Duration::from_secs(3), options.connect()).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Some(url)
        }
        Ok(Err(error)) => skip(test, &format!("no PostgreSQL server at {shown}: {error}")),
        Err(_) => skip(test, &format!("no PostgreSQL server answered at {shown}")),
    }
}

fn skip(test: &str, why: &str) -> Option<String> {
    if in_ci() {
        panic!("{test}: {why} (CI=true: the PostgreSQL tests must run; set WORKFLOW_TEST_DATABASE_URL)");
    }
    eprintln!("skipped {test}: {why} (set WORKFLOW_TEST_DATABASE_URL to run it)");
    None
}

/// A schema of its own on the test server, dropped with [`Schema::drop`].
#[derive(Debug, Clone)]
pub struct Schema {
    url: String,
    name: String,
}

impl Schema {
    /// A new schema name, unique to this process and call: `wft_<label>_<pid>_<n>`.
    pub fn new(url: &str, label: &str) -> Schema {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let label: String = label
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(20)
            .collect();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Schema {
            url: url.to_owned(),
            name: format!(
                "wft_{label}_{}_{}_{nanos:x}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's URL with `?schema=` naming this schema: what `PgStore::connect`, the
    /// CLI's `--store` and worker processes take.
    pub fn url(&self) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{separator}schema={}", self.url, self.name)
    }

    /// Options for a store in this schema, with a small pool.
    pub fn options(&self) -> PgOptions {
        PgOptions {
            schema: self.name.clone(),
            max_connections: 4,
            ..PgOptions::default()
        }
    }

    /// A store in this schema (created and migrated on first use). Panics when it cannot
    /// connect: the server answered [`server`] a moment ago.
    pub async fn store(&self) -> PgStore {
        self.store_with(self.options()).await
    }

    /// A store in this schema with `options` (their schema is replaced by this one).
    pub async fn store_with(&self, options: PgOptions) -> PgStore {
        let options = PgOptions {
            schema: self.name.clone(),
            ..options
        };
        match PgStore::connect_with(&self.url, options).await {
            Ok(store) => store,
            Err(error) => panic!("cannot open a store in schema {}: {error}", self.name),
        }
    }

    /// Runs SQL in this schema (tests that look at or damage what the store wrote).
    /// (Boxed here, where its future's types are known, so callers' futures stay `Send`.)
    pub fn execute<'a>(&'a self, sql: &'a str) -> BoxFuture<'a, Result<(), sqlx::Error>> {
        Box::pin(async move {
            let options = PgConnectOptions::from_str(&self.url)?
                .options([("search_path", self.name.as_str())])
                .disable_statement_logging();
            let mut conn = options.connect().await?;
            conn.execute(sql).await?;
            conn.close().await
        })
    }

    /// Creates this schema as version `version` of this library left it (its first
    /// `version` migrations, nothing computed after them), for tests of migrations from
    /// older versions. Panics when the schema exists or a migration fails.
    pub async fn create_at_version(&self, version: u32) {
        let quoted = quote(&self.name);
        let mut sql = format!(
            "CREATE SCHEMA {quoted};
             CREATE TABLE {quoted}.workflow_schema (version integer NOT NULL);
             INSERT INTO {quoted}.workflow_schema (version) VALUES ({version});
             SET search_path TO {quoted};"
        );
        for migration in super::schema::MIGRATIONS.iter().take(version as usize) {
            sql.push_str(migration);
        }
        // The stored functions as that version defined them, for the versions whose tests
        // call them (the oldest schema the tests know: version 1).
        if version == 1 {
            sql.push_str(include_str!("../sql/history/v1_functions.sql"));
        }
        if let Err(error) = self.execute(&sql).await {
            panic!("cannot create {} at version {version}: {error}", self.name);
        }
    }

    /// Creates this schema as the version before the open-task index left it, for tests
    /// of the index's migration. Panics as [`Schema::create_at_version`] does.
    pub async fn create_before_open_tasks(&self) {
        let before = super::schema::MIGRATIONS
            .iter()
            .position(|m| *m == super::tasks::MIGRATION)
            .unwrap_or(0);
        self.create_at_version(before as u32).await;
    }

    /// Creates this schema as it was before schedule rows had their next fire time
    /// (tests of that migration).
    pub async fn create_before_next_fire(&self) {
        let before = super::schema::MIGRATIONS
            .iter()
            .position(|m| *m == super::schedules::MIGRATION)
            .unwrap_or(0);
        self.create_at_version(before as u32).await;
    }

    /// Creates this schema as it was before gated runs had their queue order (tests of
    /// that migration).
    pub async fn create_before_queue_order(&self) {
        let before = super::schema::MIGRATIONS
            .iter()
            .position(|m| *m == super::limits::QUEUE_MIGRATION)
            .unwrap_or(0);
        self.create_at_version(before as u32).await;
    }

    /// Damages journal entry `seq` of `run` as a bad disk would: a trailing space after
    /// its JSON (it still decodes to the same event), its checksum left as it was. Panics
    /// when there is no such entry.
    pub async fn damage_entry(&self, run: RunId, seq: u64) {
        let sql = format!(
            "DO $$ BEGIN
                UPDATE journal SET event = event || ' ' WHERE run_id = {} AND seq = {seq};
                IF NOT FOUND THEN RAISE EXCEPTION 'no such entry'; END IF;
             END $$",
            run.0
        );
        if let Err(error) = self.execute(&sql).await {
            panic!(
                "cannot damage entry {seq} of {run} in {}: {error}",
                self.name
            );
        }
    }

    /// A store in this schema as the conformance suite's subject, damaged by a raw
    /// `UPDATE` on a connection of its own (a trailing space after the entry's JSON: it
    /// still decodes to the same event, so only its checksum tells).
    pub async fn subject(&self) -> workflow_conformance::Subject {
        use workflow_conformance::{DamageEntry, Subject};
        let store = std::sync::Arc::new(self.store().await);
        let schema = self.clone();
        let damage: DamageEntry = std::sync::Arc::new(move |run, seq| {
            let schema = schema.clone();
            Box::pin(async move { schema.damage_entry(run, seq).await })
        });
        Subject::new(store, damage)
    }

    /// Drops the schema and everything in it.
    pub async fn drop(&self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", quote(&self.name));
        if let Err(error) = self.execute(&sql).await {
            eprintln!("cannot drop the test schema {}: {error}", self.name);
        }
    }
}

/// The stored functions this library applies, by name, as their files in
/// `sql/functions/` hold them.
pub fn functions() -> &'static [(&'static str, &'static str)] {
    super::functions::FUNCTIONS
}

/// The checksum a stored function is recorded with in `workflow_functions`.
pub fn function_checksum(sql: &str) -> i64 {
    super::functions::checksum(sql)
}

/// The tables' migrations, in order: entry `i` takes a schema from version `i` to `i + 1`.
pub fn migrations() -> &'static [&'static str] {
    super::schema::MIGRATIONS
}

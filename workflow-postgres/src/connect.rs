//! Opening a store: options, the URL (its `?schema=`, its password kept out of messages),
//! the first connection and the schema, the pool and the listener; and retrying through
//! lost connections.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection};
use tokio::sync::watch;

use super::conns::{Conn, Conns};
use super::error::{classify, Class, Target};
use super::hosts::Hosts;
use super::workers::Watchers;
use super::{listen, schema, PgStore, Stats};
use workflow_core::store::StoreError;
use workflow_core::BoxFuture;

/// How [`PgStore::connect_with`] connects.
///
/// ```
/// use std::time::Duration;
/// use workflow_postgres::PgOptions;
///
/// let options = PgOptions {
///     schema: "orders_workflows".into(),
///     max_connections: 16,
///     ..PgOptions::default()
/// };
/// assert_eq!(options.retry_for, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// The PostgreSQL schema the store's tables live in, created when missing (default
    /// `workflow`). Letters, digits and `_` only. A URL's `?schema=` overrides it.
    pub schema: String,
    /// The most connections the store opens (default 8), plus one that listens.
    pub max_connections: u32,
    /// How long opening the store waits for the server to answer (default 5 s).
    pub connect_timeout: Duration,
    /// How long an operation goes on trying through lost connections before it fails with
    /// [`StoreError::Unreachable`] (default 10 s).
    pub retry_for: Duration,
    /// Whether the store listens for other workers' notifications (default: yes). Without
    /// it, engines notice other processes' writes by polling only.
    pub listen: bool,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            schema: "workflow".to_owned(),
            max_connections: 8,
            connect_timeout: Duration::from_secs(5),
            retry_for: Duration::from_secs(10),
            listen: true,
        }
    }
}

/// Opens a store (boxed here, where its future's types are known, so callers' futures
/// stay `Send`) on the servers `urls` name (one URL may name several, as libpq writes it).
pub(super) fn open(
    urls: Vec<String>,
    mut options: PgOptions,
) -> BoxFuture<'static, Result<PgStore, StoreError>> {
    Box::pin(async move {
        let mut each = Vec::new();
        for url in &urls {
            let (url, schema) = split_schema(url)?;
            if let Some(schema) = schema {
                options.schema = schema;
            }
            each.extend(super::hosts::split_hosts(&url)?);
        }
        check_schema_name(&options.schema)?;
        let connects: Vec<PgConnectOptions> = super::hosts::parse_all(&each)?
            .into_iter()
            .map(|connect| {
                connect
                    .application_name(&format!("workflow:{}", options.schema))
                    // No JIT compilation: every statement of the store is short, and a plan
                    // whose cost is over-estimated (a table without statistics) was compiled
                    // for longer than it ran (300 to 560 ms for a page of runs read in 1 ms).
                    .options([("search_path", options.schema.as_str()), ("jit", "off")])
                    .disable_statement_logging()
            })
            .collect();
        let Some(connect) = connects.first().cloned() else {
            return Err(StoreError::Io("no PostgreSQL URL given".to_owned()));
        };
        let hosts = Arc::new(Hosts::new(connects));
        let target = Target::new(&connect).with_hosts(&hosts);

        let mut first = first_connection(&hosts, &target, options.connect_timeout).await?;
        if !hosts.several() {
            hosts
                .measure(&mut first)
                .await
                .map_err(|e| target.error(e))?;
        }
        schema::prepare(&mut first, &options.schema, &target).await?;
        let _ = first.close().await;

        // No ping before or after each use (each would be a round trip of its own): a
        // connection that died while idle fails its statement, which the store retries on a
        // new one, after looking up whether a write was applied.
        let conns = Conns::new(
            Arc::clone(&hosts),
            options.max_connections,
            options.connect_timeout,
        );
        let channel = channel_for(&options.schema);
        let (wake, _) = watch::channel(0);
        let watchers = Arc::new(Watchers::default());
        let listener = options.listen.then(|| {
            let hosts = Arc::clone(&hosts);
            let wait = options.connect_timeout;
            // A pool on the writable server, made again whenever the listener lost its
            // connection (after a failover, on the promoted server, found first).
            let pools = move || {
                let hosts = Arc::clone(&hosts);
                async move {
                    if hosts.several() {
                        if let Ok(conn) = hosts.open(wait).await {
                            let _ = conn.close().await;
                        }
                    }
                    PgPoolOptions::new()
                        .max_connections(1)
                        .acquire_timeout(wait)
                        .connect_lazy_with(hosts.current().clone())
                }
            };
            let watchers = Arc::clone(&watchers);
            tokio::spawn(listen::listen(
                pools,
                channel.clone(),
                wake.clone(),
                watchers,
            ))
            .abort_handle()
        });
        tracing::debug!(target = %target, schema = options.schema.as_str(), "opened the PostgreSQL store");
        // As many commits (alone or in groups) on their way as there are connections: a
        // commit waits for a group only when every connection could be busy, so a commit
        // stuck on a broken connection never holds back the others of its store.
        let leaders = options.max_connections as usize;
        Ok(PgStore {
            conns,
            target,
            schema: options.schema.clone(),
            channel,
            options,
            wake,
            listener,
            watchers,
            nonce_prefix: nonce_prefix(),
            stats: Stats::default(),
            known: super::known::Known::default(),
            group: super::group::Group::new(leaders),
        })
    })
}

/// Retries through lost connections, with growing pauses, for `retry_for`.
pub(super) struct Retry<'s> {
    pub(super) store: &'s PgStore,
    pub(super) started: Instant,
    pub(super) pause: Duration,
}

impl<'s> Retry<'s> {
    /// A connection of the store's, waiting for the server to come back if it is gone.
    pub(super) async fn conn(&mut self) -> Result<Conn<'s>, StoreError> {
        loop {
            match self.store.conns.take().await {
                Ok(conn) => return Ok(conn),
                Err(error) => self.again(error).await?,
            }
        }
    }

    /// After a failure: waits and returns `Ok` when trying again makes sense, or the
    /// failure as a store error.
    pub(super) async fn again(&mut self, error: sqlx::Error) -> Result<(), StoreError> {
        let class = classify(&error);
        if class == Class::Connection {
            self.store.conns.forget_idle();
        }
        if class == Class::Final
            || self.started.elapsed() + self.pause > self.store.options.retry_for
        {
            return Err(self.store.target.error(error));
        }
        tracing::warn!(target = %self.store.target, error = %error, "database connection lost or busy; retrying");
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(Duration::from_secs(1));
        Ok(())
    }
}

async fn first_connection(
    hosts: &Hosts,
    target: &Target,
    timeout: Duration,
) -> Result<PgConnection, StoreError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(50);
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        let left = left.max(Duration::from_millis(1));
        let attempt = tokio::time::timeout(left, hosts.open(left)).await;
        let error = match attempt {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(error)) => error,
            Err(_) => {
                return Err(StoreError::Unreachable {
                    target: target.to_string(),
                    reason: format!("no answer within {} ms", timeout.as_millis()),
                })
            }
        };
        if classify(&error) == Class::Final || started.elapsed() + pause >= timeout {
            return Err(match target.error(error) {
                StoreError::Io(reason) | StoreError::Rejected { reason } => {
                    StoreError::Unreachable {
                        target: target.to_string(),
                        reason,
                    }
                }
                other => other,
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

/// Takes `schema=name` out of the URL's query, where sqlx would not understand it.
fn split_schema(url: &str) -> Result<(String, Option<String>), StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None));
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("schema=") {
            Some(name) => {
                schema = Some(name.to_owned());
                false
            }
            None => !pair.is_empty(),
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    Ok((url, schema))
}

fn check_schema_name(schema: &str) -> Result<(), StoreError> {
    let valid = !schema.is_empty()
        && schema.len() <= 50
        && schema
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && !schema.starts_with("pg_");
    if valid {
        Ok(())
    } else {
        Err(StoreError::Io(format!(
            "`{schema}` is not a usable schema name: use letters, digits and `_` (up to 50, \
             not starting with a digit or `pg_`)"
        )))
    }
}

/// The notification channel of a schema's store.
fn channel_for(schema: &str) -> String {
    format!("workflow_{schema}")
}

/// A URL with its password replaced, for messages.
pub(super) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// A prefix unique to this store among every process sharing the database.
fn nonce_prefix() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}-{:x}-{}",
        std::process::id(),
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_schema_parameter_and_passwords_stay_hidden() {
        assert_eq!(
            split_schema("postgres://u:p@h/db?schema=s1&sslmode=disable").unwrap(),
            (
                "postgres://u:p@h/db?sslmode=disable".to_owned(),
                Some("s1".to_owned())
            )
        );
        assert_eq!(
            split_schema("postgres://h/db").unwrap(),
            ("postgres://h/db".to_owned(), None)
        );
        assert_eq!(
            redact("postgres://ana:s3cret@h:5432/db"),
            "postgres://ana:***@h:5432/db"
        );
        assert!(check_schema_name("workflow_1").is_ok());
        assert!(check_schema_name("bad-name").is_err());
        assert!(check_schema_name("1abc").is_err());
        assert!(check_schema_name("pg_catalog").is_err());
    }
}

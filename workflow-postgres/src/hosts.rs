//! Several servers, one of them writable: a URL that names more than one host (as libpq
//! writes it, `postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`) or a
//! list of URLs. A new connection goes to the server last found writable; when that one
//! does not answer or answers as a standby (`pg_is_in_recovery()`), the others are tried in
//! turn, so after a failover the store finds the promoted server by itself. The store's
//! clock offset (how far the server's clock is ahead of this process's) is measured on the
//! way, at no extra round trip.

use std::str::FromStr;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, Row};

use workflow_core::store::StoreError;

/// The servers a store may connect to, and which one was writable last.
#[derive(Debug)]
pub(super) struct Hosts {
    options: Vec<PgConnectOptions>,
    shown: Vec<String>,
    primary: AtomicUsize,
    /// The server's clock minus this process's, in ms, a lower bound.
    offset: AtomicI64,
}

impl Hosts {
    /// The servers of `options` (at least one).
    pub(super) fn new(options: Vec<PgConnectOptions>) -> Hosts {
        let shown = options
            .iter()
            .map(|o| match o.get_socket() {
                Some(socket) => socket.display().to_string(),
                None => format!("{}:{}", o.get_host(), o.get_port()),
            })
            .collect();
        Hosts {
            options,
            shown,
            primary: AtomicUsize::new(0),
            offset: AtomicI64::new(0),
        }
    }

    /// The options of the server found writable last.
    pub(super) fn current(&self) -> &PgConnectOptions {
        &self.options[self.primary.load(Ordering::Relaxed) % self.options.len()]
    }

    /// Whether there is more than one server to choose from.
    pub(super) fn several(&self) -> bool {
        self.options.len() > 1
    }

    /// Every server, `host:port` joined by commas, for messages.
    pub(super) fn shown(&self) -> String {
        self.shown.join(",")
    }

    /// The store's clock minus this process's wall clock, in ms (a lower bound).
    pub(super) fn offset_ms(&self) -> i64 {
        self.offset.load(Ordering::Relaxed)
    }

    /// A connection to the writable server: the one found last, or else the others in
    /// turn, each given its share of `wait` (a server that does not answer at all leaves
    /// time for the next). With one server, a plain connection (no probe).
    pub(super) async fn open(&self, wait: Duration) -> Result<PgConnection, sqlx::Error> {
        if !self.several() {
            return timed(wait, self.options[0].connect()).await;
        }
        let wait = wait / u32::try_from(self.options.len()).unwrap_or(u32::MAX);
        let start = self.primary.load(Ordering::Relaxed);
        let mut failures = Vec::new();
        for step in 0..self.options.len() {
            let at = (start + step) % self.options.len();
            let mut conn = match timed(wait, self.options[at].connect()).await {
                Ok(conn) => conn,
                Err(error) => {
                    failures.push(format!("{}: {error}", self.shown[at]));
                    continue;
                }
            };
            match self.probe(&mut conn).await {
                Ok(false) => {
                    if at != start {
                        tracing::warn!(
                            server = self.shown[at].as_str(),
                            "found the writable PostgreSQL server"
                        );
                    }
                    self.primary.store(at, Ordering::Relaxed);
                    return Ok(conn);
                }
                Ok(true) => failures.push(format!("{}: a standby (read-only)", self.shown[at])),
                Err(error) => failures.push(format!("{}: {error}", self.shown[at])),
            }
            let _ = conn.close().await;
        }
        Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            format!("no writable server: {}", failures.join("; ")),
        )))
    }

    /// Whether the server of `conn` is in recovery (a standby), measuring the clock offset
    /// on the way.
    async fn probe(&self, conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
        let row = sqlx::query(
            "SELECT pg_is_in_recovery(), (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
        )
        .fetch_one(&mut *conn)
        .await?;
        let after = now_ms();
        let standby: bool = row.try_get(0)?;
        let server: i64 = row.try_get(1)?;
        if !standby {
            // The server read its clock before the answer arrived: a lower bound.
            self.offset.store(server - after, Ordering::Relaxed);
        }
        Ok(standby)
    }

    /// Measures the clock offset on `conn` (one server: done once, when the store opens).
    pub(super) async fn measure(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        self.probe(conn).await.map(|_| ())
    }
}

async fn timed<T>(
    wait: Duration,
    connect: impl std::future::Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    tokio::time::timeout(wait, connect)
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)?
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A URL naming one or more servers (`postgres://user:pw@h1:p1,h2:p2/db?params`), split
/// into one URL per server. `target_session_attrs` is taken out: the store always needs
/// the writable server, so `read-write`, `primary` and `any` are accepted and anything
/// else is refused.
pub(super) fn split_hosts(url: &str) -> Result<Vec<String>, StoreError> {
    let bad = |why: &str| StoreError::Io(format!("not a usable PostgreSQL URL: {why}"));
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut params = Vec::new();
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.strip_prefix("target_session_attrs=") {
            Some("read-write" | "primary" | "any") => {}
            Some(other) => {
                return Err(bad(&format!(
                    "target_session_attrs={other}: the store writes, so it connects to the \
                     writable server (read-write)"
                )))
            }
            None if pair.is_empty() => {}
            None => params.push(pair),
        }
    }
    let scheme_end = base.find("://").ok_or_else(|| bad("no `scheme://`"))? + 3;
    let rest = &base[scheme_end..];
    let (authority, path) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let suffix = if params.is_empty() {
        String::new()
    } else {
        format!("?{}", params.join("&"))
    };
    let urls: Vec<String> = hosts
        .split(',')
        .map(|host| format!("{}{userinfo}{host}{path}{suffix}", &base[..scheme_end]))
        .collect();
    if hosts.split(',').any(str::is_empty) && hosts.contains(',') {
        return Err(bad("an empty host in the list"));
    }
    Ok(urls)
}

/// The connect options of each URL.
pub(super) fn parse_all(urls: &[String]) -> Result<Vec<PgConnectOptions>, StoreError> {
    urls.iter()
        .map(|url| {
            PgConnectOptions::from_str(url).map_err(|_| {
                StoreError::Io(format!(
                    "not a PostgreSQL URL: {}",
                    super::connect::redact(url)
                ))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_host_url_is_one_url_per_host() {
        assert_eq!(
            split_hosts(
                "postgres://ana:pw@h1:5432,h2:5433/app?target_session_attrs=read-write&sslmode=disable"
            )
            .unwrap(),
            vec![
                "postgres://ana:pw@h1:5432/app?sslmode=disable".to_owned(),
                "postgres://ana:pw@h2:5433/app?sslmode=disable".to_owned(),
            ]
        );
        assert_eq!(
            split_hosts("postgres://h/db").unwrap(),
            vec!["postgres://h/db".to_owned()]
        );
        assert_eq!(
            split_hosts("postgresql://u@[::1]:5432,10.0.0.2/db").unwrap(),
            vec![
                "postgresql://u@[::1]:5432/db".to_owned(),
                "postgresql://u@10.0.0.2/db".to_owned(),
            ]
        );
        assert!(split_hosts("postgres://h1,,h2/db").is_err());
        assert!(split_hosts("postgres://h1,h2/db?target_session_attrs=standby").is_err());
        assert!(split_hosts("h1,h2/db").is_err());
        let options = parse_all(&split_hosts("postgres://u@a:1,b:2/db").unwrap()).unwrap();
        let hosts = Hosts::new(options);
        assert!(hosts.several());
        assert_eq!(hosts.shown(), "a:1,b:2");
        assert_eq!(hosts.current().get_host(), "a");
    }
}

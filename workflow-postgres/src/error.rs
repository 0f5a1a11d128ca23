//! Where the database is (as errors may show it: never a password) and what its errors
//! mean for the store: unreachable, worth a retry, or final.

use std::fmt;

use sqlx::postgres::PgConnectOptions;

use workflow_core::store::StoreError;

/// The server and database a store talks to: `host:port/database`, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    shown: String,
}

impl Target {
    pub(super) fn new(options: &PgConnectOptions) -> Target {
        let host = match options.get_socket() {
            Some(socket) => socket.display().to_string(),
            None => options.get_host().to_owned(),
        };
        let database = options.get_database().unwrap_or(options.get_username());
        Target {
            shown: format!("{host}:{}/{database}", options.get_port()),
        }
    }

    /// The target with every server of `hosts` when there are several.
    pub(super) fn with_hosts(mut self, hosts: &super::hosts::Hosts) -> Target {
        if hosts.several() {
            let database = self
                .shown
                .rsplit_once('/')
                .map_or("", |(_, db)| db)
                .to_owned();
            self.shown = format!("{}/{database}", hosts.shown());
        }
        self
    }

    /// The target with the schema the store lives in.
    pub(super) fn shown_with_schema(&self, schema: &str) -> String {
        format!("{} (schema {schema})", self.shown)
    }

    /// A failure of a statement or of a connection, as a store error.
    pub(super) fn error(&self, error: sqlx::Error) -> StoreError {
        match classify(&error) {
            Class::Connection => StoreError::Unreachable {
                target: self.shown.clone(),
                reason: reason(&error),
            },
            Class::Transient => StoreError::Io(format!("{}: {}", self.shown, reason(&error))),
            Class::Final => StoreError::Rejected {
                reason: format!("{}: {}", self.shown, reason(&error)),
            },
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// What an error says about trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// No connection, or the connection broke: the server may be back in a moment.
    Connection,
    /// The server refused the statement for now (a deadlock, a serialization failure,
    /// shutting down, too many connections).
    Transient,
    /// Anything else: retrying would give the same answer.
    Final,
}

pub(super) fn classify(error: &sqlx::Error) -> Class {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => Class::Connection,
        sqlx::Error::Protocol(_) => Class::Connection,
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // connection_exception, admin/crash shutdown, cannot connect now.
            Some(code) if code.starts_with("08") => Class::Connection,
            // read_only_sql_transaction: the server is (now) a standby; the writable one
            // is found again on a new connection.
            Some("25006") => Class::Connection,
            Some("57P01" | "57P02" | "57P03") => Class::Connection,
            // serialization_failure, deadlock_detected, too_many_connections, lock timeout.
            Some("40001" | "40P01" | "53300" | "55P03") => Class::Transient,
            _ => Class::Final,
        },
        _ => Class::Final,
    }
}

/// The error's message without anything that could hold a password (sqlx never puts the
/// URL in its messages; configuration errors are reduced to their kind).
fn reason(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Configuration(_) => "invalid connection settings".to_owned(),
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => format!("{} (SQLSTATE {code})", db.message()),
            None => db.message().to_owned(),
        },
        other => other.to_string(),
    }
}

/// Whether a database error is a unique violation (a constraint the store relies on).
pub(super) fn is_unique_violation(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("23505"))
}

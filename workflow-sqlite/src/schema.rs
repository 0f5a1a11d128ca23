//! The file and its schema: checks before anything is written, versioned migrations,
//! and the classification of database errors.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::{SqliteOptions, SqliteStore};
use workflow_core::store::StoreError;

pub(super) const APPLICATION_ID: i32 = 0x5746_4C57;

/// The schema migrations: entry `i` takes a file from version `i` to version `i + 1`.
pub(super) const MIGRATIONS: &[&str] = &[
    // Version 1: runs, their journals and the dead letters.
    "CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        workflow TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        status TEXT NOT NULL,
        idempotency_key TEXT,
        note TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        owner TEXT
    );
    CREATE UNIQUE INDEX runs_idempotency ON runs (workflow, idempotency_key);
    CREATE INDEX runs_status ON runs (status, workflow);
    CREATE TABLE journal (
        run_id INTEGER NOT NULL REFERENCES runs (id),
        seq INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE dead_letters (
        run_id INTEGER PRIMARY KEY,
        workflow TEXT NOT NULL,
        step TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL,
        trace_id TEXT NOT NULL,
        at INTEGER NOT NULL
    );",
    // Version 2: the specs runs were started under, by fingerprint, for tools.
    "CREATE TABLE specs (
        fingerprint TEXT PRIMARY KEY,
        spec TEXT NOT NULL
    ) WITHOUT ROWID;",
    // Version 3: leases with fencing tokens, per-run inboxes, parent links, and which
    // workflow a spec belongs to and when engines registered it.
    "ALTER TABLE runs ADD COLUMN lease_token INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN inbox_cursor INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN parent INTEGER;
    CREATE INDEX runs_owner ON runs (owner) WHERE owner IS NOT NULL;
    CREATE TABLE inbox (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id INTEGER NOT NULL REFERENCES runs (id),
        key TEXT,
        message TEXT NOT NULL,
        at INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX inbox_key ON inbox (run_id, key);
    CREATE INDEX inbox_run ON inbox (run_id, id);
    ALTER TABLE specs ADD COLUMN workflow TEXT NOT NULL DEFAULT '';
    ALTER TABLE specs ADD COLUMN first_registered INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE specs ADD COLUMN last_registered INTEGER NOT NULL DEFAULT 0;
    UPDATE specs SET workflow = COALESCE(json_extract(spec, '$.name'), '');",
    // Version 4: a checksum with every row (computed for existing rows by `backfill`, in
    // the same transaction).
    "ALTER TABLE runs ADD COLUMN crc INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE journal ADD COLUMN crc INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE specs ADD COLUMN crc INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE dead_letters ADD COLUMN crc INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE inbox ADD COLUMN crc INTEGER NOT NULL DEFAULT 0;",
    // Version 5: schedules, their definition apart from their state.
    "CREATE TABLE schedules (
        id TEXT PRIMARY KEY,
        workflow TEXT NOT NULL,
        definition TEXT NOT NULL,
        paused INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        crc INTEGER NOT NULL
    ) WITHOUT ROWID;",
    // The open-task index, filled from the journals in the same transaction.
    super::tasks::MIGRATION,
    // Schedules' missed ticks: one row per run of consecutive ticks decided missed.
    "CREATE TABLE schedule_missed (
        schedule TEXT NOT NULL,
        first INTEGER NOT NULL,
        last INTEGER NOT NULL,
        count INTEGER NOT NULL,
        recorded_at INTEGER NOT NULL,
        crc INTEGER NOT NULL,
        PRIMARY KEY (schedule, first)
    ) WITHOUT ROWID;",
    // Search values (`search: [..]`) by run, indexed by name and value.
    "CREATE TABLE run_search (
        run_id INTEGER NOT NULL REFERENCES runs (id),
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        PRIMARY KEY (run_id, name)
    ) WITHOUT ROWID;
    CREATE INDEX run_search_value ON run_search (name, value, run_id);",
    // Flow control: gated runs, step slots, rate buckets and waiting steps.
    super::limits::MIGRATION,
    // Schedules' next fire times, indexed, so a pass reads only due rows.
    super::schedules::MIGRATION,
    // Admission by key: each key's waiting runs in admission order, the keys' holders and
    // debounced runs indexed, and queued runs claimed without the gated ones.
    super::limits::QUEUE_MIGRATION,
    // Worker rows, written by heartbeats.
    super::leases::WORKERS_MIGRATION,
    // Runs by status and by workflow, newest first, for the listing.
    super::read::LIST_MIGRATION,
];

/// The schema version whose migration adds the checksums.
const CHECKSUMS: usize = 4;

/// The tables a store of the current schema version has.
const TABLES: [&str; 5] = ["runs", "journal", "dead_letters", "specs", "inbox"];

/// The first 16 bytes of every SQLite database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The length of a SQLite database header.
const HEADER_LEN: usize = 100;

/// Refuses a non-empty file that does not start with a SQLite header, before SQLite
/// touches it.
pub(super) fn check_header(path: &Path, shown: &str) -> Result<(), StoreError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::Io(format!("{shown}: {e}"))),
    };
    let mut header = Vec::with_capacity(HEADER_LEN);
    file.take(HEADER_LEN as u64)
        .read_to_end(&mut header)
        .map_err(|e| StoreError::Io(format!("{shown}: {e}")))?;
    let corrupt = |reason: String| StoreError::CorruptFile {
        path: shown.to_owned(),
        reason,
    };
    if header.is_empty() {
        Ok(())
    } else if !header.starts_with(SQLITE_MAGIC) {
        Err(corrupt(
            "the file does not start with a SQLite header".to_owned(),
        ))
    } else if header.len() < HEADER_LEN {
        Err(corrupt(format!(
            "the file is {} bytes, shorter than a SQLite header",
            header.len()
        )))
    } else {
        Ok(())
    }
}

/// A connection with the file name its errors mention.
pub(super) struct Db {
    pub(super) conn: Connection,
    pub(super) path: String,
}

impl Db {
    pub(super) fn open(
        path: &Path,
        shown: &str,
        flags: OpenFlags,
        busy_timeout: Duration,
    ) -> Result<Db, StoreError> {
        let started = Instant::now();
        let db = Db {
            conn: Connection::open_with_flags(path, flags)
                .map_err(|e| error_for(shown, e, started))?,
            path: shown.to_owned(),
        };
        db.conn
            .busy_timeout(busy_timeout)
            .map_err(|e| db.error(e, started))?;
        Ok(db)
    }

    /// Classifies a database error: lock waits, corruption, anything else.
    pub(super) fn error(&self, error: rusqlite::Error, started: Instant) -> StoreError {
        error_for(&self.path, error, started)
    }

    pub(super) fn corrupt(&self, reason: String) -> StoreError {
        StoreError::CorruptFile {
            path: self.path.clone(),
            reason,
        }
    }

    /// Checks the file with reads only, then switches to WAL and creates or migrates the
    /// schema in one write transaction.
    pub(super) fn prepare(&self, options: &SqliteOptions) -> Result<(), StoreError> {
        let started = Instant::now();
        let (application_id, version, tables) =
            self.inspect().map_err(|e| self.error(e, started))?;
        if options.quick_check {
            self.quick_check(started)?;
        }
        if application_id != APPLICATION_ID
            && (application_id != 0 || version != 0 || !tables.is_empty())
        {
            return Err(self.corrupt(format!(
                "not a workflow store (application id {application_id:#x}, tables: {})",
                if tables.is_empty() {
                    "none".to_owned()
                } else {
                    tables.join(", ")
                }
            )));
        }
        self.check_version(version)?;
        if version == 0 && tables.is_empty() {
            // A new file gives the pages purges free back to the file system
            // (`PRAGMA incremental_vacuum` once a purge reaches its last run). The mode can only be chosen
            // before the first table exists: older files keep theirs (the guide's operating chapter, "Retention").
            self.conn
                .pragma_update(None, "auto_vacuum", "INCREMENTAL")
                .map_err(|e| self.error(e, started))?;
        }

        let mode: String = self
            .conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .map_err(|e| self.error(e, started))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Io(format!(
                "{}: cannot switch to WAL mode (journal mode is {mode})",
                self.path
            )));
        }
        self.conn
            .pragma_update(None, "synchronous", options.synchronous.pragma_value())
            .map_err(|e| self.error(e, started))?;
        self.conn
            .pragma_update(None, "foreign_keys", true)
            .map_err(|e| self.error(e, started))?;
        self.set_max_size(options.max_size)?;

        // Always take the write lock once: another process may have migrated the file
        // since the checks above, and a file held locked is reported now, not at the
        // first write.
        let started = Instant::now();
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| self.error(e, started))?;
        let result = self.migrate(started);
        let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = self
            .conn
            .execute_batch(end)
            .map_err(|e| self.error(e, started));
        if ended.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        result.and(ended)
    }

    /// Caps the file's size (in whole pages; `None` lifts the cap).
    pub(super) fn set_max_size(&self, max_size: Option<u64>) -> Result<(), StoreError> {
        let started = Instant::now();
        let page_size: u64 = self
            .conn
            .pragma_query_value(None, "page_size", |row| row.get(0))
            .map_err(|e| self.error(e, started))?;
        let pages = max_size.map_or(u64::from(u32::MAX - 1), |bytes| {
            (bytes / page_size.max(1)).max(1)
        });
        self.conn
            .pragma_update(None, "max_page_count", pages)
            .map_err(|e| self.error(e, started))
    }

    /// The application id, the schema version and our kind of tables (reads only).
    fn inspect(&self) -> rusqlite::Result<(i32, u32, Vec<String>)> {
        let application_id: i32 = self
            .conn
            .pragma_query_value(None, "application_id", |row| row.get(0))?;
        let version: u32 = self
            .conn
            .pragma_query_value(None, "user_version", |row| row.get(0))?;
        let mut statement = self
            .conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")?;
        let tables = statement
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?;
        Ok((application_id, version, tables))
    }

    fn quick_check(&self, started: Instant) -> Result<(), StoreError> {
        let mut statement = self
            .conn
            .prepare("PRAGMA quick_check")
            .map_err(|e| self.error(e, started))?;
        let findings = statement
            .query_map([], |row| row.get::<_, String>(0))
            .and_then(|rows| rows.take(5).collect::<rusqlite::Result<Vec<String>>>())
            .map_err(|e| self.error(e, started))?;
        if findings.len() == 1 && findings[0] == "ok" {
            Ok(())
        } else {
            Err(self.corrupt(format!("quick_check: {}", findings.join("; "))))
        }
    }

    fn check_version(&self, version: u32) -> Result<(), StoreError> {
        if version > SqliteStore::SCHEMA_VERSION {
            Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found: version,
                supported: SqliteStore::SCHEMA_VERSION,
            })
        } else {
            Ok(())
        }
    }

    /// Inside the open write transaction: migrates the schema to the current version.
    fn migrate(&self, started: Instant) -> Result<(), StoreError> {
        let (application_id, version, _) = self.inspect().map_err(|e| self.error(e, started))?;
        self.check_version(version)?;
        if application_id != APPLICATION_ID && version != 0 {
            return Err(self.corrupt(format!(
                "not a workflow store (application id {application_id:#x})"
            )));
        }
        for (from, migration) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tracing::info!(path = %self.path, from, to = from + 1, "migrating the store schema");
            self.conn
                .execute_batch(migration)
                .map_err(|e| self.error(e, started))?;
            if from + 1 == CHECKSUMS {
                super::check::backfill(self)?;
            }
            if *migration == super::tasks::MIGRATION {
                super::tasks::backfill(self)?;
            }
            if *migration == super::schedules::MIGRATION {
                super::schedules::backfill(self)?;
            }
        }
        if version < SqliteStore::SCHEMA_VERSION || application_id != APPLICATION_ID {
            self.conn
                .pragma_update(None, "application_id", APPLICATION_ID)
                .and_then(|()| {
                    self.conn
                        .pragma_update(None, "user_version", SqliteStore::SCHEMA_VERSION)
                })
                .map_err(|e| self.error(e, started))?;
        }
        let (_, _, tables) = self.inspect().map_err(|e| self.error(e, started))?;
        match TABLES
            .iter()
            .find(|table| !tables.iter().any(|t| t == *table))
        {
            Some(missing) => Err(self.corrupt(format!("the store has no `{missing}` table"))),
            None => Ok(()),
        }
    }
}

/// Why SQLite could not open a file, as the file system says it.
fn cannot_open(path: &str, error: &rusqlite::Error) -> StoreError {
    let probe = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path);
    match probe.map_err(|e| e.kind()) {
        Err(std::io::ErrorKind::PermissionDenied) => StoreError::PermissionDenied {
            path: path.to_owned(),
            reason: error.to_string(),
        },
        Err(std::io::ErrorKind::ReadOnlyFilesystem) => StoreError::ReadOnly {
            path: path.to_owned(),
            reason: error.to_string(),
        },
        _ => StoreError::Io(format!("{path}: {error}")),
    }
}

pub(super) fn error_for(path: &str, error: rusqlite::Error, started: Instant) -> StoreError {
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked {
            path: path.to_owned(),
            waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        },
        Some(ErrorCode::DiskFull) => StoreError::DiskFull {
            path: path.to_owned(),
        },
        Some(ErrorCode::ReadOnly) => StoreError::ReadOnly {
            path: path.to_owned(),
            reason: error.to_string(),
        },
        Some(ErrorCode::PermissionDenied) => StoreError::PermissionDenied {
            path: path.to_owned(),
            reason: error.to_string(),
        },
        Some(ErrorCode::CannotOpen) => cannot_open(path, &error),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::CorruptFile {
            path: path.to_owned(),
            reason: error.to_string(),
        },
        // Asking again gets the same answer.
        Some(ErrorCode::ConstraintViolation | ErrorCode::TooBig | ErrorCode::TypeMismatch) => {
            StoreError::Rejected {
                reason: format!("{path}: {error}"),
            }
        }
        _ => StoreError::Io(format!("{path}: {error}")),
    }
}

/// A database error inside a request, where waits do not happen (the writer holds the
/// write lock, a reader sees a snapshot).
pub(super) fn db_error(db: &Db) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    let started = Instant::now();
    move |e| db.error(e, started)
}

/// A SQLite file (in a fresh temp directory named after `name`) whose schema is as it was
/// before `migration`, open for a test of that migration to fill.
#[cfg(test)]
pub(super) fn file_before(
    migration: &str,
    name: &str,
) -> (std::path::PathBuf, rusqlite::Connection) {
    let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let path = dir.join("store.db");
    let _ = std::fs::remove_file(&path);
    let before = MIGRATIONS
        .iter()
        .position(|m| *m == migration)
        .expect("the migration is listed");
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(&MIGRATIONS[..before].join("\n"))
        .expect("the older schema");
    conn.pragma_update(None, "application_id", APPLICATION_ID)
        .expect("application id");
    conn.pragma_update(None, "user_version", before as u32)
        .expect("version");
    (path, conn)
}

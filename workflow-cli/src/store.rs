//! Opening the engine's store, the async runtime around it, and what the CLI reads from
//! it besides journals: the spec a run was started under.

pub mod postgres;

use std::collections::HashMap;
use std::path::Path;

use workflow_core::spec::Spec;
use workflow_core::store::Store;
use workflow_sqlite::{SqliteOptions, SqliteStore};

use crate::error::{CliError, Result};

/// Opens the store `--store` names: a `postgres://` (or `postgresql://`) URL, connected on
/// first use inside the command's runtime, or the path of a SQLite file, which must exist
/// (it is never created).
pub fn open(path: &Path) -> Result<Box<dyn Store>> {
    if let Some(url) = path.to_str().filter(|s| postgres::is_url(s)) {
        return Ok(Box::new(postgres::LazyPgStore::new(url)));
    }
    open_sqlite(path).map(|store| Box::new(store) as Box<dyn Store>)
}

/// Opens the store `--store` names for `workflow check`: a SQLite file without the quick
/// check at opening, since the check runs the full one itself.
pub fn open_for_check(path: &Path) -> Result<Box<dyn Store>> {
    if let Some(url) = path.to_str().filter(|s| postgres::is_url(s)) {
        return Ok(Box::new(postgres::LazyPgStore::new(url)));
    }
    exists(path)?;
    let options = SqliteOptions {
        quick_check: false,
        ..SqliteOptions::default()
    };
    SqliteStore::open_with(path, options)
        .map(|store| Box::new(store) as Box<dyn Store>)
        .map_err(CliError::from)
}

/// The store as messages show it: a PostgreSQL URL without its password, or the path.
pub fn shown(path: &Path) -> String {
    match path.to_str().filter(|s| postgres::is_url(s)) {
        Some(url) => postgres::redact(url),
        None => path.display().to_string(),
    }
}

/// Opens the SQLite store at `path`; a missing file is an error, never created.
fn open_sqlite(path: &Path) -> Result<SqliteStore> {
    exists(path)?;
    SqliteStore::open(path).map_err(CliError::from)
}

/// Fails unless `path` is a file.
fn exists(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(CliError::new(format!(
            "{} is a directory, not a store",
            path.display()
        ))),
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Err(CliError::new(format!(
            "no store at {} (give its path with --store or WORKFLOW_STORE)",
            path.display()
        ))),
        Err(error) => Err(CliError::new(format!(
            "cannot read {}: {error}",
            path.display()
        ))),
    }
}

/// The single-threaded runtime the store's async API runs on.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::new(format!("cannot start the async runtime: {error}")))
}

/// The specs recorded in a store, looked up once per fingerprint.
#[derive(Debug, Default)]
pub struct Specs {
    cache: HashMap<String, Option<Spec>>,
}

impl Specs {
    /// The spec recorded for `fingerprint`, or `None` when the store has none (or one this
    /// version cannot read; a warning says so once).
    pub async fn get(&mut self, store: &dyn Store, fingerprint: &str) -> Result<Option<&Spec>> {
        if !self.cache.contains_key(fingerprint) {
            let spec = match store.spec(fingerprint).await? {
                Some(json) => match serde_json::from_str::<Spec>(&json) {
                    Ok(spec) => Some(spec),
                    Err(error) => {
                        eprintln!(
                            "warning: the spec recorded for fingerprint {fingerprint} does not \
                             decode ({error}); steps are shown by number"
                        );
                        None
                    }
                },
                None => None,
            };
            self.cache.insert(fingerprint.to_owned(), spec);
        }
        Ok(self.cache.get(fingerprint).and_then(Option::as_ref))
    }
}

/// A step's name: its id from the spec, or `#N` without one.
pub fn step_name(spec: Option<&Spec>, step: usize) -> String {
    spec.and_then(|spec| spec.steps.get(step))
        .map_or_else(|| format!("#{step}"), |s| s.id.clone())
}

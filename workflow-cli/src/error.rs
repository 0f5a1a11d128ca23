//! The CLI's error: one clear line (plus, for a spec with errors, one located line per
//! error), reported on stderr with exit code 1. Usage errors are clap's (exit code 2).

use std::fmt;
use std::path::Path;

use serde_json::{json, Value};
use workflow_core::store::StoreError;

/// What went wrong, for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// One sentence.
    pub message: String,
    /// Errors located in a source file, printed before the message.
    pub located: Vec<Located>,
    /// A report for stdout that goes with the failure (what `workflow check` found).
    pub report: Option<String>,
}

/// An error at a place in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The file, as given.
    pub file: String,
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

/// The result of a command: its stdout, or an error.
pub type Result<T, E = CliError> = std::result::Result<T, E>;

impl CliError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            located: Vec::new(),
            report: None,
        }
    }

    /// A failure that comes with a report for stdout.
    pub fn with_report(message: impl Into<String>, report: String) -> Self {
        CliError {
            report: Some(report),
            ..CliError::new(message)
        }
    }

    /// An error with located details.
    pub fn located(message: impl Into<String>, located: Vec<Located>) -> Self {
        CliError {
            message: message.into(),
            located,
            report: None,
        }
    }

    /// The error as text for stderr: `error: FILE:LINE:COL: ...` lines, then the message.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for located in &self.located {
            out.push_str(&format!("error: {located}\n"));
        }
        out.push_str(&format!("error: {}\n", self.message));
        out
    }

    /// The error as one line of JSON for stderr.
    pub fn to_json(&self) -> String {
        let located: Vec<Value> = self
            .located
            .iter()
            .map(|l| {
                json!({
                    "file": l.file,
                    "line": l.line,
                    "column": l.column,
                    "message": l.message,
                })
            })
            .collect();
        let mut value = json!({ "error": self.message });
        if !located.is_empty() {
            value["errors"] = Value::Array(located);
        }
        format!("{value}\n")
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        CliError::new(error.to_string())
    }
}

/// An I/O error on `path`, phrased for the user.
pub fn io_error(action: &str, path: &Path, error: &std::io::Error) -> CliError {
    match error.kind() {
        std::io::ErrorKind::NotFound => CliError::new(format!("no file {}", path.display())),
        std::io::ErrorKind::PermissionDenied => CliError::new(format!(
            "cannot {action} {}: permission denied",
            path.display()
        )),
        _ => CliError::new(format!("cannot {action} {}: {error}", path.display())),
    }
}

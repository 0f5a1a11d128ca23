//! Specs in files, without compiling: `workflow lint`, `workflow diagram FILE.yaml`,
//! `workflow schema` and `workflow export --yaml`.
//!
//! A file is checked by the same front end and the same checks as `workflow_file!`
//! ([`workflow_spec::yaml::check`]), so what the linter passes the macro passes, except
//! for what needs Rust's types (that the actions exist and take these arguments).

use std::path::Path;

use serde_json::{json, Value};
use workflow_spec::yaml::{self, FileError, Options};
use workflow_spec::Spec;

use crate::cli::{ExportArgs, LintArgs};
use crate::error::{io_error, CliError, Located, Result};

/// Whether `file` is a spec file (`.yaml` or `.yml`) rather than Rust source.
pub fn is_spec_file(file: &Path) -> bool {
    file.extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml"))
}

/// The options the linter checks with: the file's own `env:`, else an environment
/// assumed present (the macro's `env:` argument gives it at compile time).
fn lint_options() -> Options {
    Options {
        actions: None,
        env: None,
        env_fallback: Some("Env".into()),
    }
}

/// The checked spec of a spec file, or its errors located in the file.
pub fn load(file: &Path) -> Result<Spec> {
    let shown = file.display().to_string();
    let source = std::fs::read_to_string(file).map_err(|e| io_error("read", file, &e))?;
    let checked = yaml::check(&source, &lint_options());
    match checked.spec {
        Some(spec) => Ok(spec),
        None => {
            let count = checked.errors.len();
            let located = checked
                .errors
                .iter()
                .map(|error| located(&shown, error))
                .collect();
            Err(CliError::located(
                format!(
                    "{shown} has {count} error{}",
                    if count == 1 { "" } else { "s" }
                ),
                located,
            ))
        }
    }
}

fn located(shown: &str, error: &FileError) -> Located {
    let message = match &error.help {
        Some(help) => format!("{} (help: {help})", error.message),
        None => error.message.clone(),
    };
    Located {
        file: shown.to_owned(),
        line: error.pos.line,
        column: error.pos.col,
        message,
    }
}

/// Runs `workflow lint FILE...`: every file checked, every error printed with its line;
/// fails (exit status 1) when any file has an error.
pub fn lint(args: &LintArgs, json: bool) -> Result<String> {
    let mut report = String::new();
    let mut results = Vec::new();
    let mut failed = 0;
    let mut errors = 0;
    for file in &args.files {
        let shown = file.display().to_string();
        let source = match std::fs::read_to_string(file) {
            Ok(source) => source,
            Err(error) => {
                let message = io_error("read", file, &error).message;
                failed += 1;
                errors += 1;
                report.push_str(&format!("{shown}: {message}\n"));
                results.push(json!({ "file": shown, "ok": false, "error": message, "errors": [] }));
                continue;
            }
        };
        let checked = yaml::check(&source, &lint_options());
        match &checked.spec {
            Some(spec) => {
                report.push_str(&format!(
                    "ok: {shown}: workflow `{}`, {} step{}\n",
                    spec.name,
                    spec.steps.len(),
                    if spec.steps.len() == 1 { "" } else { "s" },
                ));
                results.push(json!({
                    "file": shown,
                    "ok": true,
                    "workflow": spec.name,
                    "steps": spec.steps.len(),
                    "errors": [],
                }));
            }
            None => {
                failed += 1;
                errors += checked.errors.len();
                for error in &checked.errors {
                    report.push_str(&format!("error: {}\n\n", error.render(&shown, &source)));
                }
                let list: Vec<Value> = checked
                    .errors
                    .iter()
                    .map(|error| {
                        json!({
                            "line": error.pos.line,
                            "column": error.pos.col,
                            "message": error.message,
                            "help": error.help,
                        })
                    })
                    .collect();
                results.push(json!({ "file": shown, "ok": false, "errors": list }));
            }
        }
    }
    let out = if json {
        format!("{:#}\n", json!({ "files": results }))
    } else {
        report
    };
    if failed == 0 {
        Ok(out)
    } else {
        Err(CliError::with_report(
            format!(
                "{errors} error{} in {failed} of {} file{}",
                if errors == 1 { "" } else { "s" },
                args.files.len(),
                if args.files.len() == 1 { "" } else { "s" }
            ),
            out,
        ))
    }
}

/// Runs `workflow schema`: the JSON Schema of spec files.
pub fn schema() -> String {
    format!("{:#}\n", yaml::schema())
}

/// Runs `workflow export --yaml FILE.rs`: the inline spec as a spec file.
pub fn export(args: &ExportArgs, json: bool) -> Result<String> {
    if !args.yaml {
        return Err(CliError::new(
            "choose the format to export: `--yaml` (a spec file for `workflow_file!`)",
        ));
    }
    let spec = crate::diagram::load_rust(&args.file, args.workflow.as_deref())?;
    let text = yaml::export(&spec).map_err(|error| CliError::new(error.to_string()))?;
    match &args.output {
        Some(out) => {
            std::fs::write(out, &text).map_err(|e| io_error("write", out, &e))?;
            if json {
                Ok(format!(
                    "{:#}\n",
                    json!({ "workflow": spec.name, "output": out.display().to_string(), "fingerprint": spec.fingerprint() })
                ))
            } else {
                eprintln!("wrote `{}` to {}", spec.name, out.display());
                Ok(String::new())
            }
        }
        None if json => Ok(format!(
            "{:#}\n",
            json!({ "workflow": spec.name, "fingerprint": spec.fingerprint(), "yaml": text })
        )),
        None => Ok(text),
    }
}

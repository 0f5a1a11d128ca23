//! `workflow diagram`: find the `workflow!` invocations of a Rust source file, check them
//! as the macro does, and render one with the macro's renderers; or render a spec file,
//! or the newest version of a workflow recorded in the store.

use proc_macro2::Span;
use serde_json::json;
use syn::visit::Visit;
use workflow_core::store::Store;
use workflow_spec::parse::{parse, Parsed};
use workflow_spec::render;
use workflow_spec::Spec;

use crate::cli::{DiagramArgs, Format};
use crate::error::{io_error, CliError, Located, Result};

/// One `workflow!` invocation found in a file.
struct Found {
    /// The workflow's name, when its header could be read.
    name: Option<String>,
    /// Where the invocation starts.
    at: (usize, usize),
    /// What the spec parser made of it.
    parsed: Parsed,
}

impl Found {
    /// The name, or where the nameless invocation is.
    fn label(&self) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => format!("<unreadable workflow! at line {}>", self.at.0),
        }
    }
}

/// Runs `workflow diagram FILE`; returns what to print on stdout.
pub fn run(args: &DiagramArgs, file: &std::path::Path, json: bool) -> Result<String> {
    let shown = file.display().to_string();
    let spec = if crate::files::is_spec_file(file) {
        crate::files::load(file)?
    } else {
        load_rust(file, args.workflow.as_deref())?
    };
    render_to(args, &spec, json!({ "file": shown }), json)
}

/// Runs `workflow diagram --workflow NAME` without a file: the newest version of the
/// workflow an engine recorded in the store.
pub async fn stored(store: &dyn Store, args: &DiagramArgs, json: bool) -> Result<String> {
    let Some(name) = args.workflow.as_deref() else {
        return Err(CliError::new(
            "name the workflow to draw: `workflow diagram FILE`, or `--workflow NAME` for one the store holds",
        ));
    };
    let records = store.specs(name).await?;
    let Some(newest) = records.first() else {
        return Err(CliError::new(format!(
            "the store holds no spec of workflow `{name}`: an engine records a workflow's spec when it registers it"
        )));
    };
    let spec: Spec = serde_json::from_str(&newest.spec).map_err(|error| {
        CliError::new(format!(
            "the spec recorded for `{name}` (fingerprint {}) does not decode: {error}",
            newest.fingerprint
        ))
    })?;
    let source = json!({ "fingerprint": newest.fingerprint });
    render_to(args, &spec, source, json)
}

/// Renders `spec` in the chosen format to the output or stdout; `source` says where the
/// spec came from in the JSON answer (`file` or `fingerprint`).
fn render_to(
    args: &DiagramArgs,
    spec: &Spec,
    source: serde_json::Value,
    json: bool,
) -> Result<String> {
    let diagram = match args.format {
        Format::Mermaid => render::mermaid(spec),
        Format::Dot => render::dot(spec),
        Format::Svg => render::svg(spec),
    };
    let format = args.format.as_str();
    match &args.output {
        Some(out) => {
            std::fs::write(out, &diagram).map_err(|e| io_error("write", out, &e))?;
            if json {
                let mut answer = source;
                answer["workflow"] = json!(spec.name);
                answer["format"] = json!(format);
                answer["output"] = json!(out.display().to_string());
                answer["steps"] = json!(spec.steps.len());
                Ok(format!("{answer:#}\n"))
            } else {
                eprintln!(
                    "wrote the {format} diagram of `{}` ({} steps) to {}",
                    spec.name,
                    spec.steps.len(),
                    out.display()
                );
                Ok(String::new())
            }
        }
        None if json => {
            let mut answer = source;
            answer["workflow"] = json!(spec.name);
            answer["format"] = json!(format);
            answer["steps"] = json!(spec.steps.len());
            answer["diagram"] = json!(diagram);
            Ok(format!("{answer:#}\n"))
        }
        None => Ok(diagram),
    }
}

/// The checked spec of the `workflow!` invocation named `name` (or the only one) in the
/// Rust source file `file`, or its errors located in the file.
pub(crate) fn load_rust(file: &std::path::Path, name: Option<&str>) -> Result<Spec> {
    let shown = file.display().to_string();
    if file.is_dir() {
        return Err(CliError::new(format!(
            "{shown} is a directory, not a Rust file"
        )));
    }
    let source = std::fs::read_to_string(file).map_err(|e| io_error("read", file, &e))?;
    let syntax = syn::parse_file(&source).map_err(|error| {
        let located = locate_all(&shown, &error, (1, 1));
        CliError::located(format!("{shown} is not valid Rust"), located)
    })?;

    let mut finder = Finder::default();
    finder.visit_file(&syntax);
    let found: Vec<Found> = finder
        .macros
        .iter()
        .map(|mac| {
            let parsed = parse(mac.tokens.clone());
            let name = parsed.ast.as_ref().map(|ast| ast.name.to_string());
            let at = position(macro_span(mac), (1, 1));
            Found { name, at, parsed }
        })
        .collect();

    let chosen = choose(&found, name, &shown)?;
    let Some(spec) = &chosen.parsed.spec else {
        let mut located = Vec::new();
        for error in &chosen.parsed.errors {
            located.extend(locate_all(&shown, error, chosen.at));
        }
        let count = located.len();
        return Err(CliError::located(
            format!(
                "workflow `{}` in {shown} has {count} error{}",
                chosen.label(),
                if count == 1 { "" } else { "s" }
            ),
            located,
        ));
    };
    Ok(spec.clone())
}

/// The invocation to draw: the one named, or the only one.
fn choose<'a>(found: &'a [Found], name: Option<&str>, shown: &str) -> Result<&'a Found> {
    let names = || {
        found
            .iter()
            .map(|f| format!("`{}`", f.label()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (name, found) {
        (_, []) => Err(CliError::new(format!(
            "no `workflow!` invocation in {shown}"
        ))),
        (Some(name), _) => found
            .iter()
            .find(|f| f.name.as_deref() == Some(name))
            .ok_or_else(|| {
                let mut message =
                    format!("no workflow `{name}` in {shown}; it declares {}", names());
                if let Some(close) = nearest(name, found) {
                    message.push_str(&format!(" (did you mean `{close}`?)"));
                }
                CliError::new(message)
            }),
        (None, [only]) => Ok(only),
        (None, _) => Err(CliError::new(format!(
            "{shown} declares {} workflows ({}); choose one with --workflow NAME",
            found.len(),
            names()
        ))),
    }
}

/// The declared name closest to `name`, if it is close (a typo or a case slip).
fn nearest<'a>(name: &str, found: &'a [Found]) -> Option<&'a str> {
    found
        .iter()
        .filter_map(|f| f.name.as_deref())
        .find(|candidate| {
            candidate.eq_ignore_ascii_case(name) || edit_distance(candidate, name) <= 2
        })
}

/// Levenshtein distance, for suggestions.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            let next = (row[j + 1] + 1).min(row[j] + 1).min(previous + cost);
            previous = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Every message of a (possibly combined) `syn::Error`, located in `file`. An error
/// without a position (a call-site span) is placed at `fallback`.
fn locate_all(file: &str, error: &syn::Error, fallback: (usize, usize)) -> Vec<Located> {
    error
        .clone()
        .into_iter()
        .map(|single| {
            let (line, column) = position(single.span(), fallback);
            Located {
                file: file.to_owned(),
                line,
                column,
                message: single.to_string(),
            }
        })
        .collect()
}

/// The 1-based line and column where `span` starts, or `fallback` for a span without
/// a position (the call site, which proc-macro2 places at byte 0, before every file).
fn position(span: Span, fallback: (usize, usize)) -> (usize, usize) {
    let start = span.start();
    if start.line == 0 || format!("{span:?}") == "bytes(0..0)" {
        fallback
    } else {
        (start.line, start.column + 1)
    }
}

/// Where an invocation starts: its path's first segment.
fn macro_span(mac: &syn::Macro) -> Span {
    mac.path
        .segments
        .first()
        .map_or_else(|| mac.bang_token.span, |segment| segment.ident.span())
}

/// Collects the `workflow!` invocations of a file, in source order, wherever they are:
/// items, modules, function bodies, expressions.
#[derive(Default)]
struct Finder {
    macros: Vec<syn::Macro>,
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        if is_workflow_macro(&mac.path) {
            self.macros.push(mac.clone());
        }
        syn::visit::visit_macro(self, mac);
    }
}

/// `workflow!` or `some::path::workflow!`.
fn is_workflow_macro(path: &syn::Path) -> bool {
    path.segments
        .last()
        .is_some_and(|segment| segment.ident == "workflow" && segment.arguments.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(source: &str) -> Vec<String> {
        let file = syn::parse_file(source).unwrap();
        let mut finder = Finder::default();
        finder.visit_file(&file);
        finder
            .macros
            .iter()
            .map(|mac| {
                parse(mac.tokens.clone())
                    .ast
                    .map(|ast| ast.name.to_string())
                    .unwrap_or_default()
            })
            .collect()
    }

    #[test]
    fn finds_invocations_in_items_modules_and_function_bodies() {
        let source = r#"
            workflow! { workflow A() { step a -> () { action: f() } } }
            mod inner {
                workflow_core::workflow! { workflow B() { step b -> () { action: f() } } }
            }
            fn main() {
                ::workflow_core::workflow! { workflow C() { step c -> () { action: f() } } }
                let _ = vec![1];
                println!("workflow!");
            }
            macro_rules! workflow { () => {} }
        "#;
        assert_eq!(find(source), ["A", "B", "C"]);
    }

    #[test]
    fn suggestions_and_positions() {
        assert_eq!(edit_distance("Review", "Reveiw"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(position(Span::call_site(), (4, 2)), (4, 2));
    }
}

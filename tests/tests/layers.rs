//! Imports run one way: spec → machine → store trait → stores → engine → server, CLI and
//! facade. Read from the sources' own paths, so a module that reaches a layer above it
//! fails here, naming the file, the line and the path.
//!
//! - Inside `workflow-core`, every top-level module has a layer; code (not comments, not
//!   `#[cfg(test)]` modules) names `crate::<module>` only at its own layer or below, and
//!   the modules' graph has no cycle.
//! - The stores and the conformance suite use `workflow-core`'s lower layers only, never
//!   its engine; `workflow-core` names no store's driver.
//! - No source file is longer than 700 lines outside its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `workflow-core`'s top-level modules by layer (`lib` is the crate root).
const CORE_LAYERS: &[(&str, u8)] = &[
    // The vocabulary every layer speaks: ids, errors, events, time, futures.
    ("error", 0),
    ("journal", 0),
    ("clock", 0),
    ("future", 0),
    ("trace", 0),
    ("approval", 0),
    ("form", 0),
    ("flow", 0),
    ("inbox", 0),
    ("telemetry", 0),
    // The pure rules: the run's machine, the schedules, what a step sees.
    ("machine", 1),
    ("schedule", 1),
    ("context", 1),
    // The `Store` trait, its records and the memory store.
    ("store", 2),
    // Operations on a store from outside the engine, shared with the CLI and the server.
    ("admin", 3),
    ("search", 3),
    // The engine: driver, scheduler, queue, fences, the `Workflow` trait, human handles.
    ("engine", 4),
    // What is built on the engine.
    ("testing", 5),
    ("private", 5),
    ("upgrade", 5),
    ("lib", 5),
];

/// Paths the stores and the conformance suite must not name: the engine and what is
/// built on it.
const ABOVE_THE_STORES: &[&str] = &[
    "workflow_core::Engine",
    "workflow_core::EngineBuilder",
    "workflow_core::RunHandle",
    "workflow_core::RunRef",
    "workflow_core::StepContext",
    "workflow_core::Workflow",
    "workflow_core::admin",
    "workflow_core::testing",
    "workflow_core::search::purge",
    "workflow_server",
    "workflow_browser",
    "workflow_cli",
    "workflow::",
];

const MAX_LINES: usize = 700;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace's root")
}

/// Whether a file is a test of its crate (under a `tests` folder of it).
fn is_test(krate: &Path, file: &Path) -> bool {
    file.strip_prefix(krate)
        .unwrap_or(file)
        .components()
        .any(|c| c.as_os_str() == "tests")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code: comments blanked, `#[cfg(test)]` modules cut.
fn code(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth: i64 = 0;
    let mut pending_test = false;
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("");
        let trimmed = line.trim();
        if trimmed.starts_with("#[cfg(test)]") {
            pending_test = true;
            continue;
        }
        let opens = line.matches('{').count() as i64;
        let closes = line.matches('}').count() as i64;
        if pending_test && trimmed.starts_with("mod ") {
            pending_test = false;
            if trimmed.ends_with(';') {
                continue;
            }
            skip_depth = Some(depth);
            depth += opens - closes;
            continue;
        }
        if !trimmed.is_empty() {
            pending_test = false;
        }
        depth += opens - closes;
        if let Some(at) = skip_depth {
            if depth <= at {
                skip_depth = None;
            }
            continue;
        }
        lines.push((index + 1, line.to_owned()));
    }
    lines
}

/// The lines of a file outside its `#[cfg(test)]` module.
fn lines_outside_tests(text: &str) -> usize {
    let end = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..end].lines().count()
}

/// `crate::<module>` paths on a line.
fn crate_paths(line: &str) -> Vec<&str> {
    line.match_indices("crate::")
        .filter(|(at, _)| {
            // Not `workflow_core::` or another crate's name ending in `crate`.
            !line[..*at]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .filter_map(|(at, _)| {
            let rest = &line[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let name = &rest[..end];
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

fn top_module(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file of the crate");
    let first = relative
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_owned()
}

#[test]
fn workflow_core_imports_run_one_way_without_cycles() {
    let layers: BTreeMap<&str, u8> = CORE_LAYERS.iter().copied().collect();
    let src = root().join("workflow-core/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut upward = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        if is_test(&src, file) {
            continue;
        }
        let module = top_module(&src, file);
        let Some(&own) = layers.get(module.as_str()) else {
            panic!(
                "{} is in a module without a layer: add `{module}` to CORE_LAYERS",
                file.display()
            );
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        for (number, line) in code(&text) {
            for target in crate_paths(&line) {
                let Some(&layer) = layers.get(target) else {
                    continue; // an item of the crate root, re-exported from below
                };
                if target != module {
                    graph
                        .entry(module.clone())
                        .or_default()
                        .insert(target.to_owned());
                }
                if layer > own {
                    upward.push(format!(
                        "{}:{number}: `{module}` (layer {own}) names `crate::{target}` (layer {layer}): {}",
                        file.strip_prefix(root()).unwrap_or(file).display(),
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that reach a layer above:\n{}",
        upward.join("\n")
    );
    // No cycle: a depth-first walk never meets a module on its own path.
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(at) = path.iter().position(|m| m == module) {
            panic!("an import cycle: {} -> {module}", path[at..].join(" -> "));
        }
        if !done.insert(module.to_owned()) {
            return;
        }
        path.push(module.to_owned());
        for next in graph.get(module).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
    }
    for module in graph.keys() {
        visit(module, &graph, &mut Vec::new(), &mut BTreeSet::new());
    }
}

#[test]
fn the_stores_never_reach_into_the_engine() {
    let mut found = Vec::new();
    for krate in [
        "workflow-sqlite",
        "workflow-postgres",
        "workflow-conformance",
    ] {
        let mut files = Vec::new();
        rust_files(&root().join(krate).join("src"), &mut files);
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            for (number, line) in code(&text) {
                for path in ABOVE_THE_STORES {
                    let named = line.match_indices(path).any(|(at, _)| {
                        let rest = &line[at + path.len()..];
                        path.ends_with("::")
                            || !rest
                                .chars()
                                .next()
                                .is_some_and(|c| c.is_alphanumeric() || c == '_')
                    });
                    if named {
                        found.push(format!(
                            "{}:{number}: names `{path}`: {}",
                            file.strip_prefix(root()).unwrap_or(&file).display(),
                            line.trim()
                        ));
                    }
                }
            }
        }
        let manifest = std::fs::read_to_string(root().join(krate).join("Cargo.toml"))
            .expect("read a manifest");
        for above in [
            "workflow-server",
            "workflow-browser",
            "workflow-cli",
            "workflow =",
        ] {
            assert!(
                !manifest.contains(above),
                "{krate} depends on `{above}`, a layer above the stores"
            );
        }
    }
    assert!(
        found.is_empty(),
        "the stores name the engine:\n{}",
        found.join("\n")
    );
    let core = std::fs::read_to_string(root().join("workflow-core/Cargo.toml"))
        .expect("read workflow-core's manifest");
    for driver in ["rusqlite", "sqlx", "workflow-sqlite", "workflow-postgres"] {
        assert!(
            !core.contains(driver),
            "workflow-core names `{driver}`: a store's driver belongs to its own crate"
        );
    }
}

#[test]
fn no_source_file_is_longer_than_700_lines_outside_its_tests() {
    let mut long = Vec::new();
    for krate in [
        "workflow",
        "workflow-spec",
        "workflow-macros",
        "workflow-core",
        "workflow-sqlite",
        "workflow-postgres",
        "workflow-conformance",
        "workflow-server",
        "workflow-browser",
        "workflow-cli",
        "examples",
    ] {
        let mut files = Vec::new();
        rust_files(&root().join(krate).join("src"), &mut files);
        if krate == "examples" {
            rust_files(&root().join(krate), &mut files);
        }
        files.sort();
        files.dedup();
        for file in files {
            if is_test(&root().join(krate), &file) {
                continue;
            }
            let text = std::fs::read_to_string(&file).expect("read a source file");
            let lines = lines_outside_tests(&text);
            if lines > MAX_LINES {
                long.push(format!(
                    "{}: {lines} lines",
                    file.strip_prefix(root()).unwrap_or(&file).display()
                ));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines outside their tests:\n{}",
        long.join("\n")
    );
}

#[test]
fn an_upward_import_is_found() {
    let store = "use crate::engine::Engine;\n// crate::engine in a comment\nfn f() {}\n";
    let lines = code(store);
    let named: Vec<&str> = lines.iter().flat_map(|(_, l)| crate_paths(l)).collect();
    assert_eq!(named, ["engine"]);
    let tested = "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::engine::Engine;\n}\nfn g() { crate::machine::x() }\n";
    let named: Vec<String> = code(tested)
        .iter()
        .flat_map(|(_, l)| crate_paths(l))
        .map(str::to_owned)
        .collect();
    assert_eq!(named, ["machine"]);
    assert!(crate_paths("workflow_core::engine").is_empty());
}

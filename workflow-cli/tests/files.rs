//! Spec files without compiling: `lint`, `diagram FILE.yaml`, `schema` and
//! `export --yaml`, through the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use workflow_spec::yaml::{self, Options};

fn workflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_workflow"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the binary runs")
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn lint_passes_the_completed_seed_file_and_fails_the_verbatim_one_with_located_errors() {
    let ok = workflow(&["lint", "examples/specs/user-onboarding.completed.yaml"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(stdout(&ok).starts_with(
        "ok: examples/specs/user-onboarding.completed.yaml: workflow `UserOnboarding`, 5 steps"
    ));

    let bad = workflow(&["lint", "examples/specs/user-onboarding.yaml"]);
    assert_eq!(bad.status.code(), Some(1));
    let out = stdout(&bad);
    assert!(
        out.contains("error: examples/specs/user-onboarding.yaml:13:5: unknown key `template` in step `send_welcome_email`\n   |\n13 |     template: welcome\n   |     ^^^^^^^^\nhelp: a literal argument of the action goes under `with:`"),
        "{out}"
    );
    assert!(out.contains("examples/specs/user-onboarding.yaml:30:17: `on_timeout: escalate` in step `human_review` names no group"));
    assert_eq!(out.matches("has no `output:` type").count(), 4, "{out}");
    assert_eq!(stderr(&bad), "error: 9 errors in 1 of 1 file\n");
}

#[test]
fn lint_json_lists_each_files_errors_with_line_and_column() {
    let output = workflow(&[
        "--json",
        "lint",
        "examples/specs/user-onboarding.completed.yaml",
        "examples/specs/user-onboarding.yaml",
        "no/such/file.yaml",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let value: Value = serde_json::from_str(&stdout(&output)).expect("JSON on stdout");
    let files = value["files"].as_array().expect("files");
    assert_eq!(files.len(), 3);
    assert_eq!(files[0]["ok"], true);
    assert_eq!(files[0]["workflow"], "UserOnboarding");
    assert_eq!(files[1]["ok"], false);
    let first = &files[1]["errors"][0];
    assert_eq!(first["line"], 6);
    assert_eq!(first["column"], 9);
    assert_eq!(
        first["message"],
        "step `create_account` has no `output:` type"
    );
    assert_eq!(files[2]["ok"], false);
    assert_eq!(files[2]["error"], "no file no/such/file.yaml");
    let error: Value = serde_json::from_str(stderr(&output).trim()).expect("JSON on stderr");
    assert_eq!(error["error"], "10 errors in 2 of 3 files");
}

#[test]
fn diagram_of_a_spec_file_matches_the_inline_rendering() {
    let output = workflow(&["diagram", "examples/specs/user-onboarding.completed.yaml"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.starts_with("flowchart TD\n"));
    assert!(out.contains("human_review{{\"human_review: Approval<br/>assignee: trust_and_safety_team<br/>timeout 48h<br/>on timeout: escalate -#gt; trust_and_safety_leads\"}}"), "{out}");

    let bad = workflow(&["diagram", "examples/specs/user-onboarding.yaml"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains(
        "error: examples/specs/user-onboarding.yaml:13:5: unknown key `template` in step `send_welcome_email` (help: a literal argument"
    ));
}

#[test]
fn schema_is_a_json_schema_that_names_every_step_key() {
    let output = workflow(&["schema"]);
    assert!(output.status.success());
    let schema: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let step = &schema["properties"]["steps"]["items"]["properties"];
    for key in yaml::STEP_KEYS {
        assert!(
            step.get(*key).is_some(),
            "the schema lacks step key `{key}`"
        );
    }
    let top = &schema["properties"];
    for key in yaml::TOP_KEYS {
        assert!(top.get(*key).is_some(), "the schema lacks top key `{key}`");
    }
}

/// The `workflow!` invocations of every example source, by name, from `workflow diagram
/// --json`'s error listing when a file has several.
fn workflows_of(file: &str) -> Vec<String> {
    let output = workflow(&["export", "--yaml", file, "--workflow", "?"]);
    let text = stderr(&output);
    let Some((_, names)) = text.split_once("it declares ") else {
        return Vec::new();
    };
    names
        .trim_end()
        .split(", ")
        .map(|name| name.trim_matches('`').to_owned())
        .collect()
}

#[test]
fn export_of_every_example_lowers_back_to_the_same_fingerprint() {
    let mut exported = 0;
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples/src"))
        .expect("examples")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    for path in files {
        let source = std::fs::read_to_string(&path).expect("read");
        if !source.contains("workflow! {") {
            continue;
        }
        let file = format!(
            "examples/src/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        for name in workflows_of(&file) {
            let output = workflow(&["--json", "export", "--yaml", &file, "--workflow", &name]);
            assert!(
                output.status.success(),
                "{file} {name}: {}",
                stderr(&output)
            );
            let value: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
            let text = value["yaml"].as_str().expect("yaml");
            let checked = yaml::check(text, &Options::default());
            assert!(
                checked.errors.is_empty(),
                "{file} {name}:\n{text}\n{:?}",
                checked.errors
            );
            let spec = checked.spec.expect("a spec");
            assert_eq!(
                spec.fingerprint(),
                value["fingerprint"].as_str().unwrap(),
                "{file} {name}:\n{text}"
            );
            exported += 1;
        }
    }
    assert!(exported >= 8, "only {exported} workflows exported");
}

#[test]
fn the_committed_exports_are_what_export_writes_today() {
    for (source, name, committed) in [
        (
            "examples/src/order_saga.rs",
            "OrderSaga",
            "tests/specs/order-saga.exported.yaml",
        ),
        (
            "examples/src/ticket_triage.rs",
            "TicketTriage",
            "tests/specs/ticket-triage.exported.yaml",
        ),
        (
            "examples/src/order_fulfilment.rs",
            "Fulfil",
            "tests/specs/fulfil.exported.yaml",
        ),
    ] {
        let output = workflow(&["export", "--yaml", source, "--workflow", name]);
        assert!(output.status.success(), "{}", stderr(&output));
        let expected = std::fs::read_to_string(root().join(committed)).expect("committed");
        assert_eq!(stdout(&output), expected, "{committed} is stale");
    }
}

#[test]
fn export_needs_the_format_flag() {
    let output = workflow(&["export", "examples/src/order_saga.rs"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("choose the format to export: `--yaml`"));
}

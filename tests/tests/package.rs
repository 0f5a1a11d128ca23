//! Every publishable crate packages: `cargo package` (offline, from the dependencies the
//! build already fetched; without rebuilding each package) succeeds for all ten, with the
//! workspace's path dependencies resolved to the packaged versions of each other.

use std::path::Path;
use std::process::Command;

const PUBLISHABLE: [&str; 10] = [
    "workflow-spec",
    "workflow-macros",
    "workflow-core",
    "workflow-conformance",
    "workflow-sqlite",
    "workflow-postgres",
    "workflow-server",
    "workflow-browser",
    "workflow-cli",
    "workflow",
];

#[test]
fn every_publishable_crate_packages() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::temp_dir().join(format!("workflow-package-{}", std::process::id()));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(&root)
        .args(["package", "--offline", "--no-verify", "--allow-dirty"])
        .arg("--target-dir")
        .arg(&target);
    for name in PUBLISHABLE {
        command.args(["-p", name]);
    }
    let output = command.output().expect("run cargo package");
    assert!(
        output.status.success(),
        "cargo package failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for name in PUBLISHABLE {
        let file = target.join("package").join(format!("{name}-0.1.0.crate"));
        let size = std::fs::metadata(&file)
            .unwrap_or_else(|e| panic!("{} was not packaged: {e}", file.display()))
            .len();
        assert!(size > 1_000, "{name}'s package is {size} bytes");
    }
    let _ = std::fs::remove_dir_all(&target);
}

//! Seed 003's user-onboarding spec from a YAML file, end to end on a SQLite file.
//!
//! ```text
//! cargo run --example onboarding_file               # store: target/onboarding-file.db
//! cargo run --example onboarding_file -- my.db
//! ```
//!
//! The workflow is `examples/specs/user-onboarding.completed.yaml`, compiled by
//! `workflow_file!` with the same checks as an inline `workflow!`. It prints the
//! diagram drawn from the file, then what each action does: the workspace service fails
//! once and is retried, a simulated reviewer approves, the account is activated.

use std::error::Error;
use std::path::PathBuf;

use examples::onboarding_file::{self, UserOnboarding};
use examples::Log;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let db = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("target/onboarding-file.db"), PathBuf::from);
    println!("The workflow of specs/user-onboarding.completed.yaml:\n");
    println!("{}", UserOnboarding::MERMAID.trim_end());
    println!();
    let summary = onboarding_file::run(&db, &Log::stdout()).await?;
    println!(
        "\n{:?}: user {} activated: {}, workspace {} after {} attempts, welcome {:?}",
        summary.status,
        summary.user.email,
        summary.activated,
        summary.workspace.id,
        summary.provision_attempts,
        summary.welcome.map(|r| r.message_id)
    );
    Ok(())
}

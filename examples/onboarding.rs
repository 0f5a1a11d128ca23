//! The main example: DESIGN.md's user-onboarding workflow, end to end, on a SQLite file.
//!
//! ```text
//! cargo run --example onboarding                  # store: target/onboarding.db
//! cargo run --example onboarding -- my.db         # or ONBOARDING_DB=my.db
//! cargo run --example onboarding -- --stop-at-review
//! ```
//!
//! It prints the workflow's diagram, then every journal event as the engine writes it
//! (through `Engine::subscribe`): `provision_workspace` fails with a simulated 503 on its
//! first attempt and is retried after a backoff of up to 1 s; the run then waits for the
//! human review, which a clearly labelled simulated reviewer approves through the API a
//! person's tool would use (`run.human_review().approve(..)`); the account is activated.
//!
//! Everything is journaled in the SQLite file. Run the example again: the start carries
//! the signup email as its idempotency key, so it finds the same run and prints its
//! outputs instead of onboarding anyone twice. Interrupt it (Ctrl-C during the retry or
//! the review, or `--stop-at-review`) and run it again: `resume_all` continues the run
//! from its journal without re-running the steps that completed.

use std::error::Error;
use std::path::PathBuf;

use examples::onboarding::{self, Config, Found, Reviewer, UserOnboarding};
use examples::Log;

const USAGE: &str = "usage: onboarding [STORE_FILE] [--stop-at-review]";

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut db = None;
    let mut stop_at_review = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--stop-at-review" => stop_at_review = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            flag if flag.starts_with('-') => {
                eprintln!("unknown flag {flag}\n{USAGE}");
                std::process::exit(2);
            }
            path => db = Some(PathBuf::from(path)),
        }
    }
    let db = db
        .or_else(|| std::env::var_os("ONBOARDING_DB").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target/onboarding.db"));
    let mut config = Config::new(db);
    if stop_at_review {
        config.reviewer = Reviewer::StopAtReview;
    }

    println!("The UserOnboarding workflow (UserOnboarding::MERMAID):\n");
    println!("{}", UserOnboarding::MERMAID.trim_end());
    println!();
    println!(
        "Onboarding {} on {}:",
        config.signup.email,
        config.db.display()
    );

    let log = Log::stdout();
    let summary = onboarding::run(&config, &log).await?;

    println!();
    println!("{} is {}.", summary.run, summary.status.as_str());
    if let Some(user) = &summary.user {
        println!("  account:        {} ({})", user.id, user.email);
    }
    if summary.user.is_some() {
        let sent = if summary.welcome_sent {
            "sent"
        } else {
            "not sent (on_failure: continue)"
        };
        println!("  welcome email:  {sent}");
    }
    if let Some(workspace) = &summary.workspace {
        println!(
            "  workspace:      {} (after {} attempts)",
            workspace.id, summary.provision_attempts
        );
    }
    match &summary.review {
        Some(review) => println!(
            "  human review:   {} by {}{}",
            if review.approved {
                "approved"
            } else {
                "rejected"
            },
            review.by,
            review
                .comment
                .as_deref()
                .map(|c| format!(" (\"{c}\")"))
                .unwrap_or_default()
        ),
        None => println!("  human review:   waiting"),
    }
    println!(
        "  activated:      {}",
        if summary.activated { "yes" } else { "no" }
    );
    match summary.found {
        Found::New => {}
        Found::Resumed => {
            println!("  resumed: this process made only these calls:");
            for call in &summary.calls {
                println!("    {}", call.trim());
            }
        }
        Found::Finished => {
            println!("  nothing ran in this process: the outputs come from the journal")
        }
    }

    let shown = summary.db.display();
    let absolute = std::fs::canonicalize(&summary.db).unwrap_or_else(|_| summary.db.clone());
    println!();
    println!("The journal is in {}.", absolute.display());
    println!("Inspect it with the CLI:");
    println!(
        "  cargo run -p workflow-cli -- runs show {} --store {shown}",
        summary.run
    );
    println!("  cargo run -p workflow-cli -- tasks list --store {shown}");
    println!();
    if summary.status.is_finished() {
        println!(
            "Run the example again: the signup email is the start's idempotency key, so it finds {} instead of starting over. Delete {shown} to start afresh.",
            summary.run
        );
    } else {
        println!(
            "Run the example again to resume {} where it stopped.",
            summary.run
        );
    }
    Ok(())
}

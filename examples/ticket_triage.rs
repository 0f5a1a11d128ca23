//! The failure-handling seed's incident: a signed ticket webhook delivered three times,
//! an ambiguous message the classifier marks urgent, and an alert service that times out
//! after it delivered the alert.
//!
//! ```text
//! cargo run --example ticket_triage              # one run, one approval, one alert
//! cargo run --example ticket_triage -- --dry-run # the alert is proposed, nothing is sent
//! ```
//!
//! Time is simulated (paused tokio time from a frozen start), so the 20-minute wait for
//! the lead, the 10 s attempt timeout and the backoff pass at once, and every run prints
//! the same thing.

use std::error::Error;

use examples::ticket_triage;
use examples::Log;

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut dry_run = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--dry-run" => dry_run = true,
            other => {
                eprintln!("unknown argument {other}\nusage: ticket_triage [--dry-run]");
                std::process::exit(2);
            }
        }
    }
    let mode = if dry_run {
        " (DRY RUN: external effects are proposed, not executed)"
    } else {
        ""
    };
    println!("Ticket triage{mode}\n");

    let summary = ticket_triage::run(dry_run, &Log::stdout()).await?;

    println!();
    let distinct = {
        let mut runs = summary.runs.clone();
        runs.dedup();
        runs
    };
    let runs: Vec<String> = summary.runs.iter().map(ToString::to_string).collect();
    println!(
        "deliveries -> runs: {} ({} distinct)",
        runs.join(", "),
        distinct.len()
    );
    if let Some(triage) = &summary.triage {
        println!(
            "classifier:  urgent={} ambiguous={} ({}): a proposal only",
            triage.urgent, triage.ambiguous, triage.reason
        );
    }
    match &summary.approval {
        Some(approval) => println!(
            "approval:    {} by {}{}",
            if approval.approved {
                "approved"
            } else {
                "rejected"
            },
            approval.by,
            approval
                .comment
                .as_deref()
                .map(|c| format!(" (\"{c}\")"))
                .unwrap_or_default()
        ),
        None => println!("approval:    not needed"),
    }
    println!(
        "alert:       {} (send_alert attempts: {}, alert service calls: {})",
        summary
            .alert
            .as_ref()
            .map_or("none sent by the run".to_owned(), |id| id.0.clone()),
        summary.send_attempts,
        summary.posts
    );
    println!("delivered:   {} alert(s)", summary.delivered.len());
    for alert in &summary.delivered {
        println!("  {} key={} \"{}\"", alert.id.0, alert.key, alert.text);
    }
    for (step, args) in &summary.proposals {
        println!("proposed:    {step} with {args}");
    }
    println!("forged:      {}", summary.forged);
    Ok(())
}

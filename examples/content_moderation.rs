//! The workflow seed's human-in-the-loop flow: an automatic screen, then (when it asks for
//! one) a moderator's review with a 48-hour timeout that escalates to the leads, then
//! publish or not.
//!
//! ```text
//! cargo run --example content_moderation
//! ```
//!
//! Time is simulated: the runtime starts with tokio's time paused, so the 48 hours the
//! moderators leave the task alone pass at once, and the escalation shows up exactly 48
//! hours after the task opened.

use std::error::Error;

use examples::content_moderation::{self, PostOutcome};
use examples::{fmt_duration, Log};

fn report(outcome: &PostOutcome) {
    println!("{} ({}):", outcome.post, outcome.run);
    let flags = if outcome.screening.flags.is_empty() {
        "no flags".to_owned()
    } else {
        format!("flags: {}", outcome.screening.flags.join(", "))
    };
    println!("  auto_screen: {flags}");
    for (after, what) in &outcome.task_events {
        println!("  review at +{}: {what}", fmt_duration(*after));
    }
    if let Some(review) = &outcome.review {
        println!(
            "  review:      {} by {}{}",
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
        );
    }
    match &outcome.publication {
        Some(publication) => println!("  published:   {}", publication.url),
        None => println!("  published:   no"),
    }
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("Content moderation (simulated time)\n");
    let summary = content_moderation::run(&Log::stdout()).await?;
    println!();
    report(&summary.clean);
    report(&summary.flagged);
    Ok(())
}

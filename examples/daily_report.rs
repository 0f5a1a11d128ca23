//! A scheduled report: every weekday at 09:00 Berlin time, with a human review when the
//! numbers look wrong. Ten simulated days (across the change to summer time) pass at once
//! on paused tokio time.
//!
//! ```text
//! cargo run --example daily_report
//! ```

use std::error::Error;

use examples::{daily_report, Log};

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("Daily report, ten simulated days from Monday 2026-03-23\n");
    let summary = daily_report::run(&Log::stdout()).await?;
    println!(
        "\n{} runs, {} reports sent, {} reviewed",
        summary.ticks.len(),
        summary.sent.len(),
        summary.reviewed.len()
    );
    Ok(())
}

//! Fan out and merge: four independent fetches (0.25 s to 0.7 s each) run in parallel,
//! then a merge step combines them. The whole run takes about as long as the slowest
//! fetch, not the sum of all four.
//!
//! ```text
//! cargo run --example parallel_report
//! ```

use std::error::Error;

use examples::parallel_report::{self, Sources};
use examples::{fmt_duration, Log};

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("Weekly report (real time)\n");
    let summary = parallel_report::run(Sources::default(), &Log::stdout()).await?;
    println!();
    println!("fetch       start     end");
    for (name, start, end) in &summary.fetches {
        println!(
            "{name:<10} {:>6} {:>7}",
            fmt_duration(*start),
            fmt_duration(*end)
        );
    }
    println!();
    println!("Report for {}:", summary.report.week);
    for line in &summary.report.lines {
        println!("  {line}");
    }
    println!();
    println!(
        "elapsed {} ~ the slowest fetch ({} {}), not the sum ({})",
        fmt_duration(summary.elapsed),
        summary.slowest.0,
        fmt_duration(summary.slowest.1),
        fmt_duration(summary.sequential)
    );
    Ok(())
}

//! A weekly report from a dashboard without an API, in headless Chromium: log in, download
//! the CSV export (retried after a 503, without logging in again), parse it, have a person
//! review the anomalies, publish it through the dashboard's form.
//!
//! The dashboard is served locally; artifacts (the download, and the screenshot and HTML
//! of the failed attempt) go to `target/dashboard_report/`. Needs Debian's `chromium` and
//! `chromium-driver`.
//!
//! ```text
//! cargo run --example dashboard_report --features browser
//! ```

use std::error::Error;
use std::path::PathBuf;

use examples::dashboard_report::{self, serve_dashboard};
use examples::Log;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("Weekly dashboard report (headless Chromium)\n");
    let dashboard = serve_dashboard().await?;
    println!("dashboard on {}\n", dashboard.url());
    let artifacts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/dashboard_report");
    let summary = dashboard_report::run(&dashboard, artifacts, &Log::stdout()).await?;
    println!();
    println!(
        "{}: downloaded {} ({} bytes, sha256 {}) in {} attempt(s), {} login(s)",
        summary.run,
        summary.report.path.display(),
        summary.report.bytes,
        summary.report.sha256,
        summary.fetch_attempts,
        summary.logins
    );
    println!("total revenue {}", summary.figures.total);
    for anomaly in &summary.figures.anomalies {
        println!("anomaly: {anomaly}");
    }
    match &summary.published {
        Some(published) => println!(
            "approved by {} and published as {}",
            summary.review.by, published.id
        ),
        None => println!("rejected by {}: not published", summary.review.by),
    }
    Ok(())
}

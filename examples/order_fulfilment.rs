//! Map, child workflow and event together: an order of ten lines is reserved line by line
//! (four at a time, each reservation keyed on its own), shipped by a child workflow run,
//! and waits for the payment provider's confirmation, which arrives before the run waits
//! for it and is kept in the run's inbox. On a SQLite file.
//!
//! ```text
//! cargo run --example order_fulfilment                # store: target/order_fulfilment.db
//! cargo run --example order_fulfilment -- my.db
//! ```
//!
//! The start is keyed by the order id: run it again and it finds the same run.

use std::error::Error;
use std::path::PathBuf;

use examples::order_fulfilment::{self, Fulfil};
use examples::Log;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let store = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/order_fulfilment.db"));
    println!("The Fulfil workflow (Fulfil::MERMAID):\n");
    println!("{}\n", Fulfil::MERMAID.trim_end());
    let summary = order_fulfilment::run(store, 10, &Log::stdout()).await?;
    println!(
        "\n{} reservations, one per line, each under its own key:",
        summary.reservations.len()
    );
    for key in &summary.reservations {
        println!("  {key}");
    }
    println!(
        "\nInspect it: cargo run -p workflow-cli -- runs show {} --store {}",
        summary.run,
        summary.store.display()
    );
    Ok(())
}

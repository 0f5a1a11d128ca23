//! A saga that fails and undoes itself: reserve inventory, charge the payment, ship.
//! The carrier rejects the address (a permanent error: one attempt, no retry), so the run
//! aborts and the compensations of the completed steps run in reverse order (refund, then
//! release), and the run is recorded as a dead letter for an operator.
//!
//! ```text
//! cargo run --example order_saga
//! ```

use std::error::Error;

use examples::order_saga;
use examples::Log;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    println!("Order saga\n");
    let summary = order_saga::run(&Log::stdout()).await?;
    println!();
    println!("The order failed: {}", summary.error);
    println!(
        "compensated, in order: {}",
        summary.compensated.join(" -> ")
    );
    match &summary.dead_letter {
        Some(letter) => {
            println!("dead letter:");
            println!("  run:      {} ({})", letter.run, letter.workflow);
            println!(
                "  step:     {} after {} attempt(s)",
                letter.step, letter.attempts
            );
            println!("  error:    {}: {}", letter.kind, letter.message);
            println!("  trace id: {}", letter.trace_id);
        }
        None => println!("no dead letter was recorded"),
    }
    Ok(())
}

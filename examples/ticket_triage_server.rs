//! The ticket triage behind `workflow-server`: webhook intake verified before any parse,
//! the approval inbox, the JSON API, on a SQLite file.
//!
//! ```text
//! cargo run --example ticket_triage_server --features server # listens on 127.0.0.1:8080
//! cargo run --example ticket_triage_server --features server -- 127.0.0.1:9000
//! ```
//!
//! It prints a `curl` line that delivers a correctly signed webhook (201, then 200 with the
//! same run when sent again) and one with a forged signature (401, nothing journaled), and
//! where the lead's inbox is. Stop it with Ctrl-C; the runs stay in the store file.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;

use examples::ticket_server;
use examples::ticket_triage::AlertService;
use examples::Log;
use workflow::prelude::*;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let listen: SocketAddr = match std::env::args().nth(1) {
        Some(addr) => addr.parse()?,
        None => "127.0.0.1:8080".parse()?,
    };
    let db = std::env::temp_dir().join("ticket_triage_server.db");
    let engine = Engine::builder().store(SqliteStore::open(&db)?).build();
    let router = ticket_server::router(&engine, Arc::new(AlertService::default()), &Log::stdout())?;
    engine.resume_all().await?;
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let now = (engine.now() / 1000) as i64;

    println!(
        "Ticket triage server on http://{addr} (store {})\n",
        db.display()
    );
    println!("A correctly signed delivery (201; again within 5 minutes: 200, the same run):");
    println!("  {}\n", ticket_server::curl(addr, "evt_884", now, false));
    println!("A forged one (401, nothing journaled):");
    println!("  {}\n", ticket_server::curl(addr, "evt_885", now, true));
    println!("The lead's inbox (a reverse proxy would set the header):");
    println!("  curl -H 'X-Forwarded-User: lee@support_leads' http://{addr}/inbox");
    println!("Runs: curl -H 'X-Forwarded-User: lee@support_leads' http://{addr}/api/runs\n");

    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

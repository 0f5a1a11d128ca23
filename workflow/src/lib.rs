//! Typed workflows, checked at compile time and run by a small durable tokio runtime.
//!
//! This is the crate an application depends on. It re-exports the whole of
//! `workflow-core` (the `workflow!` macro, the engine, the `Store` trait and the memory
//! store) and, by feature, the stores and the front doors:
//!
//! | feature | what it adds | crate |
//! |---|---|---|
//! | `sqlite` (default) | [`SqliteStore`]: one SQLite file | `workflow-sqlite` |
//! | `postgres` | `PgStore`: many engine processes on one PostgreSQL database | `workflow-postgres` |
//! | `server` | `workflow::server`: webhook intake, JSON API, console, metrics | `workflow-server` |
//! | `browser` | `workflow::browser`: browser steps in headless Chromium | `workflow-browser` |
//! | `otel` | each run's spans continue its journaled trace in OpenTelemetry | `workflow-core` |
//! | `test-util` | `workflow::testing`: workflows under paused time | `workflow-core` |
//!
//! ```
//! use workflow::prelude::*;
//!
//! async fn greet(name: String) -> Result<String, StepError> {
//!     Ok(format!("hello, {name}"))
//! }
//!
//! workflow! {
//!     workflow Hello(name: String) {
//!         step greet -> String {
//!             action: greet(name)
//!         }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("workflow-facade-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let engine = Engine::builder().store(SqliteStore::open(dir.join("runs.db"))?).build();
//! engine.register::<Hello>(())?;
//! let run = engine.start::<Hello>(HelloInput { name: "Ada".into() }).await?;
//! let outputs = run.outputs().await?;
//! assert_eq!(outputs.greet, "hello, Ada");
//! # drop(engine);
//! # let _ = std::fs::remove_dir_all(&dir);
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

pub use workflow_core::*;

pub mod guide;

/// The SQLite store (the `workflow-sqlite` crate; feature `sqlite`, on by default).
#[cfg(feature = "sqlite")]
pub use workflow_sqlite as sqlite;
#[cfg(feature = "sqlite")]
pub use workflow_sqlite::{SqliteOptions, SqliteStore, Synchronous, rusqlite};

/// The PostgreSQL store (the `workflow-postgres` crate; feature `postgres`).
#[cfg(feature = "postgres")]
pub use workflow_postgres as postgres;
#[cfg(feature = "postgres")]
pub use workflow_postgres::{PgOptions, PgStore};

/// The HTTP front door (the `workflow-server` crate; feature `server`).
#[cfg(feature = "server")]
pub use workflow_server as server;

/// Browser steps (the `workflow-browser` crate; feature `browser`).
#[cfg(feature = "browser")]
pub use workflow_browser as browser;

/// The usual imports: `use workflow::prelude::*;`.
pub mod prelude {
    pub use workflow_core::prelude::*;
    #[cfg(feature = "sqlite")]
    pub use workflow_sqlite::SqliteStore;
}

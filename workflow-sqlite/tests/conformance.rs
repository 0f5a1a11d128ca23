//! The `Store` conformance suite against the SQLite store: a fresh file per check, damaged
//! through a second connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use workflow_conformance as conformance;
use workflow_sqlite::{SqliteOptions, Synchronous};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_store_conforms() {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "workflow-conformance-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let files = Arc::new(AtomicU64::new(0));
    let base = dir.clone();
    conformance::run(move || {
        let path = base.join(format!(
            "store-{}.db",
            files.fetch_add(1, Ordering::Relaxed)
        ));
        async move {
            let options = SqliteOptions {
                synchronous: Synchronous::Off,
                ..SqliteOptions::default()
            };
            workflow_sqlite::testing::subject(path, options).expect("open a fresh store")
        }
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

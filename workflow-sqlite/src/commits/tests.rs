//! The order the writer thread writes in: ordinary requests before maintenance queued
//! earlier, and maintenance still written while ordinary requests keep arriving. The
//! writer's loop runs on the test's own thread, so the order is the queue's, not timing's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::OpenFlags;
use tokio::sync::oneshot;

use super::{Commits, MAINTENANCE_AFTER};
use crate::schema::Db;
use crate::writer::{Job, Request, Step, Steps, Writer};
use crate::Synchronous;
use workflow_core::store::StoreError;

type Log = Arc<Mutex<Vec<String>>>;

/// Commits on a fresh file, and the log its requests write their names to.
fn commits(name: &str) -> (Arc<Commits>, Log, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("commits-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
    let db = Db::open(&dir.join("store.db"), name, flags, Duration::from_secs(5)).expect("open");
    let writer = Writer::new(db, Duration::from_secs(5), Synchronous::Full);
    (Arc::new(Commits::new(writer, 512)), Log::default(), dir)
}

/// An ordinary request that logs `name`; while `more` says so, it queues another one
/// (named `name` and a number) as it is written: ordinary writes that never stop coming.
fn ordinary(
    commits: &Arc<Commits>,
    log: &Log,
    name: String,
    more: Arc<dyn Fn(usize) -> bool + Send + Sync>,
    n: usize,
) -> (Box<dyn Job>, oneshot::Receiver<Result<(), StoreError>>) {
    let (reply, answer) = oneshot::channel();
    let (commits, log) = (Arc::clone(commits), Arc::clone(log));
    let work = move |_: &Writer| -> Result<((), u64), StoreError> {
        log.lock().unwrap().push(format!("{name}{n}"));
        if more(n) {
            let (next, _) = ordinary(&commits, &log, name, more, n + 1);
            assert!(commits.push(next));
        }
        Ok(((), 0))
    };
    let job = Request::new(work, reply);
    (Box::new(job), answer)
}

/// A maintenance request of `steps` steps, each logging `name` and its number.
fn maintenance(
    log: &Log,
    name: &'static str,
    steps: usize,
) -> (Box<dyn Job>, oneshot::Receiver<Result<usize, StoreError>>) {
    let (reply, answer) = oneshot::channel();
    let log = Arc::clone(log);
    let mut done = 0;
    let work = move |_: &Writer| -> Result<Step<usize>, StoreError> {
        done += 1;
        log.lock().unwrap().push(format!("{name}{done}"));
        Ok(match done == steps {
            true => Step::Done(done, 0),
            false => Step::More(0),
        })
    };
    let job = Steps::new(work, reply);
    (Box::new(job), answer)
}

#[test]
fn an_ordinary_write_queued_after_maintenance_is_written_first() {
    let (commits, log, dir) = commits("first");
    let never: Arc<dyn Fn(usize) -> bool + Send + Sync> = Arc::new(|_| false);
    let (purge, mut purged) = maintenance(&log, "purge", 3);
    let (vacuum, mut vacuumed) = maintenance(&log, "vacuum", 1);
    assert!(commits.push_maintenance(purge));
    assert!(commits.push_maintenance(vacuum));
    let (first, mut written) = ordinary(&commits, &log, "commit".into(), Arc::clone(&never), 1);
    assert!(commits.push(first));
    let (second, _) = ordinary(&commits, &log, "commit".into(), never, 2);
    assert!(commits.push(second));
    // The maintenance handed the lead to the writer thread (none runs here): the test's
    // thread leads instead, as that thread would.
    commits.lead_until_empty();
    assert_eq!(
        *log.lock().unwrap(),
        ["commit1", "commit2", "purge1", "purge2", "purge3", "vacuum1"]
    );
    assert!(matches!(written.try_recv(), Ok(Ok(()))));
    assert!(matches!(purged.try_recv(), Ok(Ok(3))));
    assert!(matches!(vacuumed.try_recv(), Ok(Ok(1))));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn maintenance_is_written_while_ordinary_writes_keep_coming() {
    let (commits, log, dir) = commits("starve");
    let (purge, mut purged) = maintenance(&log, "purge", 3);
    assert!(commits.push_maintenance(purge));
    // Each ordinary write queues the next until the purge is done (or, if it starved,
    // until a thousand were written).
    let busy = {
        let log = Arc::clone(&log);
        move |n: usize| n < 1000 && !log.lock().unwrap().iter().any(|l| l == "purge3")
    };
    let (first, _) = ordinary(&commits, &log, "commit".into(), Arc::new(busy), 1);
    assert!(commits.push(first));
    commits.lead_until_empty();
    assert!(matches!(purged.try_recv(), Ok(Ok(3))));
    let log = log.lock().unwrap();
    let steps: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("purge"))
        .map(|(at, _)| at)
        .collect();
    // One ordinary write per batch here (each is queued while the one before is
    // written): each step waits for MAINTENANCE_AFTER of them, no more.
    let every = MAINTENANCE_AFTER + 1;
    assert_eq!(steps, [every - 1, 2 * every - 1, 3 * every - 1], "{log:?}");
    // The ordinary write queued during the last step's wait is still written.
    assert_eq!(log.len(), 3 * every + 1, "{log:?}");
    let _ = std::fs::remove_dir_all(dir);
}

//! The store's connections: open connections on a stack, taken by the task that sends a
//! statement and put back by that task when it is done with them. Nothing else runs in
//! between: no task is spawned to give a connection back and no ping is sent on the way,
//! so a statement costs the server's round trip and nothing more.
//!
//! A connection put back with a request half written (its task stopped waiting
//! mid-flight) is closed instead; one put back with answers still to come is ready again
//! once the client has read them, which it does before its next statement. After a
//! connection broke, [`Conns::forget_idle`] closes every idle one (the server that broke
//! one has likely broken all), and connections out at that moment are closed when put
//! back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sqlx::{Connection, PgConnection};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::hosts::Hosts;

/// At most `max` connections, opened when first needed.
#[derive(Debug)]
pub(super) struct Conns {
    /// The servers, and which one is writable.
    pub(super) hosts: Arc<Hosts>,
    idle: Mutex<Vec<PgConnection>>,
    permits: Semaphore,
    wait: Duration,
    /// Bumped by [`Conns::forget_idle`]: a connection taken out before is not put back.
    generation: AtomicU64,
}

/// A connection taken from [`Conns`], put back when dropped.
pub(super) struct Conn<'p> {
    conn: Option<PgConnection>,
    conns: &'p Conns,
    generation: u64,
    _permit: SemaphorePermit<'p>,
}

impl Conns {
    /// Up to `max` connections to the writable one of `hosts`; taking one waits at most
    /// `wait`.
    pub(super) fn new(hosts: Arc<Hosts>, max: u32, wait: Duration) -> Conns {
        Conns {
            hosts,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(max.max(1) as usize),
            wait,
            generation: AtomicU64::new(0),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<PgConnection>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, or a new one when none is idle; waits for one to be put back
    /// when all are out.
    pub(super) async fn take(&self) -> Result<Conn<'_>, sqlx::Error> {
        let permit = match tokio::time::timeout(self.wait, self.permits.acquire()).await {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(sqlx::Error::PoolClosed),
            Err(_) => return Err(sqlx::Error::PoolTimedOut),
        };
        let generation = self.generation.load(Ordering::Acquire);
        let idle = self.idle().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => tokio::time::timeout(self.wait, self.hosts.open(self.wait))
                .await
                .map_err(|_| sqlx::Error::PoolTimedOut)??,
        };
        Ok(Conn {
            conn: Some(conn),
            conns: self,
            generation,
            _permit: permit,
        })
    }

    /// Closes the idle connections, and the ones out now when they are put back.
    pub(super) fn forget_idle(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let idle = std::mem::take(&mut *self.idle());
        drop(idle);
    }
}

impl std::ops::Deref for Conn<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("a connection until dropped")
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("a connection until dropped")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let current = self.conns.generation.load(Ordering::Acquire) == self.generation;
        // Bytes of a request still unsent: the task stopped in the middle of writing it.
        if current && !conn.should_flush() {
            self.conns.idle().push(conn);
        }
    }
}

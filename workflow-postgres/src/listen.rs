//! `LISTEN/NOTIFY`: the store's writes that other workers should act on at once (a
//! message in an inbox, a run anyone may claim) notify the store's channel; every store
//! listens on it and bumps its wake signal, which the engine's poller waits on beside its
//! timer. A lost notification only delays: the poller polls anyway. A commit to a
//! watched run notifies too (`commit <id>`); that goes to the run's watchers only.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::watch;

use super::workers::Watchers;

/// The longest pause between two attempts to listen again after the connection broke.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Listens on `channel` until the task is aborted, reconnecting whenever the connection
/// breaks (through a pool `pools` makes then: on the writable server). Every
/// notification but a commit's, and every (re)connection (something may have been missed
/// meanwhile), bumps `wake`; a commit's bumps its run's `watchers`, a (re)connection all
/// of them.
pub(super) async fn listen<F: std::future::Future<Output = PgPool>>(
    pools: impl Fn() -> F,
    channel: String,
    wake: watch::Sender<u64>,
    watchers: Arc<Watchers>,
) {
    let bump = |wake: &watch::Sender<u64>| wake.send_modify(|n| *n = n.wrapping_add(1));
    let mut backoff = Duration::from_millis(100);
    loop {
        // A pool on the server the store found writable last (after a failover, the
        // promoted one).
        let pool = pools().await;
        match PgListener::connect_with(&pool).await {
            Ok(mut listener) => match listener.listen(&channel).await {
                Ok(()) => {
                    tracing::debug!(channel = channel.as_str(), "listening for wake-ups");
                    backoff = Duration::from_millis(100);
                    bump(&wake);
                    watchers.all();
                    loop {
                        match listener.try_recv().await {
                            Ok(Some(notification)) => {
                                if !watchers.heard(notification.payload()) {
                                    bump(&wake);
                                }
                            }
                            // The connection broke and was made again (and LISTEN re-sent):
                            // whatever was notified meanwhile is lost, so look now.
                            Ok(None) => {
                                bump(&wake);
                                watchers.all();
                            }
                            Err(error) => {
                                tracing::warn!(error = %error, "the wake-up listener lost its connection");
                                break;
                            }
                        }
                    }
                }
                Err(error) => tracing::warn!(error = %error, "cannot LISTEN for wake-ups"),
            },
            Err(error) => tracing::debug!(error = %error, "cannot connect to listen for wake-ups"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

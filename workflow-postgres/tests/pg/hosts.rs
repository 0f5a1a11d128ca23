//! Several hosts in one URL, and a step's lease end on the server's clock.

use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, Row};
use workflow_core::prelude::*;
use workflow_core::store::{Store, StoreError};
use workflow_postgres::testing::{self as pg_testing, Schema};
use workflow_postgres::{PgOptions, PgStore};

use super::create;

/// `url` with a host nobody listens on named first.
fn with_dead_host_first(url: &str) -> String {
    match url.find('@') {
        Some(at) => format!("{}127.0.0.1:1,{}", &url[..=at], &url[at + 1..]),
        None => url.replacen("://", "://127.0.0.1:1,", 1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_naming_several_hosts_connects_to_the_one_that_answers() {
    let Some(url) =
        pg_testing::server("a_url_naming_several_hosts_connects_to_the_one_that_answers").await
    else {
        return;
    };
    let schema = Schema::new(&url, "hosts");
    let both = format!(
        "{}{}target_session_attrs=read-write",
        with_dead_host_first(&url),
        if url.contains('?') { '&' } else { '?' }
    );
    let options = PgOptions {
        connect_timeout: Duration::from_secs(3),
        ..schema.options()
    };
    let store = PgStore::connect_with(&both, options.clone())
        .await
        .expect("the second host answers");
    assert!(
        store.target().starts_with("127.0.0.1:1,"),
        "{}",
        store.target()
    );
    let run = create(&store, None).await.id();
    assert!(store.load(run).await.unwrap().is_some());
    // The same as a list.
    let listed = PgStore::connect_any(
        &[&with_dead_host_first(&url)[..], url.as_str()],
        options.clone(),
    )
    .await
    .expect("a list of URLs");
    assert!(listed.load(run).await.unwrap().is_some());
    // A standby is never asked for: target_session_attrs other than a writable server's
    // are refused.
    let standby = PgStore::connect_with(
        &format!(
            "{url}{}target_session_attrs=standby",
            if url.contains('?') { '&' } else { '?' }
        ),
        options,
    )
    .await;
    assert!(
        matches!(&standby, Err(StoreError::Io(m)) if m.contains("target_session_attrs")),
        "{standby:?}"
    );
    // Nothing answers: every host is named, no password.
    let error = PgStore::connect_with(
        "postgres://ana:s3cret@127.0.0.1:1,127.0.0.1:2/orders",
        PgOptions {
            connect_timeout: Duration::from_millis(600),
            ..PgOptions::default()
        },
    )
    .await
    .expect_err("nothing listens");
    let StoreError::Unreachable { target, .. } = &error else {
        panic!("expected Unreachable, got {error:?}");
    };
    assert_eq!(target, "127.0.0.1:1,127.0.0.1:2/orders");
    assert!(!format!("{error:?}").contains("s3cret"));
    drop((store, listed));
    schema.drop().await;
}

/// What the step saw of its lease, in order.
#[derive(Default)]
pub struct Seen(Mutex<Vec<Option<u64>>>);

mod lease {
    use super::*;

    pub async fn hold(seen: &Arc<Seen>, ctx: &StepContext) -> Result<u64, StepError> {
        seen.0.lock().unwrap().push(ctx.valid_until());
        // Two renewals (every second) while the step runs.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        seen.0.lock().unwrap().push(ctx.valid_until());
        tokio::time::sleep(Duration::from_millis(400)).await;
        Ok(1)
    }
}

workflow! {
    /// One step that watches its lease.
    pub workflow Watch(n: u64) env Arc<Seen> {
        step hold -> u64 { action: lease::hold(env, ctx) }
    }
}

/// The run's lease end as the server keeps it, in ms since the epoch.
async fn lease_until(schema: &Schema, url: &str) -> Option<i64> {
    let mut conn = PgConnectOptions::from_str(url)
        .unwrap()
        .options([("search_path", schema.name())])
        .connect()
        .await
        .unwrap();
    let row =
        sqlx::query("SELECT (extract(epoch FROM lease_until) * 1000)::bigint FROM runs LIMIT 1")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let _ = conn.close().await;
    row.try_get(0).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steps_valid_until_is_the_servers_lease_end_and_moves_with_renewals() {
    let Some(url) =
        pg_testing::server("a_steps_valid_until_is_the_servers_lease_end_and_moves_with_renewals")
            .await
    else {
        return;
    };
    let schema = Schema::new(&url, "valid_until");
    let engine = Engine::builder()
        .store(schema.store().await)
        .lease(Duration::from_secs(3))
        .build();
    let seen = Arc::new(Seen::default());
    engine.register::<Watch>(Arc::clone(&seen)).unwrap();
    let run = engine.start::<Watch>(WatchInput { n: 1 }).await.unwrap();
    let wait = |count: usize| {
        let seen = Arc::clone(&seen);
        async move {
            for _ in 0..1_000 {
                if seen.0.lock().unwrap().len() >= count {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the step never got that far");
        }
    };
    wait(1).await;
    let first_server = lease_until(&schema, &url).await.expect("a lease");
    wait(2).await;
    let second_server = lease_until(&schema, &url).await.expect("a lease");
    let seen = seen.0.lock().unwrap().clone();
    let (first, second) = (
        seen[0].expect("a lease end") as i64,
        seen[1].expect("a lease end") as i64,
    );
    // Never after the lease the server granted, and close to it (the claim or renewal
    // was sent at most a round trip, or one renewal period, before the server set it).
    assert!(first <= first_server, "{first} > {first_server}");
    assert!(first_server - first < 1_500, "{first} vs {first_server}");
    assert!(second <= second_server, "{second} > {second_server}");
    assert!(
        second_server - second < 1_500,
        "{second} vs {second_server}"
    );
    assert!(
        second - first >= 1_500,
        "renewals moved it: {first} then {second}"
    );
    run.outputs().await.expect("completes");
    schema.drop().await;
}

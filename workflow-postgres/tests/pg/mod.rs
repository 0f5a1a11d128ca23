//! What only a database shared by many processes has to show.

mod checksums;
mod engine;
mod faults;
mod functions;
mod group;
mod hosts;
mod leases;
mod lengths;
mod queue_migrate;
mod schedules;
mod schedules_migrate;
mod tasks;
mod watch;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use workflow_core::journal::{Event, Timestamp};
use workflow_core::store::{Claim, Claimant, NewRun, Store};
use workflow_core::RunId;

pub(crate) fn wall_clock() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn started(at: Timestamp) -> Event {
    Event::RunStarted {
        workflow: "onboard".to_owned(),
        fingerprint: "fp1".to_owned(),
        input: json!({ "user": "ada" }),
        seed: 1,
        trace_id: "t".to_owned(),
        parent_span: None,
        dry_run: false,
        deadline: None,
        at,
    }
}

/// Creates an unowned run of `onboard`, with an idempotency key when given.
pub(crate) async fn create(store: &dyn Store, key: Option<&str>) -> workflow_core::store::Created {
    let events = [started(1_000)];
    store
        .create_run(NewRun {
            workflow: "onboard",
            fingerprint: "fp1",
            idempotency_key: key,
            events: &events,
            parent: None,
            owner: None,
            supersedes: None,
            at: 1_000,
            search: &[],
        })
        .await
        .expect("create a run")
}

pub(crate) fn claimant(owner: &str, lease_ms: u64, now: Timestamp) -> Claimant<'_> {
    Claimant {
        owner,
        lease_ms,
        now,
    }
}

pub(crate) fn claim_all<'a>(claimant: Claimant<'a>, run: Option<RunId>) -> Claim<'a> {
    Claim {
        claimant,
        workflows: &["onboard"],
        run,
        reclaim_own: false,
        limit: None,
        claimable: workflow_core::store::Claimable::Any,
        versions: None,
    }
}

//! The [`Store`] conformance suite: every promise of the trait's documentation, written
//! once and run against any store, through one entry point, [`run`].
//!
//! A store proves itself by running the suite from one of its tests, with a factory that
//! opens a fresh, empty store for each check:
//!
//! ```no_run
//! use workflow_conformance::Subject;
//!
//! # async fn demo() {
//! workflow_conformance::run(|| async { Subject::memory() }).await;
//! # }
//! ```
//!
//! A store of another crate gives its store and a way to damage one of its journal
//! entries ([`Subject::new`]); the suite knows nothing else of it.
//!
//! Each check gets a fresh, empty store from the factory, as a [`Subject`]: the store and
//! a way to damage one stored journal entry the way a bad disk would, so the suite can
//! check that every store reports damage instead of reading it back. Checks that need a
//! lease to lapse wait a few milliseconds of real time, so stores that keep time by their
//! own clock (a database server) pass the same checks as stores that use the caller's.
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod batches;
mod damage;
mod inbox;
mod lengths;
mod limits;
mod owners;
mod runs;
mod schedules;
mod schedules_due;
mod search;
mod subject;
mod tasks;
mod workers;

pub use subject::{DamageEntry, Subject};

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;

use workflow_core::journal::{Event, Timestamp};
use workflow_core::store::{
    Claim, Claimable, Claimant, Commit, Created, DeadLetter, DeadLetterChange, Fence, Message,
    NewRun, RunFilter, RunStatus, Store, StoreError, Submitted,
};
use workflow_core::BoxFuture;
use workflow_core::{ErrorKind, RunId};

/// One check: it panics when the store breaks a promise.
pub type Check = fn(Subject) -> BoxFuture<'static, ()>;

/// Every check, by name.
pub const CHECKS: &[(&str, Check)] = &[
    ("a created run loads back", |s| {
        Box::pin(runs::created_runs_load_back(s.store))
    }),
    ("several runs load at once, in the order asked", |s| {
        Box::pin(runs::several_runs_load_at_once(s.store))
    }),
    ("idempotency keys name one run per workflow", |s| {
        Box::pin(runs::idempotency_keys(s.store))
    }),
    ("a batch creates each run as create_run would", |s| {
        Box::pin(batches::a_batch_creates_each_run_as_one_by_one(s.store))
    }),
    ("keys name one run inside and across batches", |s| {
        Box::pin(batches::keys_name_one_run_inside_and_across_batches(
            s.store,
        ))
    }),
    ("a failing batch creates nothing", |s| {
        Box::pin(batches::a_failing_batch_creates_nothing(s.store))
    }),
    ("commits append at the expected length only", |s| {
        Box::pin(runs::commits_append_in_order(s.store))
    }),
    ("a refused commit writes nothing", |s| {
        Box::pin(runs::refused_commits_write_nothing(s.store))
    }),
    ("a stale token's commit is refused whole", |s| {
        Box::pin(lengths::a_stale_tokens_commit_is_refused_whole(s.store))
    }),
    ("a commit after a gap is refused", |s| {
        Box::pin(lengths::a_commit_after_a_gap_is_refused(s.store))
    }),
    ("a status change is checked against the journal", |s| {
        Box::pin(lengths::a_status_change_is_checked_against_the_journal(
            s.store,
        ))
    }),
    ("a released run with steps is begun, not queued", |s| {
        Box::pin(lengths::a_released_run_is_begun(s.store))
    }),
    ("statuses, notes and dead letters", |s| {
        Box::pin(runs::statuses_and_dead_letters(s.store))
    }),
    ("runs are filtered and paged newest first", |s| {
        Box::pin(runs::runs_are_filtered_and_paged(s.store))
    }),
    ("claims honour owners", |s| {
        Box::pin(owners::claims_honour_owners(s.store))
    }),
    ("a lapsed lease is taken over and its owner fenced", |s| {
        Box::pin(owners::lapsed_leases_are_taken_over(s.store))
    }),
    ("renewed leases hold and released runs are free", |s| {
        Box::pin(owners::renew_and_release(s.store))
    }),
    (
        "heartbeats record their worker; a release of all its runs stops it",
        |s| Box::pin(workers::heartbeats_record_their_worker(s.store)),
    ),
    ("a run created claimed is its creator's", |s| {
        Box::pin(owners::created_claimed(s.store))
    }),
    ("finishing releases the owner", |s| {
        Box::pin(owners::finishing_releases(s.store))
    }),
    (
        "claims take queued or begun runs as asked, oldest first",
        |s| Box::pin(owners::claims_by_ownership(s.store)),
    ),
    ("the inbox keeps messages in order, once per key", |s| {
        Box::pin(inbox::inbox_in_order(s.store))
    }),
    ("taken-in messages are no longer pending", |s| {
        Box::pin(inbox::pending_inbox(s.store))
    }),
    ("a commit can say whether the inbox holds messages", |s| {
        Box::pin(inbox::commit_peeks_at_the_inbox(s.store))
    }),
    ("specs are written once, registrations noted", |s| {
        Box::pin(inbox::specs_and_registrations(s.store))
    }),
    ("a restart supersedes a parked run atomically", |s| {
        Box::pin(runs::supersede_parked(s.store))
    }),
    ("a written store verifies clean", |s| {
        Box::pin(inbox::a_written_store_verifies_clean(s.store))
    }),
    ("every journal event round-trips", |s| {
        Box::pin(runs::events_round_trip(s.store))
    }),
    (
        "schedule rows keep a definition apart from its state",
        |s| Box::pin(schedules::schedule_rows(s.store)),
    ),
    ("one compare-and-set of a schedule wins", |s| {
        Box::pin(schedules::one_compare_and_set_wins(s.store))
    }),
    ("missed ticks are recorded with the change that wins", |s| {
        Box::pin(schedules::missed_ticks_go_with_the_winning_change(s.store))
    }),
    ("a pass takes only due schedule rows", |s| {
        Box::pin(schedules_due::only_due_rows_are_taken(s.store))
    }),
    ("two workers never decide the same schedule row", |s| {
        Box::pin(schedules_due::two_workers_never_decide_the_same_row(
            s.store,
        ))
    }),
    (
        "a batch of schedule changes applies each under its version",
        |s| Box::pin(schedules_due::a_batch_of_changes_applies_each_under_its_version(s.store)),
    ),
    ("runs are found by their search values", |s| {
        Box::pin(search::runs_are_found_by_search_values(s.store))
    }),
    (
        "every combination of the listing's filters lists what it names",
        |s| {
            Box::pin(search::every_filter_combination_lists_what_it_names(
                s.store,
            ))
        },
    ),
    ("purges take finished runs whole", |s| {
        Box::pin(search::purges_take_finished_runs_whole(s.store))
    }),
    ("a damaged journal entry is reported, never read", |s| {
        Box::pin(damage::a_damaged_entry_is_reported(s))
    }),
    ("open tasks are indexed with their entries", |s| {
        Box::pin(tasks::tasks_are_indexed(s.store))
    }),
    ("a run that stops drops its open tasks", |s| {
        Box::pin(tasks::stopped_runs_drop_their_tasks(s.store))
    }),
    ("admission holds each key's limit, round robin", |s| {
        Box::pin(limits::admission_holds_each_key_limit(s.store))
    }),
    ("admission orders by priority, aged", |s| {
        Box::pin(limits::priority_orders_admission_and_ages(s.store))
    }),
    ("skip and cancel_previous are decided at admission", |s| {
        Box::pin(limits::skip_and_cancel_previous_are_decided_at_admission(
            s.store,
        ))
    }),
    ("a debounce keeps the latest start of a burst", |s| {
        Box::pin(limits::debounce_keeps_the_latest_start(s.store))
    }),
    ("a deep queue of one key hides no other key's runs", |s| {
        Box::pin(limits::a_deep_queue_hides_no_other_key(s.store))
    }),
    (
        "admissions racing over keys never take one past its limit",
        |s| Box::pin(limits::racing_admissions_hold_each_key_limit(s.store)),
    ),
    (
        "step slots count only under their run's current lease",
        |s| Box::pin(limits::slots_hold_their_limit_under_current_leases(s.store)),
    ),
    (
        "a slot and a rate token are taken together or not at all",
        |s| Box::pin(limits::rate_tokens_and_slots_are_taken_together(s.store)),
    ),
    ("rate buckets are listed by scope and key", |s| {
        Box::pin(limits::rate_buckets_are_listed_by_scope_and_key(s.store))
    }),
];

/// Runs every check, each on a fresh store from `make` (with its damage hook), and panics
/// naming every check that failed.
pub async fn run<F, Fut>(mut make: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Subject>,
{
    let mut failed = Vec::new();
    for (name, check) in CHECKS {
        let store = make().await;
        if let Err(error) = tokio::spawn(check(store)).await {
            let message = if error.is_panic() {
                let panic = error.into_panic();
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default()
            } else {
                error.to_string()
            };
            failed.push(format!("{name}: {message}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} conformance checks failed:\n{}",
        failed.len(),
        CHECKS.len(),
        failed.join("\n")
    );
}

fn wall_clock() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn started(workflow: &str, at: Timestamp) -> Event {
    Event::RunStarted {
        workflow: workflow.to_owned(),
        fingerprint: "fp1".to_owned(),
        input: json!({ "user": "ada", "tags": ["a", "b"] }),
        seed: 42,
        trace_id: "trace-1".to_owned(),
        parent_span: None,
        dry_run: false,
        deadline: Some(at + 60_000),
        at,
    }
}

fn attempt(step: usize, at: Timestamp) -> Event {
    Event::AttemptStarted {
        step,
        attempt: 1,
        at,
    }
}

fn new_run<'a>(workflow: &'a str, key: Option<&'a str>, events: &'a [Event]) -> NewRun<'a> {
    NewRun {
        workflow,
        fingerprint: "fp1",
        idempotency_key: key,
        events,
        parent: None,
        owner: None,
        supersedes: None,
        at: events.first().map_or(0, Event::at),
        search: &[],
    }
}

async fn create(store: &dyn Store, workflow: &str, key: Option<&str>) -> Created {
    let events = [started(workflow, 1_000)];
    store
        .create_run(new_run(workflow, key, &events))
        .await
        .expect("create a run")
}

async fn events_of(store: &dyn Store, run: RunId) -> Vec<Event> {
    store
        .load(run)
        .await
        .expect("load")
        .expect("the run exists")
        .events
}

fn claimant(owner: &str, lease_ms: u64) -> Claimant<'_> {
    Claimant {
        owner,
        lease_ms,
        now: wall_clock(),
    }
}

fn claim<'a>(claimant: Claimant<'a>, workflows: &'a [&'a str]) -> Claim<'a> {
    Claim {
        claimant,
        workflows,
        run: None,
        reclaim_own: false,
        limit: None,
        claimable: Claimable::Any,
        versions: None,
    }
}

fn letter(run: RunId) -> DeadLetter {
    DeadLetter {
        run,
        workflow: "onboard".to_owned(),
        step: "send_welcome_email".to_owned(),
        attempts: 3,
        kind: ErrorKind::Unavailable,
        message: "smtp down".to_owned(),
        trace_id: format!("trace-{}", run.0),
        at: 5_000,
    }
}

fn with_status(run: RunId, seq: u64, status: RunStatus, note: Option<&str>) -> Commit<'_> {
    Commit {
        status: Some((status, note)),
        ..Commit::events(run, seq, &[], 2_000)
    }
}

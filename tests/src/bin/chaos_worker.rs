//! One worker process of the chaos test: an engine on `PgStore` that resumes and takes
//! over runs, tries to start every run of the test (as every replica of a service would
//! get the same webhooks: the idempotency keys make one run of each), and then keeps
//! driving runs until it is killed.
//!
//! Every commit it makes under a fence is reported on stdout as it returns, so the test
//! can check that writes from a worker that lost its run were refused:
//! `W run owner token seq n` for an accepted commit of `n` entries at `seq`, and
//! `F run owner token` for a refused one.
//!
//! Usage: `chaos_worker URL SCHEMA RUNS LEASE_MS`.

use std::error::Error;
use std::io::Write;
use std::time::Duration;

use tests::chaos::{ChaosOrder, ChaosOrderInput, Ledger};
use tests::workers;
use workflow_core::journal::Timestamp;
use workflow_core::prelude::*;
use workflow_core::store::{
    Claim, Claimant, Commit, Created, DeadLetter, InboxItem, Lease, Message, NewRun, RunFilter,
    RunRecord, SpecRecord, Store, StoreError, StoredRun, Submitted,
};
use workflow_core::BoxFuture;
use workflow_postgres::PgStore;

/// `PgStore`, reporting the outcome of every fenced commit on stdout.
struct Reporting(PgStore);

fn report(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

impl Store for Reporting {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        self.0.create_run(run)
    }

    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let result = self.0.commit(commit).await;
            if let Some(fence) = commit.fence {
                match &result {
                    Ok(()) => report(format!(
                        "W {} {} {} {} {}",
                        commit.run.0,
                        fence.owner,
                        fence.token,
                        commit.seq,
                        commit.events.len()
                    )),
                    Err(StoreError::Fenced { .. }) => report(format!(
                        "F {} {} {}",
                        commit.run.0, fence.owner, fence.token
                    )),
                    Err(_) => {}
                }
            }
            result
        })
    }

    fn create_gated<'a>(
        &'a self,
        run: NewRun<'a>,
        gate: workflow_core::store::limits::Gate<'a>,
    ) -> BoxFuture<'a, Result<Created, StoreError>> {
        self.0.create_gated(run, gate)
    }

    fn admit<'a>(
        &'a self,
        admit: workflow_core::store::limits::Admit<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Admission, StoreError>> {
        self.0.admit(admit)
    }

    fn acquire_slot<'a>(
        &'a self,
        request: workflow_core::store::limits::SlotRequest<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Acquired, StoreError>> {
        self.0.acquire_slot(request)
    }

    fn release_slot<'a>(
        &'a self,
        run: RunId,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.release_slot(run, holder)
    }

    fn flow_of(
        &self,
        run: RunId,
    ) -> BoxFuture<'_, Result<workflow_core::store::limits::RunFlow, StoreError>> {
        self.0.flow_of(run)
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        self.0.load(run)
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        self.0.runs(filter)
    }

    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        self.0.claim(claim)
    }

    fn renew<'a>(
        &'a self,
        claimant: Claimant<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        self.0.renew(claimant)
    }

    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.release(owner, runs)
    }

    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>> {
        self.0.submit(run, message, key, at)
    }

    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>> {
        self.0.inbox(run, after)
    }

    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>> {
        self.0.pending_inbox(after)
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        self.0.dead_letters()
    }

    fn open_tasks(
        &self,
        filter: workflow_core::store::TaskFilter,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::OpenTask>, StoreError>> {
        self.0.open_tasks(filter)
    }

    fn task_counts(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::TaskCount>, StoreError>> {
        self.0.task_counts()
    }

    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_core::spec::Schedule,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<workflow_core::store::ScheduleRow, StoreError>> {
        self.0.put_schedule(id, workflow, schedule, at)
    }

    fn schedules(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::ScheduleRow>, StoreError>> {
        self.0.schedules()
    }

    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: workflow_core::store::ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.update_schedule(id, version, change)
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.delete_schedule(id)
    }

    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<workflow_core::store::MissedTicks>, StoreError>> {
        self.0.missed_ticks(id, limit)
    }

    fn purge(
        &self,
        filter: workflow_core::store::PurgeFilter,
    ) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        self.0.purge(filter)
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.put_spec(fingerprint, workflow, spec_json, at)
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        self.0.spec(fingerprint)
    }

    fn specs<'a>(
        &'a self,
        workflow: &'a str,
    ) -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>> {
        self.0.specs(workflow)
    }

    fn shared(&self) -> bool {
        true
    }

    fn multi_worker(&self) -> bool {
        true
    }

    fn clock_offset_ms(&self) -> i64 {
        self.0.clock_offset_ms()
    }

    fn wake_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        self.0.wake_signal()
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, schema, runs, lease_ms] = args.as_slice() else {
        return Err("usage: chaos_worker URL SCHEMA RUNS LEASE_MS".into());
    };
    let runs: u64 = runs.parse()?;
    let lease = Duration::from_millis(lease_ms.parse()?);
    let parent = workers::parent_pid();
    let store = tests::workers::pg_store(url, schema).await?;
    let ledger = Ledger::open(url, schema).await?;
    let engine = Engine::builder()
        .store(Reporting(store))
        .lease(lease)
        .build();
    engine.register::<ChaosOrder>(ledger)?;
    engine.resume_all().await?;
    for order in 0..runs {
        engine
            .start_with::<ChaosOrder>(
                ChaosOrderInput { order },
                StartOptions::key(format!("order-{order}")),
            )
            .await?;
    }
    report(format!("ready {}", engine.owner()));
    // Drive runs until killed; a worker whose test went away stops by itself.
    workers::serve_until_orphaned(parent, Duration::from_secs(900)).await;
    Ok(())
}

//! `--store postgres://…`: a [`PgStore`] connected on the first call, inside the runtime
//! the command runs on (its connections belong to that runtime, which exists only after
//! the store is chosen).

use tokio::sync::OnceCell;
use workflow_core::journal::Timestamp;
use workflow_core::store::{
    Claim, Claimant, Commit, Created, DeadLetter, Heartbeat, InboxItem, Lease, Message, NewRun,
    RunFilter, RunRecord, RunWatch, SpecRecord, Store, StoreError, StoredRun, Submitted,
    Verification, WorkerRow,
};
use workflow_core::{BoxFuture, RunId};
use workflow_postgres::PgStore;

/// Whether `--store` names a PostgreSQL database rather than a file.
pub fn is_url(store: &str) -> bool {
    store.starts_with("postgres://") || store.starts_with("postgresql://")
}

/// The URL without its password (`postgres://user:***@host/db`).
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// A PostgreSQL store opened on first use. Its schema is created or migrated then, as an
/// engine would; a newer schema or an unreachable server is the command's error.
pub struct LazyPgStore {
    url: String,
    store: OnceCell<PgStore>,
}

impl LazyPgStore {
    pub fn new(url: &str) -> Self {
        LazyPgStore {
            url: url.to_owned(),
            store: OnceCell::new(),
        }
    }

    async fn get(&self) -> Result<&PgStore, StoreError> {
        self.store
            .get_or_try_init(|| PgStore::connect(&self.url))
            .await
    }
}

impl Store for LazyPgStore {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        Box::pin(async move { self.get().await?.create_run(run).await })
    }

    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.get().await?.commit(commit).await })
    }

    fn commit_peeking<'a>(
        &'a self,
        commit: Commit<'a>,
        after: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move { self.get().await?.commit_peeking(commit, after).await })
    }

    fn create_gated<'a>(
        &'a self,
        run: NewRun<'a>,
        gate: workflow_core::store::limits::Gate<'a>,
    ) -> BoxFuture<'a, Result<Created, StoreError>> {
        Box::pin(async move { self.get().await?.create_gated(run, gate).await })
    }

    fn admit<'a>(
        &'a self,
        admit: workflow_core::store::limits::Admit<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Admission, StoreError>> {
        Box::pin(async move { self.get().await?.admit(admit).await })
    }

    fn acquire_slot<'a>(
        &'a self,
        request: workflow_core::store::limits::SlotRequest<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Acquired, StoreError>> {
        Box::pin(async move { self.get().await?.acquire_slot(request).await })
    }

    fn release_slot<'a>(
        &'a self,
        run: RunId,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.get().await?.release_slot(run, holder).await })
    }

    fn flow_of(
        &self,
        run: RunId,
    ) -> BoxFuture<'_, Result<workflow_core::store::limits::RunFlow, StoreError>> {
        Box::pin(async move { self.get().await?.flow_of(run).await })
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        Box::pin(async move { self.get().await?.load(run).await })
    }

    fn load_many<'a>(
        &'a self,
        runs: &'a [RunId],
    ) -> BoxFuture<'a, Result<Vec<StoredRun>, StoreError>> {
        Box::pin(async move { self.get().await?.load_many(runs).await })
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        Box::pin(async move { self.get().await?.runs(filter).await })
    }

    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        Box::pin(async move { self.get().await?.claim(claim).await })
    }

    fn renew<'a>(
        &'a self,
        claimant: Claimant<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        Box::pin(async move { self.get().await?.renew(claimant).await })
    }

    fn heartbeat<'a>(
        &'a self,
        beat: Heartbeat<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        Box::pin(async move { self.get().await?.heartbeat(beat).await })
    }

    fn workers(&self) -> BoxFuture<'_, Result<Vec<WorkerRow>, StoreError>> {
        Box::pin(async move { self.get().await?.workers().await })
    }

    fn watch(&self, run: RunId) -> BoxFuture<'_, Result<RunWatch, StoreError>> {
        Box::pin(async move { self.get().await?.watch(run).await })
    }

    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.get().await?.release(owner, runs).await })
    }

    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>> {
        Box::pin(async move { self.get().await?.submit(run, message, key, at).await })
    }

    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>> {
        Box::pin(async move { self.get().await?.inbox(run, after).await })
    }

    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>> {
        Box::pin(async move { self.get().await?.pending_inbox(after).await })
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        Box::pin(async move { self.get().await?.dead_letters().await })
    }

    fn open_tasks(
        &self,
        filter: workflow_core::store::TaskFilter,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::OpenTask>, StoreError>> {
        Box::pin(async move { self.get().await?.open_tasks(filter).await })
    }

    fn task_counts(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::TaskCount>, StoreError>> {
        Box::pin(async move { self.get().await?.task_counts().await })
    }

    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_core::spec::Schedule,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<workflow_core::store::ScheduleRow, StoreError>> {
        Box::pin(async move {
            self.get()
                .await?
                .put_schedule(id, workflow, schedule, at)
                .await
        })
    }

    fn schedules(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::ScheduleRow>, StoreError>> {
        Box::pin(async move { self.get().await?.schedules().await })
    }

    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: workflow_core::store::ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move { self.get().await?.update_schedule(id, version, change).await })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move { self.get().await?.delete_schedule(id).await })
    }

    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<workflow_core::store::MissedTicks>, StoreError>> {
        Box::pin(async move { self.get().await?.missed_ticks(id, limit).await })
    }

    fn purge(
        &self,
        filter: workflow_core::store::PurgeFilter,
    ) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        Box::pin(async move { self.get().await?.purge(filter).await })
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let store = self.get().await?;
            store.put_spec(fingerprint, workflow, spec_json, at).await
        })
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(async move { self.get().await?.spec(fingerprint).await })
    }

    fn specs<'a>(
        &'a self,
        workflow: &'a str,
    ) -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>> {
        Box::pin(async move { self.get().await?.specs(workflow).await })
    }

    fn verify(&self) -> BoxFuture<'_, Result<Verification, StoreError>> {
        Box::pin(async move { self.get().await?.verify().await })
    }

    fn shared(&self) -> bool {
        true
    }

    fn multi_worker(&self) -> bool {
        true
    }
}

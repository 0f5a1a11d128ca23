//! `PgStore`: the store for many engine processes on one PostgreSQL database. Its
//! documentation says what it guarantees; `connect` opens it, `sql` and
//! `schema` hold its statements and tables, `write` its creations and commits, `read` its
//! verified reads, `check` the checksums of a whole schema (computed at migration,
//! verified for `workflow check`), `known` the run rows it last saw, `listen` its
//! wake-ups.
#![deny(missing_docs)]
#![warn(missing_debug_implementations, rust_2018_idioms, unreachable_pub)]

mod admission;
mod batch;
mod check;
mod connect;
mod conns;
mod error;
mod functions;
mod group;
mod hosts;
mod known;
mod limits;
mod listen;
mod read;
mod schedules;
mod schema;
mod search;
mod slots;
mod sql;
mod tasks;
#[cfg(feature = "test-util")]
pub mod testing;
mod workers;
mod write;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use self::connect::PgOptions;
use self::connect::{open, Retry};
use self::error::Target;
use self::sql::{Answer, Failure};
use workflow_core::journal::Timestamp;
use workflow_core::store::{
    Claim, Claimant, Commit, Created, DeadLetter, Heartbeat, InboxItem, Lease, Message, NewRun,
    PurgeFilter, RunFilter, RunRecord, RunWatch, SpecRecord, Store, StoreError, StoredRun,
    Submitted, Verification, WorkerRow, WATCH_POLL,
};
use workflow_core::BoxFuture;
use workflow_core::RunId;

/// Runs, journals, inboxes, dead letters and specs in a PostgreSQL database, shared by any
/// number of engine processes. Open it inside a tokio runtime: its
/// connections and its listener belong to it.
///
/// - **Leases by the server's clock.** A claim takes runs with `FOR UPDATE SKIP LOCKED`
///   (two workers claiming at once never wait for or take the same run) and gives each a
///   lease that ends at the database's `now()` plus the lease: the workers' clocks play no
///   part. Engines renew their leases by heartbeats; a run whose lease lapsed is claimed by
///   the next worker that looks, with a new fencing token.
/// - **Fenced writes.** Every commit runs in one server-side function that locks the run's
///   row, checks owner, token and journal length, and appends, so a worker whose run was
///   taken over cannot write to it ([`StoreError::Fenced`]). The journal's length is the
///   journal's own (one past its last entry): a step's commit by the run's owner takes the
///   row's share lock (which a claim waits for) and inserts its entries, without writing
///   the row. The row's `journal_len` records the length whenever the row is written
///   anyway (a status change, an inbox cursor, a release) and at every lease renewal; a
///   journal shorter than it lost entries from its end, which a load, a status change, a
///   renewal (the lease is not renewed) and [`Store::verify`] report. Entries lost after
///   that record, from a running run, are found by the owner's next commit.
/// - **Group commit.** A commit alone is sent at once, by the task that makes it, on a
///   connection of the store's own (one round trip, a prepared statement). Commits of
///   different runs that are ready while others are on their way go to the server
///   together, in one statement and one transaction; each run is checked alone inside it,
///   so a fenced or conflicting commit fails alone and the others commit.
/// - **Uniqueness in the database.** Start idempotency keys, inbox keys (events) and the
///   inbox message each journal entry takes in are unique indexes: two workers that get the
///   same webhook create one run, and a message is taken in once.
/// - **Wake-ups.** Writes other workers should act on at once (a message in an inbox, a
///   run anyone may claim) `NOTIFY` the store's channel; every store listens on it and
///   exposes a [wake signal](Store::wake_signal) engines wait on. Polling stays the
///   backstop, so a lost notification delays and never loses.
/// - **Checksums.** Every row carries the CRC-32C the SQLite store computes for it
///   (`bigint` columns), written in the same statement as the row and verified on every
///   read: damage is [`StoreError::Corrupt`] or [`StoreError::CorruptRow`], never a
///   different value, and a failed read writes nothing. [`Store::verify`] checks a whole
///   schema in one snapshot.
/// - **Reconnects.** A broken connection is replaced and the operation retried for
///   [`PgOptions::retry_for`]. A write whose answer was lost with its connection is looked
///   up before it is sent again (a commit by its entries, a creation or claim by a nonce
///   it wrote), so nothing is lost or written twice.
/// - **Several servers.** A URL may name several hosts, as libpq writes it
///   (`postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write`), or
///   [`PgStore::connect_any`] take a list: the store connects to the writable one and finds
///   it again after a connection error or a read-only answer (a failover).
/// - **Fences that never go back.** A fencing token is the server's timeline id times 2^32
///   plus the run's claim count in that timeline: a promoted standby starts a higher
///   timeline, so a token handed out after a failover is above every token before it,
///   even when the failover lost the last claims. A lease of an older timeline is not
///   renewed (the run is claimed again under the new one within a lease), and run and
///   inbox ids never repeat after a failover.
/// - **Its clock.** Leases end by the server's clock; [`Store::clock_offset_ms`] reports
///   how far it is ahead of this process's (measured when a connection is made), so a
///   step's `valid_until` is on the server's clock.
/// - **Migrations** are embedded and versioned; a database written by a newer version of
///   this library is refused and left untouched.
///
/// ```no_run
/// # async fn demo() -> Result<(), workflow_core::store::StoreError> {
/// use workflow_postgres::PgStore;
/// use workflow_core::Engine;
///
/// let store = PgStore::connect("postgres://app@db.internal:5432/app").await?;
/// let engine = Engine::builder().store(store).build();
/// # Ok(()) }
/// ```
///
pub struct PgStore {
    conns: conns::Conns,
    target: Target,
    schema: String,
    channel: String,
    options: PgOptions,
    wake: watch::Sender<u64>,
    listener: Option<tokio::task::AbortHandle>,
    /// The watchers of runs, told of their commits by the listener.
    watchers: std::sync::Arc<workers::Watchers>,
    nonce_prefix: String,
    stats: Stats,
    known: known::Known,
    group: group::Group,
}

#[derive(Debug, Default)]
struct Stats {
    nonces: AtomicU64,
    round_trips: AtomicU64,
    journal_writes: AtomicU64,
    commits: AtomicU64,
    fenced: AtomicU64,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target.to_string())
            .field("schema", &self.schema)
            .field("options", &self.options)
            .field("round_trips", &self.round_trips())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// The schema version this library reads and writes.
    pub const SCHEMA_VERSION: u32 = schema::VERSION;

    /// The revision of the stored functions this library applies (`sql/functions/`): a
    /// schema whose functions are of a newer revision is refused
    /// ([`StoreError::NewerFunctions`]).
    pub const FUNCTIONS_REVISION: u32 = functions::REVISION;

    /// Connects to the database at `url` (`postgres://user:password@host:port/database`,
    /// optionally `?schema=name`) with the default [`PgOptions`], creating or migrating the
    /// store's schema. The URL may name several servers as libpq writes it
    /// (`postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write`): the store
    /// connects to whichever is writable and finds it again after a failover
    /// ([`PgStore::connect_any`]).
    ///
    /// Fails with [`StoreError::Unreachable`] naming the host (never the password) when no
    /// server answers within the connect timeout, [`StoreError::NewerSchema`] when a newer
    /// version of this library wrote the schema (it is left untouched), and
    /// [`StoreError::CorruptFile`] when the schema holds tables of ours that are not a store.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        PgStore::connect_with(url, PgOptions::default()).await
    }

    /// Connects with `options`; see [`PgStore::connect`].
    pub async fn connect_with(url: &str, options: PgOptions) -> Result<PgStore, StoreError> {
        open(vec![url.to_owned()], options).await
    }

    /// Connects to whichever of the servers `urls` name is writable (the primary), with
    /// `options`: the same as one URL naming every host
    /// (`postgres://app@db1:5432,db2:5432/app?target_session_attrs=read-write`). After a
    /// connection error or a read-only answer (the server became a standby), the store
    /// finds the writable server again; statements in flight then fail as transient and
    /// are retried on it for [`PgOptions::retry_for`]. Each URL may carry `?schema=`; the
    /// last one given counts.
    pub async fn connect_any(urls: &[&str], options: PgOptions) -> Result<PgStore, StoreError> {
        open(urls.iter().map(|url| (*url).to_owned()).collect(), options).await
    }

    /// The schema the store's tables live in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Where the store is, as errors show it: `host:port/database`.
    pub fn target(&self) -> String {
        self.target.to_string()
    }

    /// How many statements this store sent to the server (each one round trip).
    pub fn round_trips(&self) -> u64 {
        self.stats.round_trips.load(Ordering::Relaxed)
    }

    /// How many journal entries this store wrote (run creations included).
    pub fn journal_writes(&self) -> u64 {
        self.stats.journal_writes.load(Ordering::Relaxed)
    }

    /// How many transactions with entries this store wrote: creations, and commits (the
    /// commits of several runs sent together in one transaction count once).
    pub fn commits(&self) -> u64 {
        self.stats.commits.load(Ordering::Relaxed)
    }

    /// How many commits this store refused because their writer no longer owned the run.
    pub fn fenced_writes(&self) -> u64 {
        self.stats.fenced.load(Ordering::Relaxed)
    }

    fn nonce(&self) -> String {
        let n = self.stats.nonces.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n}", self.nonce_prefix)
    }

    fn retry(&self) -> Retry<'_> {
        Retry {
            store: self,
            started: Instant::now(),
            pause: Duration::from_millis(50),
        }
    }

    fn sent(&self) {
        self.stats.round_trips.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs a statement that is safe to send again (a read, or a write that does the same
    /// the second time), through lost connections.
    async fn idempotent<'a, T>(
        &'a self,
        op: impl Fn(conns::Conn<'a>) -> BoxFuture<'a, Answer<T>>,
    ) -> Result<T, StoreError> {
        let mut retry = self.retry();
        loop {
            let conn = retry.conn().await?;
            self.sent();
            match op(conn).await {
                Ok(value) => return Ok(value),
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) => retry.again(error).await?,
            }
        }
    }

    /// A run's row, verified against its checksum (a write that changes it computes the
    /// new checksum from it).
    async fn run_row(&self, run: RunId) -> Result<Option<read::RawRun>, StoreError> {
        self.idempotent(move |mut conn| {
            Box::pin(async move { read::run_row(&mut conn, run).await })
        })
        .await
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
    }
}

/// An outcome a server-side function is not known to answer.
fn unknown_outcome(target: &Target, what: &str, outcome: &str) -> StoreError {
    StoreError::Io(format!("{target}: {what} answered `{outcome}`"))
}

impl Store for PgStore {
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>> {
        Box::pin(self.create(run))
    }

    fn create_runs<'a>(
        &'a self,
        runs: &'a [NewRun<'a>],
    ) -> BoxFuture<'a, Result<Vec<Created>, StoreError>> {
        Box::pin(self.create_many(runs))
    }

    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.append(commit, None).await.map(|_| ()) })
    }

    fn commit_peeking<'a>(
        &'a self,
        commit: Commit<'a>,
        after: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.append(commit, Some(after)))
    }

    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>> {
        Box::pin(async move {
            let loaded = self
                .idempotent(move |mut conn| {
                    Box::pin(async move { read::load(&mut conn, run).await })
                })
                .await?;
            Ok(loaded.map(|(stored, raw)| {
                self.known.put(raw);
                stored
            }))
        })
    }

    fn load_many<'a>(
        &'a self,
        runs: &'a [RunId],
    ) -> BoxFuture<'a, Result<Vec<StoredRun>, StoreError>> {
        Box::pin(async move {
            let loaded = self
                .idempotent(move |mut conn| {
                    Box::pin(async move { read::load_many(&mut conn, runs).await })
                })
                .await?;
            Ok(loaded.into_iter().map(|(stored, _)| stored).collect())
        })
    }

    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>> {
        Box::pin(async move {
            let filter = &filter;
            self.idempotent(move |mut conn| {
                Box::pin(async move { read::list_runs(&mut conn, filter).await })
            })
            .await
        })
    }

    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>> {
        Box::pin(self.claim_runs(claim))
    }

    fn renew<'a>(
        &'a self,
        claimant: Claimant<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { sql::renew(&mut conn, claimant.owner, claimant.lease_ms).await })
        }))
    }

    fn heartbeat<'a>(
        &'a self,
        beat: Heartbeat<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { workers::heartbeat(&mut conn, beat).await })
        }))
    }

    fn workers(&self) -> BoxFuture<'_, Result<Vec<WorkerRow>, StoreError>> {
        Box::pin(
            self.idempotent(move |mut conn| {
                Box::pin(async move { workers::workers(&mut conn).await })
            }),
        )
    }

    /// Without a listener ([`PgOptions::listen`] off), the default poll.
    fn watch(&self, run: RunId) -> BoxFuture<'_, Result<RunWatch, StoreError>> {
        Box::pin(async move {
            if self.listener.is_none() {
                return Ok(RunWatch::polling(WATCH_POLL));
            }
            // Subscribed first, so a commit right after the mark is not missed.
            let signal = self.watchers.subscribe(run);
            self.idempotent(move |mut conn| {
                Box::pin(async move { workers::mark_watched(&mut conn, run).await })
            })
            .await?;
            Ok(RunWatch::signalled(signal, workers::WATCH_HOLDS))
        })
    }

    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { sql::release(&mut conn, owner, runs, &self.channel).await })
        }))
    }

    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>> {
        Box::pin(async move {
            let text = sql::to_json(message)?;
            let mut retry = self.retry();
            let (outcome, id) = loop {
                let mut conn = retry.conn().await?;
                self.sent();
                match sql::submit(&mut conn, run, &text, key, at, &self.channel).await {
                    Ok(answer) => break answer,
                    Err(Failure::Store(error)) => return Err(error),
                    // A keyed message is found by its key when sent again; an unkeyed one
                    // could be stored twice, so its lost answer is an error.
                    Err(Failure::Sql(error)) if key.is_some() => retry.again(error).await?,
                    Err(Failure::Sql(error)) => return Err(self.target.error(error)),
                }
            };
            let id = id.map_or(0, |id| id as u64);
            match outcome.as_str() {
                "new" => Ok(Submitted::New(id)),
                "duplicate" => Ok(Submitted::Duplicate(id)),
                "unknown" => Err(StoreError::UnknownRun(run)),
                "finished" => Err(StoreError::Finished(run)),
                other => Err(unknown_outcome(&self.target, "workflow_submit", other)),
            }
        })
    }

    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>> {
        Box::pin(async move {
            self.idempotent(move |mut conn| {
                Box::pin(async move { read::inbox(&mut conn, run, after).await })
            })
            .await?
            .ok_or(StoreError::UnknownRun(run))
        })
    }

    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { sql::pending_inbox(&mut conn, after).await })
        }))
    }

    fn open_tasks(
        &self,
        filter: workflow_core::store::TaskFilter,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::OpenTask>, StoreError>> {
        Box::pin(async move {
            let filter = &filter;
            self.idempotent(move |mut conn| {
                Box::pin(async move { tasks::list(&mut conn, filter).await })
            })
            .await
        })
    }

    fn task_counts(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::TaskCount>, StoreError>> {
        Box::pin(
            self.idempotent(move |mut conn| {
                Box::pin(async move { tasks::counts(&mut conn).await })
            }),
        )
    }

    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { read::dead_letters(&mut conn).await })
        }))
    }

    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_spec::Schedule,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<workflow_core::store::ScheduleRow, StoreError>> {
        let definition = serde_json::to_string(schedule).unwrap_or_default();
        Box::pin(async move {
            let definition = &definition;
            self.idempotent(move |mut conn| {
                Box::pin(async move {
                    schedules::put_schedule(&mut conn, id, workflow, definition, at).await
                })
            })
            .await
        })
    }

    fn schedules(
        &self,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::ScheduleRow>, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { schedules::schedules(&mut conn).await })
        }))
    }

    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: workflow_core::store::ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let change = &change;
            self.idempotent(move |mut conn| {
                Box::pin(
                    async move { schedules::update_schedule(&mut conn, id, version, change).await },
                )
            })
            .await
        })
    }

    fn decide_schedules(
        &self,
        due: workflow_core::store::DueSchedules,
        decide: workflow_core::store::Decider,
    ) -> BoxFuture<'_, Result<workflow_core::store::DueBatch, StoreError>> {
        Box::pin(async move {
            let (due, decide) = (&due, &decide);
            self.idempotent(move |mut conn| {
                Box::pin(async move { schedules::decide_schedules(&mut conn, due, decide).await })
            })
            .await
        })
    }

    fn update_schedules(
        &self,
        updates: Vec<workflow_core::store::ScheduleUpdate>,
    ) -> BoxFuture<'_, Result<Vec<bool>, StoreError>> {
        Box::pin(async move {
            let updates = &updates;
            self.idempotent(move |mut conn| {
                Box::pin(async move { schedules::update_schedules(&mut conn, updates).await })
            })
            .await
        })
    }

    fn purge(&self, filter: PurgeFilter) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>> {
        Box::pin(async move {
            let filter = &filter;
            let runs = self
                .idempotent(move |mut conn| {
                    Box::pin(async move { search::purge(&mut conn, filter).await })
                })
                .await?;
            for run in &runs {
                self.known.forget(*run);
            }
            Ok(runs)
        })
    }

    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { schedules::delete_schedule(&mut conn, id).await })
        }))
    }

    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<workflow_core::store::MissedTicks>, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { schedules::missed_ticks(&mut conn, id, limit).await })
        }))
    }

    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(
                async move { sql::put_spec(&mut conn, fingerprint, workflow, spec_json, at).await },
            )
        }))
    }

    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { read::spec(&mut conn, fingerprint).await })
        }))
    }

    fn specs<'a>(
        &'a self,
        workflow: &'a str,
    ) -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>> {
        Box::pin(self.idempotent(move |mut conn| {
            Box::pin(async move { read::specs(&mut conn, workflow).await })
        }))
    }

    fn verify(&self) -> BoxFuture<'_, Result<Verification, StoreError>> {
        Box::pin(async move {
            let mut retry = self.retry();
            loop {
                let mut conn = retry.conn().await?;
                self.sent();
                match check::verify(&mut conn).await {
                    Ok(verification) => return Ok(verification),
                    Err(Failure::Store(error)) => return Err(error),
                    Err(Failure::Sql(error)) => retry.again(error).await?,
                }
            }
        })
    }

    fn create_gated<'a>(
        &'a self,
        run: NewRun<'a>,
        gate: workflow_core::store::limits::Gate<'a>,
    ) -> BoxFuture<'a, Result<Created, StoreError>> {
        Box::pin(async move { self.create_gated_run(&run, &gate).await })
    }

    fn admit<'a>(
        &'a self,
        admit: workflow_core::store::limits::Admit<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Admission, StoreError>> {
        Box::pin(async move { self.admit_gated(&admit).await })
    }

    fn acquire_slot<'a>(
        &'a self,
        request: workflow_core::store::limits::SlotRequest<'a>,
    ) -> BoxFuture<'a, Result<workflow_core::store::limits::Acquired, StoreError>> {
        Box::pin(async move { self.acquire(&request).await })
    }

    fn release_slot<'a>(
        &'a self,
        run: RunId,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.release_holder(run, holder))
    }

    fn flow_of(
        &self,
        run: RunId,
    ) -> BoxFuture<'_, Result<workflow_core::store::limits::RunFlow, StoreError>> {
        Box::pin(self.flow(run))
    }

    fn rate_buckets(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<workflow_core::store::limits::RateBucket>, StoreError>> {
        Box::pin(self.buckets(limit))
    }

    fn shared(&self) -> bool {
        true
    }

    fn multi_worker(&self) -> bool {
        true
    }

    fn clock_offset_ms(&self) -> i64 {
        self.conns.hosts.offset_ms()
    }

    fn wake_signal(&self) -> Option<watch::Receiver<u64>> {
        self.listener.as_ref().map(|_| self.wake.subscribe())
    }
}

//! Where runs and their journals live: the [`Store`] trait and an in-memory store for
//! tests ([`MemoryStore`]). The durable stores are crates of their own: one SQLite file
//! (`SqliteStore`, the `workflow-sqlite` crate) and many engine processes on one
//! PostgreSQL database (`PgStore`, the `workflow-postgres` crate).
//!
//! # What a store guarantees
//!
//! Every method is one atomic step: it happens whole or not at all, and its future resolves
//! only once what it wrote is durable (for stores that are durable at all). On top of that:
//!
//! - **The journal is append-only and gap-free.** A [`Commit`] names the journal length it
//!   expects (`seq`); its events become entries `seq, seq + 1, ...`. If the journal is not
//!   exactly `seq` long the commit is refused with [`StoreError::Conflict`] and nothing of
//!   it is written. Entries are never changed or removed.
//! - **One owner at a time.** A running run is driven by one engine (its *owner*) under a
//!   lease with a fencing token. [`Store::claim`] hands a run only to a caller when it has
//!   no owner, its lease expired, or (with `reclaim_own`) the caller already owns it; each
//!   claim raises the token (by one in the memory and SQLite stores; PostgreSQL's tokens
//!   also carry an epoch that grows on every failover), so it never goes back. A commit carrying a [`Fence`] is refused with
//!   [`StoreError::Fenced`] unless the run's owner and token are still the fence's, so a
//!   worker that lost its run cannot write to it. A run that finishes or is parked loses
//!   its owner in the same commit.
//! - **Start idempotency.** Within one workflow an idempotency key names at most one run:
//!   a second [`Store::create_run`] with the key returns the first run.
//!   [`Store::create_runs`] creates a batch of runs the same way, in one transaction.
//! - **A durable inbox per run.** Anyone may [`Store::submit`] a [`Message`] to an
//!   unfinished run (a decision, a cancellation, an event); messages get increasing ids,
//!   and a message with a `key` the run's inbox already holds is not stored again. The
//!   owner takes messages in and records how far it got with the commit's
//!   `inbox_cursor`, so [`Store::inbox`] after that cursor is what is still pending.
//! - **Status changes ride with journal entries**: a run's status, note and dead letter
//!   change in the same commit as the entries that explain them.
//! - **Damage is reported, never read as truth.** Durable stores keep a checksum with every
//!   journal entry and row and verify it on every read: a mismatch is
//!   [`StoreError::Corrupt`] (a journal entry) or [`StoreError::CorruptRow`], and a read
//!   never rewrites what it found. [`Store::verify`] checks a whole store.
//!
//! - **Schedule rows keep a definition apart from its state.** [`Store::put_schedule`]
//!   creates a row or replaces only its definition; [`Store::update_schedule`] changes its
//!   state or paused flag only if the row's `version` is the one the caller read, and bumps
//!   it, so of several workers deciding one tick exactly one records it. Every write of a
//!   row stores its next fire time, and [`Store::decide_schedules`] takes only the rows
//!   due by now, each by one caller at a time, deciding a batch in one transaction.
//!
//! - **Open tasks are indexed with the entries that open and close them.** A write that
//!   journals a task's opening, escalation or end (or stops or restarts its run) changes
//!   the open-task index in the same transaction, as [`tasks::changes`] says;
//!   [`Store::open_tasks`] pages the index.
//! - **Search values are an index.** The `search` values of [`NewRun`] are stored in the
//!   transaction that creates the run and never change; [`RunFilter::search`] finds runs
//!   by them. They are derived from the run's input (its first journal entry), so they
//!   carry no checksum of their own.
//! - **Purges take whole runs.** [`Store::purge`] deletes finished runs (never running or
//!   parked ones, nor a child whose parent is unfinished) with everything that belongs to
//!   them, each run in one transaction: a run is there whole or gone whole. It is the
//!   one exception to "entries are never removed".
//!
//! - **Workers record themselves with their renewals.** [`Store::heartbeat`] renews an
//!   engine's leases and writes its worker row in one transaction; a release of all of an
//!   owner's runs marks its row stopped in the same transaction; [`Store::workers`] lists
//!   the rows, as [`WorkerRow`] says.
//!
//! - **Limits hold in the store.** Gated runs are admitted, and step slots and rate tokens
//!   taken, each in one transaction that checks and takes together, as [`limits`] says.
//!
//! The conformance suite, the `workflow-conformance` crate, checks every one of these
//! promises against any store; the memory store, the SQLite store and the PostgreSQL store
//! run it.

#[doc(hidden)]
pub mod checksum;
pub(crate) mod gate;
pub mod limits;
mod memory;
mod records;
mod rows;
mod schedules;
pub mod tasks;
mod workers;

pub use crate::error::StoreError;
pub use crate::inbox::{InboxItem, Message, RunStatus};

/// Whether this build has the `test-util` feature: tests may run under tokio's paused
/// clock, which a store that waits on a thread of its own must not let jump ahead (it
/// waits on the blocking pool instead, as the SQLite store does).
#[doc(hidden)]
pub const TEST_UTIL: bool = cfg!(feature = "test-util");
pub use crate::schedule::{
    Decider, DueBatch, DueDecision, DueRow, DueSchedules, MissedTicks, ScheduleChange, ScheduleRow,
    ScheduleState, ScheduleUpdate,
};
pub use memory::MemoryStore;
pub use records::{queued_journal, DeadLetter, PurgeFilter, RunFilter, RunRecord, StoredRun};
pub use rows::{Damage, SpecRecord, Submitted, Verification};
pub use tasks::{OpenTask, TaskCount, TaskFilter, TaskKey};
pub use workers::{Heartbeat, RunWatch, WorkerRow, WATCH_POLL, WORKER_KEPT_MS};

use crate::error::RunId;
use crate::future::BoxFuture;
use crate::journal::{Event, Timestamp};

/// Who claims a run, for how long, as of when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claimant<'a> {
    /// The owner's name: unique among the engines sharing the store.
    pub owner: &'a str,
    /// How long the lease lasts without a renewal, in ms.
    pub lease_ms: u64,
    /// Now, by the caller's clock. Stores with a clock of their own (a database server)
    /// use theirs instead.
    pub now: Timestamp,
}

/// A run to create, with its first journal entries.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// The workflow's name.
    pub workflow: &'a str,
    /// The spec fingerprint.
    pub fingerprint: &'a str,
    /// The start's idempotency key: a second create with it returns the first run.
    pub idempotency_key: Option<&'a str>,
    /// The first entries: `RunStarted`, then whatever the run starts with (journaled as
    /// entries 0, 1, ... in the same transaction).
    pub events: &'a [Event],
    /// The run that started this one (a child run), if any.
    pub parent: Option<RunId>,
    /// Who drives the new run: it is created claimed. `None` leaves it unowned, for any
    /// engine to claim.
    pub owner: Option<Claimant<'a>>,
    /// A parked run this one replaces: it is marked cancelled, with this note, in the same
    /// transaction, and the create fails with [`StoreError::Conflict`] if it is no longer
    /// parked.
    pub supersedes: Option<(RunId, &'a str)>,
    /// When.
    pub at: Timestamp,
    /// The run's search values (`search: [..]` of its spec), name and value, stored in the
    /// same transaction.
    pub search: &'a [(String, String)],
}

/// The answer to [`Store::create_run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// A new run, with the fencing token of its owner (0 when created unowned).
    New {
        /// The run.
        run: RunId,
        /// The fencing token.
        token: u64,
    },
    /// The idempotency key was used before: this is that run.
    Existing(RunId),
}

impl Created {
    /// The run either way.
    pub fn id(self) -> RunId {
        match self {
            Created::New { run, .. } | Created::Existing(run) => run,
        }
    }
}

/// The owner and fencing token a write is made under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence<'a> {
    /// The owner.
    pub owner: &'a str,
    /// The token its claim received.
    pub token: u64,
}

/// What a commit does to a run's dead letter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeadLetterChange<'a> {
    /// Leave it as it is.
    #[default]
    Keep,
    /// Record (or replace) it.
    Put(&'a DeadLetter),
    /// Remove it (after a retry or a cancellation).
    Remove,
}

/// One atomic change to one run: journal entries, and the status, note, dead letter and
/// inbox cursor that go with them.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The run.
    pub run: RunId,
    /// The journal length the writer expects; the events become entries `seq, seq+1, ...`.
    pub seq: u64,
    /// The entries to append (may be empty).
    pub events: &'a [Event],
    /// The owner writing, checked before anything is written. `None` for operators'
    /// writes to runs nobody drives (a retry of a failed run, a cancelled parked run).
    pub fence: Option<Fence<'a>>,
    /// A new status and note. A finished or parked status releases the run's owner.
    pub status: Option<(RunStatus, Option<&'a str>)>,
    /// The dead letter.
    pub dead_letter: DeadLetterChange<'a>,
    /// The id of the last inbox message taken in, when it moved.
    pub inbox_cursor: Option<u64>,
    /// When.
    pub at: Timestamp,
}

impl<'a> Commit<'a> {
    /// A commit of journal entries only.
    pub fn events(run: RunId, seq: u64, events: &'a [Event], at: Timestamp) -> Self {
        Commit {
            run,
            seq,
            events,
            fence: None,
            status: None,
            dead_letter: DeadLetterChange::Keep,
            inbox_cursor: None,
            at,
        }
    }
}

/// A claim to take runs over: see [`Store::claim`].
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    /// Who claims, for how long, as of when.
    pub claimant: Claimant<'a>,
    /// Only runs of these workflows.
    pub workflows: &'a [&'a str],
    /// Only this run.
    pub run: Option<RunId>,
    /// Also take runs the claimant already owns (after a restart under the same name).
    pub reclaim_own: bool,
    /// At most this many.
    pub limit: Option<usize>,
    /// Which runs, by who owns them.
    pub claimable: Claimable,
    /// Only runs started under these spec fingerprints (`None`: any): a worker admits
    /// only queued runs of the versions it registers.
    pub versions: Option<&'a [&'a str]>,
}

/// Which of the runs a [`Claim`] may take it takes: queued ones, the others, or both.
///
/// A run is *queued* when nobody owns it and its journal holds only its start (and who
/// initiated it, `Initiated`): a queued
/// start ([`Engine::enqueue`]) or a restarted run, written and not yet begun.
///
/// [`Engine::enqueue`]: crate::Engine::enqueue
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Claimable {
    /// Every run the claim may take.
    #[default]
    Any,
    /// Only queued runs. The store hands them out oldest first: the order in which
    /// queued runs are admitted.
    Queued,
    /// Only runs that are not queued: runs whose owner's lease lapsed (takeovers), runs an
    /// engine released or an operator put back to work after they began.
    Begun,
}

impl Claimable {
    /// The number stores pass to their queries: 0 any, 1 queued, 2 begun.
    #[doc(hidden)]
    pub fn code(self) -> i64 {
        match self {
            Claimable::Any => 0,
            Claimable::Queued => 1,
            Claimable::Begun => 2,
        }
    }
}

/// A run handed to a claimant, with its fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run: RunId,
    /// The token every write must carry.
    pub token: u64,
}

/// Durable storage of runs, journals, inboxes, dead letters and specs. The module docs
/// say what every implementation guarantees; `workflow_conformance::run` checks them.
///
/// An engine holds its store as `Arc<dyn Store>`; keep a clone to read runs from your own
/// code (reading needs the trait in scope):
///
/// ```
/// use std::sync::Arc;
/// use workflow_core::store::{MemoryStore, RunFilter, RunStatus, Store};
/// use workflow_core::Engine;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
/// let engine = Engine::builder().shared_store(Arc::clone(&store)).build();
/// let failed = store
///     .runs(RunFilter { status: Some(RunStatus::Failed), ..RunFilter::default() })
///     .await?;
/// assert!(failed.is_empty());
/// assert!(store.verify().await?.is_clean());
/// # drop(engine);
/// # Ok(()) }
/// ```
pub trait Store: Send + Sync + 'static {
    /// Creates a run with its first entries, or returns the run its idempotency key names
    /// (changing nothing).
    fn create_run<'a>(&'a self, run: NewRun<'a>) -> BoxFuture<'a, Result<Created, StoreError>>;

    /// Creates several runs in one transaction, each as [`Store::create_run`] would in
    /// their order (a key used before, or by an earlier run of the batch, names that run),
    /// and answers for each, in order. All or nothing: when one fails, none is created and
    /// its error is the answer.
    ///
    /// The default creates them one by one, so a failure leaves the runs before it
    /// created: a store that can, overrides it.
    fn create_runs<'a>(
        &'a self,
        runs: &'a [NewRun<'a>],
    ) -> BoxFuture<'a, Result<Vec<Created>, StoreError>> {
        Box::pin(async move {
            let mut created = Vec::with_capacity(runs.len());
            for run in runs {
                created.push(self.create_run(run.clone()).await?);
            }
            Ok(created)
        })
    }

    /// Appends entries and applies the run changes of `commit`, all or nothing.
    fn commit<'a>(&'a self, commit: Commit<'a>) -> BoxFuture<'a, Result<(), StoreError>>;

    /// [`Store::commit`], answering also whether the run's inbox held messages with ids
    /// above `after` when the commit landed: a run's first commit learns so in its own
    /// round trip instead of reading the inbox before it. `true` is always a safe answer
    /// (the driver then reads the inbox). The default commits, then reads the inbox.
    fn commit_peeking<'a>(
        &'a self,
        commit: Commit<'a>,
        after: u64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            self.commit(commit).await?;
            Ok(!self.inbox(commit.run, after).await?.is_empty())
        })
    }

    /// A run with its journal.
    fn load(&self, run: RunId) -> BoxFuture<'_, Result<Option<StoredRun>, StoreError>>;

    /// Several runs with their journals, in the order of `runs`, leaving out those that do
    /// not exist (and repeats): what a page of runs costs in one read instead of one per
    /// run. The default loads them one by one.
    fn load_many<'a>(
        &'a self,
        runs: &'a [RunId],
    ) -> BoxFuture<'a, Result<Vec<StoredRun>, StoreError>> {
        Box::pin(async move {
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::with_capacity(runs.len());
            for &run in runs {
                if seen.insert(run) {
                    if let Some(stored) = self.load(run).await? {
                        out.push(stored);
                    }
                }
            }
            Ok(out)
        })
    }

    /// Runs matching a filter, newest first.
    fn runs(&self, filter: RunFilter) -> BoxFuture<'_, Result<Vec<RunRecord>, StoreError>>;

    /// Hands running runs of the claim's workflows to the claimant, each with a new fencing
    /// token: runs nobody owns, runs whose lease expired, and (with `reclaim_own`) runs the
    /// claimant owns already, as far as `claimable` allows. Takes the oldest runs first and
    /// returns the leases, oldest run first.
    fn claim<'a>(&'a self, claim: Claim<'a>) -> BoxFuture<'a, Result<Vec<Lease>, StoreError>>;

    /// Extends the leases of every run `claimant` owns; returns those runs.
    fn renew<'a>(&'a self, claimant: Claimant<'a>)
        -> BoxFuture<'a, Result<Vec<RunId>, StoreError>>;

    /// Gives up `owner`'s runs (all of them, or the ones listed) so others may claim them
    /// at once, as an engine does when it stops. Releasing all of them marks `owner`'s
    /// worker row stopped ([`Store::heartbeat`]) in the same transaction.
    fn release<'a>(
        &'a self,
        owner: &'a str,
        runs: Option<&'a [RunId]>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Renews `beat.claimant`'s leases as [`Store::renew`] does and, in the same
    /// transaction, writes its worker row ([`WorkerRow`]) as the beat says: when it
    /// started and since when it drains, its renewal and lease expiry on the store's clock
    /// (the claimant's `now` for stores that keep leases by it), not stopped (unless the
    /// beat says it drains: a draining engine's last beat may land after the release that
    /// stopped it, and leaves it stopped). Rows of other
    /// workers not renewed for [`WORKER_KEPT_MS`] are deleted. Returns the runs it holds.
    /// The default renews only, for stores without worker rows.
    fn heartbeat<'a>(
        &'a self,
        beat: Heartbeat<'a>,
    ) -> BoxFuture<'a, Result<Vec<RunId>, StoreError>> {
        self.renew(beat.claimant)
    }

    /// The worker rows ([`Store::heartbeat`]), by name. The default has none.
    fn workers(&self) -> BoxFuture<'_, Result<Vec<WorkerRow>, StoreError>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// A subscription to `run`'s commits, for a page that follows a running run: its
    /// [`RunWatch::changed`] resolves soon after a commit to the run (and may resolve
    /// without one); once it [needs renewal](RunWatch::needs_renewal), call `watch`
    /// again. A store may make commits of watched runs tell their watchers, so that only
    /// watched runs pay for it. The default looks again every [`WATCH_POLL`].
    fn watch(&self, run: RunId) -> BoxFuture<'_, Result<RunWatch, StoreError>> {
        let _ = run;
        Box::pin(std::future::ready(Ok(RunWatch::polling(WATCH_POLL))))
    }

    /// Puts a message in a run's inbox. Refused with [`StoreError::Finished`] when the run
    /// is finished, [`StoreError::UnknownRun`] when there is none.
    fn submit<'a>(
        &'a self,
        run: RunId,
        message: &'a Message,
        key: Option<&'a str>,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<Submitted, StoreError>>;

    /// The messages of a run's inbox with ids above `after`, in order.
    fn inbox(&self, run: RunId, after: u64) -> BoxFuture<'_, Result<Vec<InboxItem>, StoreError>>;

    /// Runs with inbox messages above `after` that their owner has not taken in yet, and
    /// the highest message id seen: how engines notice messages other processes sent.
    fn pending_inbox(&self, after: u64) -> BoxFuture<'_, Result<(Vec<RunId>, u64), StoreError>>;

    /// Every dead letter, newest first.
    fn dead_letters(&self) -> BoxFuture<'_, Result<Vec<DeadLetter>, StoreError>>;

    /// Records the spec a fingerprint stands for (as JSON) and that an engine registered it
    /// now, so tools without the workflow's code (the CLI) can draw and explain its runs.
    /// The spec is written once per fingerprint; later calls only note the registration.
    fn put_spec<'a>(
        &'a self,
        fingerprint: &'a str,
        workflow: &'a str,
        spec_json: &'a str,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The spec JSON recorded for a fingerprint.
    fn spec<'a>(
        &'a self,
        fingerprint: &'a str,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>>;

    /// The specs recorded for a workflow, most recently registered first.
    fn specs<'a>(&'a self, workflow: &'a str)
        -> BoxFuture<'a, Result<Vec<SpecRecord>, StoreError>>;

    /// Creates the schedule `id` (its state starting at `at`, not paused), or replaces the
    /// definition of an existing one and keeps its state and paused flag. Returns the row.
    fn put_schedule<'a>(
        &'a self,
        id: &'a str,
        workflow: &'a str,
        schedule: &'a workflow_spec::Schedule,
        at: Timestamp,
    ) -> BoxFuture<'a, Result<ScheduleRow, StoreError>>;

    /// Every schedule, by id.
    fn schedules(&self) -> BoxFuture<'_, Result<Vec<ScheduleRow>, StoreError>>;

    /// Applies `change` to schedule `id` if its version is still `version`, and bumps the
    /// version. Returns whether it applied (false: the row changed since it was read, or
    /// is gone).
    fn update_schedule<'a>(
        &'a self,
        id: &'a str,
        version: u64,
        change: ScheduleChange,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Takes up to `due.limit` schedule rows of `due.workflows` that are due (not paused,
    /// their next fire time at or before `due.now`), earliest first, asks `decide` what
    /// each does, and writes the answers, all in one transaction. Rows another caller is
    /// deciding at the same moment are left to it (not waited for, not taken), so several
    /// workers never decide the same row at once, and each change is written under the
    /// version it was decided from. Every write of a row (here, [`Store::put_schedule`],
    /// [`Store::update_schedule`], [`Store::update_schedules`]) stores its next fire time,
    /// so a pass reads only due rows.
    ///
    /// The default reads every row and applies each answer with
    /// [`Store::update_schedule`], for stores without an index of next fire times.
    fn decide_schedules(
        &self,
        due: DueSchedules,
        decide: Decider,
    ) -> BoxFuture<'_, Result<DueBatch, StoreError>> {
        Box::pin(schedules::decide_one_by_one(self, due, decide))
    }

    /// Applies several compare-and-sets of schedule rows in one transaction (each as
    /// [`Store::update_schedule`] would, with the next fire time given), and returns
    /// whether each applied, in order. The default applies them one by one.
    fn update_schedules(
        &self,
        updates: Vec<ScheduleUpdate>,
    ) -> BoxFuture<'_, Result<Vec<bool>, StoreError>> {
        Box::pin(async move {
            let mut applied = Vec::with_capacity(updates.len());
            for update in updates {
                applied.push(
                    self.update_schedule(&update.id, update.version, update.change)
                        .await?,
                );
            }
            Ok(applied)
        })
    }

    /// Deletes up to `filter.limit` finished runs (completed, failed or cancelled) that
    /// match `filter`, lowest id first, with their journals, inboxes, dead letters, search
    /// values and every other row of theirs, each run whole in one transaction (a store
    /// may split the batch into several, as SQLite does to let live writes go between
    /// them); returns their ids (with `dry_run`, the runs it would delete, deleting
    /// nothing). Never a running or parked run, nor a child run whose parent is not
    /// finished. A purged run's idempotency key is free again.
    fn purge(&self, filter: PurgeFilter) -> BoxFuture<'_, Result<Vec<RunId>, StoreError>>;

    /// Deletes schedule `id`; returns whether it existed. Runs it started are kept; its
    /// missed-tick records go with it.
    fn delete_schedule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// The open human tasks of running runs that `filter` selects, soonest deadline first
    /// (then run, then step), from the store's open-task index: what a task list costs is
    /// its page, not the running runs. (The default reads every running run's journal,
    /// for stores without an index.)
    fn open_tasks(&self, filter: TaskFilter) -> BoxFuture<'_, Result<Vec<OpenTask>, StoreError>> {
        Box::pin(async move { Ok(filter.page(tasks::from_journals(self).await?)) })
    }

    /// How many tasks are open per workflow and assignee, with the oldest's opening time,
    /// from the open-task index (the default reads every running run's journal).
    fn task_counts(&self) -> BoxFuture<'_, Result<Vec<TaskCount>, StoreError>> {
        Box::pin(async move { Ok(tasks::count(tasks::from_journals(self).await?)) })
    }
    /// The missed-tick records of schedule `id` (written by [`Store::update_schedule`]
    /// with [`ScheduleChange::missed`]), newest first, at most `limit`.
    fn missed_ticks<'a>(
        &'a self,
        id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<MissedTicks>, StoreError>>;

    /// Creates a gated run ([`limits`]): like [`Store::create_run`] (unowned), with its
    /// admission values, in one transaction. With a debounce key, the gated runs of the
    /// same workflow and key not yet admitted are cancelled with the note
    /// [`limits::debounced_note`] in the same transaction, and the new run may start at
    /// [`limits::DebounceStart::not_before`] from the first start of the burst. No claim
    /// takes a gated run: only [`Store::admit`] does.
    fn create_gated<'a>(
        &'a self,
        run: NewRun<'a>,
        gate: limits::Gate<'a>,
    ) -> BoxFuture<'a, Result<Created, StoreError>> {
        let _ = (run, gate);
        Box::pin(std::future::ready(Err(no_flow_rows())))
    }

    /// Admits gated runs: in one transaction serialized with every other admission of
    /// the store, reads the ready gated runs of `admit.versions` and the admitted,
    /// unfinished runs of their keys, decides with [`limits::plan`], hands the admitted
    /// runs to the claimant (each with a new fencing token), and finishes the skipped ones
    /// as cancelled with their notes. The runs to ask to cancel are returned, not cancelled.
    fn admit<'a>(
        &'a self,
        admit: limits::Admit<'a>,
    ) -> BoxFuture<'a, Result<limits::Admission, StoreError>> {
        let _ = admit;
        Box::pin(std::future::ready(Err(no_flow_rows())))
    }

    /// Takes a step's slot and rate token, both or neither, in one transaction serialized
    /// with every other request of the same keys. Refused with [`StoreError::Fenced`]
    /// unless the fence is the run's current lease. Slots held under another lease than
    /// their run's current one count for nothing (and are dropped). An unanswered
    /// request records that the step waits; a granted one clears it.
    fn acquire_slot<'a>(
        &'a self,
        request: limits::SlotRequest<'a>,
    ) -> BoxFuture<'a, Result<limits::Acquired, StoreError>> {
        let _ = request;
        Box::pin(std::future::ready(Err(no_flow_rows())))
    }

    /// Gives back the slot of `holder` in `run` (and forgets that it waits), whichever
    /// way its attempt ended.
    fn release_slot<'a>(
        &'a self,
        run: RunId,
        holder: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (run, holder);
        Box::pin(std::future::ready(Ok(())))
    }

    /// What `run` waits for or holds: its gate with its key's holders and the gated runs
    /// ahead of it, the steps that wait for a slot or a token, the slots it holds.
    fn flow_of(&self, run: RunId) -> BoxFuture<'_, Result<limits::RunFlow, StoreError>> {
        let _ = run;
        Box::pin(std::future::ready(Ok(limits::RunFlow::default())))
    }

    /// The rate buckets the store keeps (one per scope and key a token was ever taken
    /// of, as [`acquire_slot`](Store::acquire_slot) last left it), by scope then key, at
    /// most `limit`. A store without flow-control rows keeps none.
    fn rate_buckets(
        &self,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<limits::RateBucket>, StoreError>> {
        let _ = limit;
        Box::pin(std::future::ready(Ok(Vec::new())))
    }

    /// Verifies the store: every row's checksum (and, for a file, the database's own
    /// integrity check). Reads only; damaged rows are reported, not repaired.
    fn verify(&self) -> BoxFuture<'_, Result<Verification, StoreError>> {
        Box::pin(std::future::ready(Ok(Verification::default())))
    }

    /// Whether other processes may write to this store (a file or a server), so engines
    /// should look for messages they did not write themselves.
    fn shared(&self) -> bool {
        false
    }

    /// Whether several engine processes drive runs of this store at once. Engines then
    /// keep leases (renewed by heartbeats) and take over lapsed ones; otherwise an engine
    /// that claims a run takes it at once from any other owner (the previous process that
    /// drove it is gone, or is fenced off).
    fn multi_worker(&self) -> bool {
        false
    }

    /// How far the clock leases are kept by (a database server's) is ahead of this
    /// process's wall clock, in ms, as a lower bound: the store's time is at least the
    /// caller's plus this. Engines add it to their own view of a lease to tell a step when
    /// its lease ends on the store's clock (`StepContext::valid_until`). The default, 0,
    /// is right for stores that keep leases by the caller's clock ([`Claimant::now`]).
    fn clock_offset_ms(&self) -> i64 {
        0
    }

    /// A signal the store bumps when other processes wrote something an engine should act
    /// on at once (a message in an inbox, a run anyone may claim): engines wait on it
    /// beside their polling timer, so they react early. `None` (the default) for stores
    /// that only polling notices.
    fn wake_signal(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

/// The error of a store without flow-control rows.
fn no_flow_rows() -> StoreError {
    StoreError::Rejected {
        reason: "this store keeps no flow-control rows (concurrency, priority, debounce, rate)"
            .to_owned(),
    }
}

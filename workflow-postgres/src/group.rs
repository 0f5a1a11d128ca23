//! Group commit: commits of different runs that are ready together go to the server in
//! one statement and one transaction.
//!
//! The first commit to arrive leads: it sends itself at once, on its own task, so a
//! commit alone pays one round trip and no hand-off. While [`Group::max_leaders`] commits
//! are on their way, the next ones queue; a leader that is done hands the queue to the
//! oldest of them, which sends itself and all that queued behind it as one group, and
//! answers them.
//!
//! Each run's commit is checked alone inside the group (owner, token, journal length and
//! row checksum, by the same server function as a commit sent alone): a fenced or
//! conflicting commit gets its own answer and writes nothing, and the others of its group
//! commit. A statement that fails whole (an inbox message taken in twice, a deadlock) has
//! written nothing: each of its commits is then sent alone, so a failure stays its
//! commit's own. A group whose answer was lost with its connection is looked up commit by
//! commit before any is sent again.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use sqlx::{PgConnection, Row as _};
use tokio::sync::oneshot;

use super::error::{classify, Class};
use super::sql::{int, Answer, CommitRow, Failure};
use super::PgStore;
use workflow_core::store::DeadLetterChange;

/// The most commits one statement carries.
const MAX_GROUP: usize = 128;

/// The migration of the version that added `workflow_commit_group` and let
/// `workflow_commit` close open tasks itself: changes of functions alone, which
/// `sql/functions/` holds.
pub(super) const MIGRATION: &str = r#"
-- workflow_commit_group, and workflow_commit closing open tasks itself: sql/functions/.
"#;

/// The migration that let a step's commit (entries only: no status, inbox cursor or dead
/// letter) check the run's owner, token and length and count its entries in one `UPDATE`
/// of the run's row. (A step's commit by the run's owner now writes no row at all: see
/// `sql/functions/workflow_commit.sql`.)
pub(super) const STEP_COMMIT_MIGRATION: &str = r#"
-- A change of workflow_commit alone: sql/functions/workflow_commit.sql holds it.
"#;

/// A commit as a group carries it: what `workflow_commit` takes, owned.
#[derive(Debug)]
pub(super) struct Entry {
    run: i64,
    seq: i64,
    events: Vec<String>,
    inboxes: Vec<Option<i64>>,
    crcs: Vec<i64>,
    owner: Option<String>,
    token: i64,
    status: Option<&'static str>,
    note: Option<String>,
    run_seen: Option<i64>,
    run_crc: Option<i64>,
    cursor: Option<i64>,
    at: i64,
    closes: Vec<i64>,
}

impl CommitRow<'_> {
    /// The commit as a group carries it, when it may go in one: not when it opens or
    /// moves open tasks or changes a dead letter (those go alone).
    pub(super) fn entry(&self) -> Option<Entry> {
        let commit = self.commit;
        if self.changes_tasks()
            || !matches!(commit.dead_letter, DeadLetterChange::Keep)
            || self.peek.is_some()
        {
            return None;
        }
        Some(Entry {
            run: int(commit.run.0),
            seq: int(commit.seq),
            events: self.events.clone(),
            inboxes: self.inboxes.clone(),
            crcs: self.crcs.clone(),
            owner: commit.fence.map(|f| f.owner.to_owned()),
            token: commit.fence.map_or(0, |f| int(f.token)),
            status: commit.status.map(|(s, _)| s.as_str()),
            note: commit.status.and_then(|(_, n)| n).map(str::to_owned),
            run_seen: self.run_row.map(|(seen, _)| seen),
            run_crc: self.run_row.map(|(_, new)| new),
            cursor: commit.inbox_cursor.map(int),
            at: int(commit.at),
            closes: self.closes.clone(),
        })
    }
}

/// What became of a commit sent through the group.
#[derive(Debug)]
pub(super) enum Turn {
    /// The server's outcome (`ok`, `fenced`, ...); `grouped` when others shared its
    /// transaction (the group counted it once).
    Done { outcome: String, grouped: bool },
    /// Its group failed: send it alone, looking it up first when `ambiguous` (the
    /// group's answer was lost, so it may have been applied).
    Alone { ambiguous: bool },
    /// Lead the next group, starting with this entry (the receiver's own).
    Lead(Box<Entry>),
}

struct Waiting {
    entry: Entry,
    turn: oneshot::Sender<Turn>,
}

#[derive(Default)]
struct State {
    queue: Vec<Waiting>,
    leaders: usize,
}

/// The commits waiting for a leader, and how many groups are on their way.
#[derive(Default)]
pub(super) struct Group {
    state: Mutex<State>,
    max_leaders: usize,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("max_leaders", &self.max_leaders)
            .finish_non_exhaustive()
    }
}

impl Group {
    /// At most `max_leaders` groups on their way at once.
    pub(super) fn new(max_leaders: usize) -> Group {
        Group {
            state: Mutex::default(),
            max_leaders: max_leaders.max(1),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A leader's place: given up when dropped (also when its task stops waiting), to the
/// oldest waiting commit or, with none waiting, to the next commit that arrives.
struct Leading<'g> {
    group: &'g Group,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        let mut state = self.group.state();
        loop {
            if state.queue.is_empty() {
                state.leaders -= 1;
                return;
            }
            let next = state.queue.remove(0);
            // A commit whose caller stopped waiting is not sent.
            if next.turn.send(Turn::Lead(Box::new(next.entry))).is_ok() {
                return;
            }
        }
    }
}

/// A queued commit's wait for its turn. Dropped with the leader's place handed to it
/// and not taken (its caller stopped waiting), it gives the place on.
struct Follower<'g> {
    waiting: oneshot::Receiver<Turn>,
    group: &'g Group,
}

impl Drop for Follower<'_> {
    fn drop(&mut self) {
        if let Ok(Turn::Lead(_)) = self.waiting.try_recv() {
            drop(Leading { group: self.group });
        }
    }
}

impl PgStore {
    /// Sends a commit through the group: alone at once when fewer than the most groups
    /// are on their way, else with the commits that queue with it.
    pub(super) async fn commit_in_group(&self, entry: Entry) -> Turn {
        let group = &self.group;
        let own = {
            let mut state = group.state();
            if state.leaders < group.max_leaders {
                state.leaders += 1;
                Ok(entry)
            } else {
                let (turn, waiting) = oneshot::channel();
                state.queue.push(Waiting { entry, turn });
                Err(Follower { waiting, group })
            }
        };
        let own = match own {
            Ok(own) => own,
            Err(mut follower) => match (&mut follower.waiting).await {
                Ok(Turn::Lead(own)) => *own,
                Ok(turn) => return turn,
                // The leader that took it stopped before answering.
                Err(_) => return Turn::Alone { ambiguous: true },
            },
        };
        let leading = Leading { group };
        let mut batch = vec![own];
        let mut answers = Vec::new();
        {
            let mut state = group.state();
            let mut taken = 0;
            while taken < state.queue.len() && 1 + taken < MAX_GROUP {
                if state.queue[taken].turn.is_closed() {
                    // Its caller stopped waiting: it is not sent.
                    state.queue.remove(taken);
                    continue;
                }
                taken += 1;
            }
            for waiting in state.queue.drain(..taken) {
                batch.push(waiting.entry);
                answers.push(waiting.turn);
            }
        }
        let mut turns = self.send_group(&batch).await.into_iter();
        // The next group may start while this one's answers are handed out.
        drop(leading);
        let own = turns.next().unwrap_or(Turn::Alone { ambiguous: true });
        for (turn, answer) in turns.zip(answers) {
            let _ = answer.send(turn);
        }
        own
    }

    /// Sends `batch` in one statement: the turn of each entry, in order.
    async fn send_group(&self, batch: &[Entry]) -> Vec<Turn> {
        let alone = |ambiguous| {
            (0..batch.len())
                .map(|_| Turn::Alone { ambiguous })
                .collect()
        };
        // No connection: nothing was sent, and each commit's own retries wait for one.
        let Ok(mut conn) = self.conns.take().await else {
            return alone(false);
        };
        self.sent();
        let answer = if let [entry] = batch {
            commit_one(&mut conn, entry, &self.channel)
                .await
                .map(|outcome| vec![outcome])
        } else {
            commit_many(&mut conn, batch, &self.channel).await
        };
        drop(conn);
        match answer {
            Ok(outcomes) if outcomes.len() == batch.len() => {
                let grouped = batch.len() > 1;
                let wrote = batch
                    .iter()
                    .zip(&outcomes)
                    .any(|(entry, outcome)| outcome == "ok" && !entry.events.is_empty());
                if grouped && wrote {
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                }
                outcomes
                    .into_iter()
                    .map(|outcome| Turn::Done { outcome, grouped })
                    .collect()
            }
            // Refused whole by the server: rolled back, nothing written.
            Err(Failure::Sql(error @ sqlx::Error::Database(_)))
                if classify(&error) != Class::Connection =>
            {
                tracing::debug!(error = %error, commits = batch.len(), "a group of commits was refused whole; sending each alone");
                alone(false)
            }
            Err(Failure::Sql(error)) => {
                if classify(&error) == Class::Connection {
                    self.conns.forget_idle();
                }
                alone(true)
            }
            Ok(_) | Err(Failure::Store(_)) => alone(true),
        }
    }
}

/// One commit, by `workflow_commit` (as `sql::commit` sends it, without a dead letter).
async fn commit_one(conn: &mut PgConnection, e: &Entry, channel: &str) -> Answer<String> {
    let outcome: String = sqlx::query(
        "SELECT workflow_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 0::smallint,
                                NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, $12, $13, $14,
                                $15)",
    )
    .bind(e.run)
    .bind(e.seq)
    .bind(&e.events)
    .bind(&e.inboxes)
    .bind(&e.crcs)
    .bind(e.owner.as_deref())
    .bind(e.token)
    .bind(e.status)
    .bind(e.note.as_deref())
    .bind(e.run_seen)
    .bind(e.run_crc)
    .bind(e.cursor)
    .bind(e.at)
    .bind(channel)
    .bind(&e.closes)
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)?;
    Ok(outcome)
}

/// Several commits in one statement, their rows locked in the order of their runs (so
/// two groups never wait for each other's locks in a cycle): the outcome of each entry
/// of `batch`, in `batch`'s order.
async fn commit_many(
    conn: &mut PgConnection,
    batch: &[Entry],
    channel: &str,
) -> Answer<Vec<String>> {
    let mut order: Vec<usize> = (0..batch.len()).collect();
    order.sort_by_key(|&i| batch[i].run);
    let sorted: Vec<&Entry> = order.iter().map(|&i| &batch[i]).collect();
    let column = |f: fn(&Entry) -> i64| sorted.iter().map(|e| f(e)).collect::<Vec<i64>>();
    let events: Vec<&str> = sorted
        .iter()
        .flat_map(|e| e.events.iter().map(String::as_str))
        .collect();
    let inboxes: Vec<Option<i64>> = sorted
        .iter()
        .flat_map(|e| e.inboxes.iter().copied())
        .collect();
    let crcs: Vec<i64> = sorted.iter().flat_map(|e| e.crcs.iter().copied()).collect();
    let closes: Vec<i64> = sorted
        .iter()
        .flat_map(|e| e.closes.iter().copied())
        .collect();
    let outcomes: Vec<String> = sqlx::query(
        "SELECT workflow_commit_group($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
                                      $14, $15, $16, $17)",
    )
    .bind(column(|e| e.run))
    .bind(column(|e| e.seq))
    .bind(column(|e| e.events.len() as i64))
    .bind(events)
    .bind(inboxes)
    .bind(crcs)
    .bind(
        sorted
            .iter()
            .map(|e| e.owner.as_deref())
            .collect::<Vec<Option<&str>>>(),
    )
    .bind(column(|e| e.token))
    .bind(
        sorted
            .iter()
            .map(|e| e.status)
            .collect::<Vec<Option<&str>>>(),
    )
    .bind(
        sorted
            .iter()
            .map(|e| e.note.as_deref())
            .collect::<Vec<Option<&str>>>(),
    )
    .bind(
        sorted
            .iter()
            .map(|e| e.run_seen)
            .collect::<Vec<Option<i64>>>(),
    )
    .bind(
        sorted
            .iter()
            .map(|e| e.run_crc)
            .collect::<Vec<Option<i64>>>(),
    )
    .bind(
        sorted
            .iter()
            .map(|e| e.cursor)
            .collect::<Vec<Option<i64>>>(),
    )
    .bind(column(|e| e.at))
    .bind(channel)
    .bind(column(|e| e.closes.len() as i64))
    .bind(closes)
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)?;
    if outcomes.len() != batch.len() {
        return Ok(outcomes);
    }
    let mut answers = vec![String::new(); batch.len()];
    for (outcome, i) in outcomes.into_iter().zip(order) {
        answers[i] = outcome;
    }
    Ok(answers)
}

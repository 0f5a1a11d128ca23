//! Writes that append to journals or take runs: creations, commits and claims, each tried
//! again through lost connections (looked up first when their answer was lost) and through
//! rows that changed while their checksum was computed.

use std::sync::atomic::Ordering;

use super::error::{is_unique_violation, Target};
use super::group::Turn;
use super::sql::{self, CommitRow, Failure};
use super::{tasks, unknown_outcome, PgStore};
use workflow_core::store::tasks as store_tasks;
use workflow_core::store::{Claim, Commit, Created, Lease, NewRun, RunStatus, StoreError};
use workflow_core::RunId;

/// How many times a write that changes a run's row is tried when the row keeps changing
/// between the read its checksum is computed from and the write.
pub(super) const STALE_TRIES: usize = 8;

pub(super) fn kept_changing(target: &Target, run: Option<RunId>) -> StoreError {
    let run = run.map_or_else(String::new, |run| format!(" of {run}"));
    StoreError::Io(format!(
        "{target}: the row{run} kept changing while a write computed its checksum"
    ))
}

impl PgStore {
    /// Claims runs (`Store::claim`); a claim whose answer was lost is looked up by its
    /// nonce before it is sent again.
    pub(super) async fn claim_runs(&self, claim: Claim<'_>) -> Result<Vec<Lease>, StoreError> {
        if claim.workflows.is_empty() {
            return Ok(Vec::new());
        }
        let nonce = self.nonce();
        let mut retry = self.retry();
        let mut ambiguous = false;
        loop {
            let mut conn = retry.conn().await?;
            if ambiguous {
                self.sent();
                match sql::claimed_by(&mut conn, claim.claimant.owner, &nonce).await {
                    Ok(leases) if !leases.is_empty() => return Ok(leases),
                    Ok(_) => {}
                    Err(Failure::Store(error)) => return Err(error),
                    Err(Failure::Sql(error)) => {
                        retry.again(error).await?;
                        continue;
                    }
                }
            }
            self.sent();
            match sql::claim(&mut conn, &claim, &nonce).await {
                Ok(leases) => return Ok(leases),
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) => {
                    ambiguous = true;
                    retry.again(error).await?;
                }
            }
        }
    }

    /// Creates a run with its first entries (`Store::create_run`).
    pub(super) async fn create(&self, run: NewRun<'_>) -> Result<Created, StoreError> {
        let events: Vec<String> = run
            .events
            .iter()
            .map(sql::to_json)
            .collect::<Result<_, _>>()?;
        let nonce = self.nonce();
        let mut sums = sql::CreateSums::new(&run, &events);
        let mut answer = None;
        for _ in 0..STALE_TRIES {
            if let Some((old, note)) = run.supersedes {
                sums.superseded = self
                    .run_row(old)
                    .await?
                    .map(|raw| sql::cancelled(&raw, note, run.at));
            }
            let found = self.create_once(&run, &events, &sums, &nonce).await?;
            if found.outcome != "stale" {
                answer = Some(found);
                break;
            }
        }
        let Some(answer) = answer else {
            return Err(kept_changing(
                &self.target,
                run.supersedes.map(|(old, _)| old),
            ));
        };
        let run_id = |answer: &sql::CreateAnswer| RunId(answer.run.map_or(0, |id| id as u64));
        match answer.outcome.as_str() {
            "new" => {
                self.known
                    .put(sql::created_row(&run, &sums, run_id(&answer)));
                self.stats
                    .journal_writes
                    .fetch_add(events.len() as u64, Ordering::Relaxed);
                self.stats.commits.fetch_add(1, Ordering::Relaxed);
                Ok(Created::New {
                    run: run_id(&answer),
                    token: answer.token as u64,
                })
            }
            "existing" => Ok(Created::Existing(run_id(&answer))),
            "unknown" => Err(StoreError::UnknownRun(run_id(&answer))),
            "conflict" => Err(StoreError::Conflict {
                run: run_id(&answer),
                seq: answer.len as u64,
            }),
            other => Err(unknown_outcome(&self.target, "workflow_create", other)),
        }
    }

    /// Appends a commit to its run (`Store::commit`); with `peek`, answers whether the
    /// run's inbox holds messages above it (`Store::commit_peeking`).
    pub(super) async fn append(
        &self,
        commit: Commit<'_>,
        peek: Option<u64>,
    ) -> Result<bool, StoreError> {
        let mut row = CommitRow::new(&commit)?;
        row.peek = peek;
        let mut outcome = None;
        let mut grouped = false;
        let mut inbox = false;
        for _ in 0..STALE_TRIES {
            let mut changed = None;
            if row.changes_run() {
                let raw = match self.known.get(commit.run) {
                    Some(raw) => raw,
                    None => self
                        .run_row(commit.run)
                        .await?
                        .ok_or(StoreError::UnknownRun(commit.run))?,
                };
                let after = row.changed(&raw);
                row.run_row = Some((raw.crc, after.crc));
                changed = Some(after);
            }
            let found = self.commit_grouped(&row).await;
            let found = found.map(|(outcome, was_grouped, holds)| {
                grouped = was_grouped;
                inbox = holds;
                outcome
            });
            match (found.as_deref(), changed) {
                (Ok("ok"), Some(after)) if after.status == "running" => self.known.put(after),
                (Ok("ok"), None) => {}
                // The row changed since this store saw it: read it again.
                (Ok("stale"), _) => {
                    self.known.forget(commit.run);
                    continue;
                }
                _ => self.known.forget(commit.run),
            }
            outcome = Some(found?);
            break;
        }
        let Some(outcome) = outcome else {
            return Err(kept_changing(&self.target, Some(commit.run)));
        };
        match outcome.as_str() {
            "ok" => {
                if !commit.events.is_empty() {
                    self.stats
                        .journal_writes
                        .fetch_add(commit.events.len() as u64, Ordering::Relaxed);
                    // A group's transaction was counted once, by the group.
                    if !grouped {
                        self.stats.commits.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Ok(inbox)
            }
            "unknown" => Err(StoreError::UnknownRun(commit.run)),
            "fenced" => {
                self.stats.fenced.fetch_add(1, Ordering::Relaxed);
                Err(StoreError::Fenced {
                    run: commit.run,
                    owner: commit
                        .fence
                        .map_or_else(String::new, |f| f.owner.to_owned()),
                })
            }
            "conflict" => Err(StoreError::Conflict {
                run: commit.run,
                seq: commit.seq,
            }),
            // The journal is `seq` long, shorter than the run's row says: its first
            // missing entry is at `seq`.
            "corrupt" => Err(StoreError::Corrupt {
                run: commit.run,
                seq: commit.seq,
            }),
            other => Err(unknown_outcome(&self.target, "workflow_commit", other)),
        }
    }

    /// One try of a creation, through lost connections: a creation whose answer was lost
    /// is looked up by its nonce before it is sent again.
    async fn create_once(
        &self,
        run: &NewRun<'_>,
        events: &[String],
        sums: &sql::CreateSums,
        nonce: &str,
    ) -> Result<sql::CreateAnswer, StoreError> {
        let mut retry = self.retry();
        let mut ambiguous = false;
        loop {
            let mut conn = retry.conn().await?;
            if ambiguous {
                self.sent();
                match sql::created_by(&mut conn, nonce).await {
                    Ok(Some(lease)) => {
                        return Ok(sql::CreateAnswer {
                            outcome: "new".to_owned(),
                            run: Some(lease.run.0 as i64),
                            token: lease.token as i64,
                            len: events.len() as i64,
                        })
                    }
                    Ok(None) => {}
                    Err(Failure::Store(error)) => return Err(error),
                    Err(Failure::Sql(error)) => {
                        retry.again(error).await?;
                        continue;
                    }
                }
            }
            self.sent();
            let changes = store_tasks::changes(run.events, None, RunStatus::Running);
            let sent = if changes.is_empty() {
                sql::create(&mut conn, run, events, sums, nonce, &self.channel).await
            } else {
                let create = sql::Create {
                    new: run,
                    events,
                    sums,
                    nonce,
                    channel: &self.channel,
                };
                tasks::create(&mut conn, create, &changes).await
            };
            match sent {
                Ok(answer) => return Ok(answer),
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) => {
                    ambiguous = true;
                    retry.again(error).await?;
                }
            }
        }
    }

    /// One try of a commit, with other runs' commits ready at the same time when it may
    /// go in a group: its outcome, and whether it shared its transaction.
    /// With the answer to its peek at the inbox (see [`Self::commit_once`]).
    async fn commit_grouped(
        &self,
        row: &CommitRow<'_>,
    ) -> Result<(String, bool, bool), StoreError> {
        let alone = |(outcome, inbox)| (outcome, false, inbox);
        let Some(entry) = row.entry() else {
            return self.commit_once(row, false).await.map(alone);
        };
        match self.commit_in_group(entry).await {
            Turn::Done { outcome, grouped } => Ok((outcome, grouped, false)),
            Turn::Alone { ambiguous } => self.commit_once(row, ambiguous).await.map(alone),
            // Never answered (a leader's place is taken inside the group): as a lost answer.
            Turn::Lead(_) => self.commit_once(row, true).await.map(alone),
        }
    }

    /// One try of a commit, through lost connections: a commit whose answer was lost (or
    /// may have been: `ambiguous`) is looked up by its entries before it is sent again.
    /// With the server's outcome, whether the run's inbox holds messages above `row.peek`
    /// (`true` when a lookup found the commit applied: the inbox is then read).
    async fn commit_once(
        &self,
        row: &CommitRow<'_>,
        ambiguous: bool,
    ) -> Result<(String, bool), StoreError> {
        let commit = row.commit;
        let mut retry = self.retry();
        let mut ambiguous = ambiguous;
        loop {
            let mut conn = retry.conn().await?;
            if ambiguous {
                self.sent();
                match sql::committed(&mut conn, row).await {
                    Ok(true) => return Ok(("ok".to_owned(), row.peek.is_some())),
                    Ok(false) => {}
                    Err(Failure::Store(error)) => return Err(error),
                    Err(Failure::Sql(error)) => {
                        retry.again(error).await?;
                        continue;
                    }
                }
            }
            self.sent();
            let sent = if row.changes_tasks() {
                tasks::commit(&mut conn, row, &self.channel).await
            } else {
                sql::commit(&mut conn, row, &self.channel).await
            };
            match sent {
                Ok(answer) => return Ok(answer),
                Err(Failure::Store(error)) => return Err(error),
                Err(Failure::Sql(error)) if is_unique_violation(&error) => {
                    // An inbox message this commit takes in was taken in already.
                    return Err(StoreError::Conflict {
                        run: commit.run,
                        seq: commit.seq,
                    });
                }
                Err(Failure::Sql(error)) => {
                    ambiguous = true;
                    retry.again(error).await?;
                }
            }
        }
    }
}

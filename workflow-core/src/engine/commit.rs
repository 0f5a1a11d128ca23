//! A driver's commits: what the machine decided, journaled under the run's fence in one
//! transaction, retried while the store's failure may clear by itself; only then are the
//! events broadcast and the work they journaled started.

use std::time::Duration;

use super::driver::Driver;
use crate::engine::workflow::Workflow;
use crate::journal::{Event, Timestamp};
use crate::machine::Status;
use crate::store::{Commit, DeadLetter, DeadLetterChange, Fence, StoreError};

/// The longest pause between two tries of a write the store refused.
const MAX_STORE_PAUSE: Duration = Duration::from_secs(5);

/// Whether a store failure may clear without anyone touching the run: the disk fills up
/// and frees, a file system or a server comes back.
fn clears_by_itself(error: &StoreError) -> bool {
    error.is_transient()
}

impl<W: Workflow> Driver<W> {
    /// Commits the pending events (with the run's end, when it finished) under this
    /// engine's fence, then broadcasts them and starts the work they journaled.
    pub(super) async fn commit(&mut self, finish: Option<Status>) -> Result<(), StoreError> {
        let now = self.now();
        self.commit_at(finish, now).await
    }

    /// [`Self::commit`] at `now`, the clock as read just before.
    pub(super) async fn commit_at(
        &mut self,
        finish: Option<Status>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let cursor = self.pending.iter().filter_map(Event::inbox).max();
        if self.pending.is_empty() && finish.is_none() {
            return Ok(());
        }
        // Nothing is committed (so no attempt starts) with less than the margin of the
        // lease left: the journal is replayed by whoever drives the run next.
        if self.engine.inner.lease_ms > 0 && self.engine.inner.lease.tripped(self.run) {
            self.self_fenced = true;
            return Err(self.fenced_self());
        }
        let failure = finish.and_then(|_| self.machine.failure());
        let letter = failure.map(|(step, attempts, kind, message)| DeadLetter {
            run: self.run,
            workflow: W::NAME.to_owned(),
            step,
            attempts,
            kind,
            message,
            trace_id: self.trace_id.clone(),
            at: now,
        });
        let note = letter.as_ref().map(|d| {
            format!(
                "failed at `{}` after {} attempt(s): {}: {}",
                d.step, d.attempts, d.kind, d.message
            )
        });
        let results = self
            .pending
            .iter()
            .any(|e| matches!(e, Event::StepSucceeded { .. }));
        let items = self
            .pending
            .iter()
            .any(|e| matches!(e, Event::ItemSucceeded { .. }));
        let children = self
            .pending
            .iter()
            .any(|e| matches!(e, Event::ChildStarted { .. }));
        if results {
            self.engine.inner.fault("before_result_append");
        }
        if items {
            self.engine.inner.fault("before_item_append");
        }
        let commit = Commit {
            run: self.run,
            seq: self.seq,
            events: &self.pending,
            fence: Some(Fence {
                owner: &self.engine.inner.owner,
                token: self.token,
            }),
            status: finish.map(|_| (self.machine.run_status(), note.as_deref())),
            dead_letter: letter
                .as_ref()
                .map_or(DeadLetterChange::Keep, DeadLetterChange::Put),
            inbox_cursor: cursor,
            at: now,
        };
        let started = tokio::time::Instant::now();
        let peek = std::mem::take(&mut self.inbox_by_commit).then(|| self.machine.inbox_cursor());
        let messages = self.commit_until_durable(commit, peek).await?;
        self.commit_seconds
            .get_or_insert_with(
                || metrics::histogram!("workflow_store_commit_seconds", "workflow" => W::NAME),
            )
            .record(started.elapsed().as_secs_f64());
        if results {
            self.engine.inner.fault("after_result_append");
        }
        if children {
            self.engine.inner.fault("after_child_start");
        }
        self.seq += self.pending.len() as u64;
        // Logged and indexed once their commit landed: a step whose result the store did
        // not take is not reported as succeeded, a task it did not take is not listed.
        for event in &self.pending {
            self.note(event);
        }
        // Drained, not taken: the buffers keep their capacity from one commit to the next.
        if self.engine.inner.events.receiver_count() > 0 {
            for event in self.pending.drain(..) {
                let _ = self.engine.inner.events.send((self.run, event));
            }
        } else {
            self.pending.clear();
        }
        match &letter {
            Some(letter) => tracing::error!(
                step = letter.step.as_str(),
                error_type = letter.kind.as_str(),
                "run failed; recorded as a dead letter"
            ),
            None if finish.is_some() => {
                tracing::info!(status = self.machine.status().as_str(), "run finished");
            }
            None => {}
        }
        let mut starts = std::mem::take(&mut self.starts);
        for start in starts.drain(..) {
            self.start(start);
        }
        self.starts = starts;
        if messages && finish.is_none() {
            // Taken in now, committed with the next turn's events.
            self.take_inbox().await?;
        }
        Ok(())
    }

    /// Commits, waiting out failures of the store that clear by themselves (a full disk,
    /// a read-only or unreachable store, a lock): nothing is started or acknowledged until
    /// the commit lands, and the run carries on from where it was when it does. Failures
    /// that do not clear (the run was taken over, its history is damaged) stop the driver.
    /// With `peek` (the run's inbox cursor), answers whether the inbox holds messages
    /// above it ([`crate::store::Store::commit_peeking`]).
    async fn commit_until_durable(
        &self,
        commit: Commit<'_>,
        peek: Option<u64>,
    ) -> Result<bool, StoreError> {
        let mut pause = Duration::from_millis(100);
        let mut failures = 0u32;
        let store = &self.engine.inner.store;
        loop {
            let answer = match peek {
                Some(after) => store.commit_peeking(commit, after).await,
                None => store.commit(commit).await.map(|()| false),
            };
            match answer {
                Ok(messages) => {
                    if failures > 0 {
                        tracing::warn!(run = %self.run, failures, "the store accepts writes again; the run carries on");
                    }
                    return Ok(messages);
                }
                Err(error) if clears_by_itself(&error) => {
                    if failures == 0 {
                        if matches!(error, StoreError::Unreachable { .. }) {
                            tracing::error!(run = %self.run, error = %error, "store unreachable; the write is sent again once it answers (nothing committed meanwhile)");
                        } else {
                            tracing::error!(run = %self.run, error = %error, "the store did not take a write; retrying until it accepts writes again");
                        }
                    }
                    failures += 1;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_STORE_PAUSE);
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The error a self-fenced driver stops with.
    pub(super) fn fenced_self(&self) -> StoreError {
        StoreError::Fenced {
            run: self.run,
            owner: self.engine.inner.owner.clone(),
        }
    }
}

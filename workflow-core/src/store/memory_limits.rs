//! The memory store's flow-control rows: gates of gated runs, step slots, rate buckets
//! and waiting steps, all under the store's one lock (so every check-and-take is atomic).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Inner, MemoryStore};
use crate::error::RunId;
use crate::journal::Timestamp;
use crate::store::limits::{
    self, Acquired, Admission, Admit, AdmittedRun, Bucket, Candidate, Gate, GateState, KeyUsage,
    Queue, RateBucket, RunFlow, SlotRequest, StepWait,
};
use crate::store::{Created, NewRun, RunStatus, StoreError};

/// The flow-control rows.
#[derive(Debug, Default)]
pub(super) struct Flow {
    gates: BTreeMap<RunId, GateRow>,
    /// The waiting gates of each queue (key, or none), best first: what an admission reads,
    /// without looking at the rest of the queue.
    queues: BTreeMap<Queue, BTreeSet<(i64, RunId)>>,
    /// Every waiting gate, best first, whatever its queue.
    order: BTreeSet<(i64, RunId)>,
    /// Admitted gates whose runs were running when last looked at: the holders of keys.
    holding: BTreeSet<RunId>,
    /// Waiting gates that may not start before a time (debounce), by that time.
    later: BTreeSet<(Timestamp, RunId)>,
    /// The waiting gates of each debounce key, by workflow.
    debounces: HashMap<(String, String), BTreeSet<RunId>>,
    slots: Vec<SlotRow>,
    buckets: HashMap<(String, String), Bucket>,
    waits: BTreeMap<(RunId, String), StepWait>,
}

#[derive(Debug, Clone)]
struct GateRow {
    workflow: String,
    key: Option<(String, String)>,
    priority: i64,
    order: i64,
    debounce: Option<String>,
    burst_at: Timestamp,
    not_before: Timestamp,
    admitted: bool,
}

#[derive(Debug, Clone)]
struct SlotRow {
    scope: String,
    key: String,
    run: RunId,
    holder: String,
    owner: String,
    token: u64,
}

impl Flow {
    /// Whether `run` is gated and not admitted yet: no claim takes it.
    pub(super) fn gated(&self, run: RunId) -> bool {
        self.gates.get(&run).is_some_and(|gate| !gate.admitted)
    }

    /// Whether `run` was created gated.
    pub(super) fn has_gate(&self, run: RunId) -> bool {
        self.gates.contains_key(&run)
    }

    /// Takes a gate out of the waiting indexes (admitted, finished or forgotten).
    fn unqueue(&mut self, run: RunId) {
        let Some(row) = self.gates.get(&run) else {
            return;
        };
        self.order.remove(&(row.order, run));
        if let Some(queue) = self.queues.get_mut(&row.key) {
            queue.remove(&(row.order, run));
            if queue.is_empty() {
                self.queues.remove(&row.key);
            }
        }
        self.later.remove(&(row.not_before, run));
        if let Some(key) = &row.debounce {
            let id = (row.workflow.clone(), key.clone());
            if let Some(waiting) = self.debounces.get_mut(&id) {
                waiting.remove(&run);
                if waiting.is_empty() {
                    self.debounces.remove(&id);
                }
            }
        }
    }

    /// Forgets a purged run's rows.
    pub(super) fn forget(&mut self, run: RunId) {
        self.unqueue(run);
        self.holding.remove(&run);
        self.gates.remove(&run);
        self.slots.retain(|slot| slot.run != run);
        self.waits.retain(|(owner, _), _| *owner != run);
    }
}

impl Inner {
    pub(super) fn create_gated(
        &mut self,
        new: &NewRun<'_>,
        gate: &Gate<'_>,
    ) -> Result<Created, StoreError> {
        let created = self.create(new)?;
        let Created::New { run, .. } = created else {
            return Ok(created);
        };
        let mut burst_at = new.at;
        let mut not_before = new.at;
        if let Some(debounce) = &gate.debounce {
            let id = (new.workflow.to_owned(), debounce.key.to_owned());
            let earlier: Vec<RunId> = self
                .flow
                .debounces
                .get(&id)
                .into_iter()
                .flatten()
                .copied()
                .filter(|old| *old != run)
                .collect();
            for old in earlier {
                self.flow.unqueue(old);
                let Some(old_run) = self.runs.get_mut(&old) else {
                    continue;
                };
                if old_run.stored.record.status != RunStatus::Running {
                    continue;
                }
                if let Some(row) = self.flow.gates.get(&old) {
                    burst_at = burst_at.min(row.burst_at);
                }
                let record = &mut old_run.stored.record;
                record.status = RunStatus::Cancelled;
                record.note = Some(limits::debounced_note(run));
                record.owner = None;
                record.updated_at = new.at;
            }
            not_before = debounce.not_before(new.at, burst_at);
            self.flow.debounces.entry(id).or_default().insert(run);
        }
        let key = gate.concurrency.map(|(s, k)| (s.to_owned(), k.to_owned()));
        let order = limits::queue_order(gate.priority, new.at);
        self.flow
            .queues
            .entry(key.clone())
            .or_default()
            .insert((order, run));
        self.flow.order.insert((order, run));
        if not_before > new.at {
            self.flow.later.insert((not_before, run));
        }
        self.flow.gates.insert(
            run,
            GateRow {
                workflow: new.workflow.to_owned(),
                key,
                priority: gate.priority,
                order,
                debounce: gate.debounce.map(|d| d.key.to_owned()),
                burst_at,
                not_before,
                admitted: false,
            },
        );
        Ok(created)
    }

    fn running(&self, run: RunId) -> bool {
        self.runs
            .get(&run)
            .is_some_and(|r| r.stored.record.status == RunStatus::Running)
    }

    /// The admitted, unfinished runs of a key.
    fn in_flight(&self, key: &(String, String)) -> Vec<RunId> {
        self.flow
            .holding
            .iter()
            .filter(|id| {
                self.flow.gates.get(id).and_then(|g| g.key.as_ref()) == Some(key)
                    && self.running(**id)
            })
            .copied()
            .collect()
    }

    /// The admitted, unfinished runs of every key; holders whose runs finished are let go.
    fn holders(&mut self) -> HashMap<(String, String), Vec<RunId>> {
        let finished: Vec<RunId> = self
            .flow
            .holding
            .iter()
            .filter(|id| !self.running(**id))
            .copied()
            .collect();
        for id in finished {
            self.flow.holding.remove(&id);
        }
        let mut held: HashMap<(String, String), Vec<RunId>> = HashMap::new();
        for id in &self.flow.holding {
            if let Some(key) = self.flow.gates.get(id).and_then(|g| g.key.clone()) {
                held.entry(key).or_default().push(*id);
            }
        }
        held
    }

    /// Up to `n` ready runs of a queue (`None`: of every queue at once), best first, and
    /// whether that was all of them; gates of runs that finished while they waited leave
    /// the queue.
    fn read_queue(
        &mut self,
        queue: Option<&Queue>,
        n: usize,
        admit: &Admit<'_>,
    ) -> (Vec<Candidate>, bool) {
        let now = admit.claimant.now;
        let mut read = Vec::new();
        let mut gone = Vec::new();
        let mut exhausted = true;
        let ids = match queue {
            Some(queue) => self.flow.queues.get(queue),
            None => Some(&self.flow.order),
        };
        for (_, id) in ids.into_iter().flatten() {
            if read.len() >= n {
                exhausted = false;
                break;
            }
            let (Some(row), Some(run)) = (self.flow.gates.get(id), self.runs.get(id)) else {
                gone.push(*id);
                continue;
            };
            let record = &run.stored.record;
            if record.status != RunStatus::Running {
                gone.push(*id);
                continue;
            }
            if row.not_before > now
                || record.owner.is_some()
                || !admit.versions.contains(&record.fingerprint.as_str())
            {
                continue;
            }
            read.push(Candidate {
                run: *id,
                workflow: record.workflow.clone(),
                key: row.key.clone(),
                priority: row.priority,
                created_at: record.created_at,
                ready_at: row.not_before.max(record.created_at),
            });
        }
        for id in gone {
            self.flow.unqueue(id);
        }
        (read, exhausted)
    }

    pub(super) fn admit(&mut self, admit: &Admit<'_>) -> Admission {
        let now = admit.claimant.now;
        let in_flight = self.holders();
        let decide = |candidates: Vec<Candidate>| {
            let plan = limits::plan(
                &candidates,
                &in_flight,
                admit.limits,
                now,
                admit.room,
                admit.aging_ms,
            );
            (candidates, plan)
        };
        // First the best runs of every queue at once; queue by queue when they do not
        // decide the admission alone.
        let (scanned, exhausted) = self.read_queue(None, limits::scan_len(admit.room), admit);
        let (candidates, plan) =
            match limits::heads(scanned, exhausted, &in_flight, admit.limits, admit.room) {
                Some(candidates) => decide(candidates),
                None => {
                    let queues: Vec<Queue> = self.flow.queues.keys().cloned().collect();
                    let reads = limits::reads(&queues, &in_flight, admit.limits, admit.room);
                    let mut read: Vec<(Vec<Candidate>, bool)> = queues
                        .iter()
                        .zip(&reads)
                        .map(|(queue, n)| self.read_queue(Some(queue), n.first, admit))
                        .collect();
                    let (mut candidates, mut plan) =
                        decide(read.iter().flat_map(|(c, _)| c.clone()).collect());
                    // Queues that may have more, read up to their free slots when the first
                    // reading left room.
                    let again: Vec<usize> = (0..queues.len())
                        .filter(|i| !read[*i].1 && reads[*i].all > reads[*i].first)
                        .collect();
                    if plan.admit.len() < admit.room && !again.is_empty() {
                        for i in again {
                            read[i] = self.read_queue(Some(&queues[i]), reads[i].all, admit);
                        }
                        (candidates, plan) =
                            decide(read.iter().flat_map(|(c, _)| c.clone()).collect());
                    }
                    (candidates, plan)
                }
            };
        let next_ready = self
            .flow
            .later
            .range((now.saturating_add(1), RunId(0))..)
            .find(|(_, id)| {
                self.runs.get(id).is_some_and(|r| {
                    r.stored.record.status == RunStatus::Running
                        && admit
                            .versions
                            .contains(&r.stored.record.fingerprint.as_str())
                })
            })
            .copied();
        let mut admission = Admission {
            cancel: plan.cancel,
            next_ready,
            ..Admission::default()
        };
        for id in plan.admit {
            let Some(candidate) = candidates.iter().find(|c| c.run == id) else {
                continue;
            };
            self.flow.unqueue(id);
            if let (Some(run), Some(gate)) = (self.runs.get_mut(&id), self.flow.gates.get_mut(&id))
            {
                gate.admitted = true;
                self.flow.holding.insert(id);
                admission.admitted.push(AdmittedRun {
                    lease: run.take(admit.claimant),
                    workflow: candidate.workflow.clone(),
                    waited_ms: now.saturating_sub(candidate.ready_at),
                });
            }
        }
        for (id, note) in plan.skip {
            self.flow.unqueue(id);
            if let Some(run) = self.runs.get_mut(&id) {
                let record = &mut run.stored.record;
                record.status = RunStatus::Cancelled;
                record.note = Some(note.clone());
                record.updated_at = now;
                admission.skipped.push((id, note));
            }
        }
        admission
    }

    /// Whether a slot is held under its run's current lease.
    fn valid(&self, slot: &SlotRow) -> bool {
        self.runs.get(&slot.run).is_some_and(|run| {
            run.stored.record.status == RunStatus::Running
                && run.stored.record.owner.as_deref() == Some(slot.owner.as_str())
                && run.token == slot.token
        })
    }

    fn usage(&self, scope: &str, key: &str) -> KeyUsage {
        let holders: Vec<(RunId, String)> = self
            .flow
            .slots
            .iter()
            .filter(|slot| slot.scope == scope && slot.key == key && self.valid(slot))
            .map(|slot| (slot.run, slot.holder.clone()))
            .collect();
        KeyUsage {
            in_use: holders.len() as u32,
            holders: holders.into_iter().take(limits::HOLDERS_SHOWN).collect(),
        }
    }

    pub(super) fn acquire(&mut self, request: &SlotRequest<'_>) -> Result<Acquired, StoreError> {
        let fenced = || StoreError::Fenced {
            run: request.run,
            owner: request.fence.owner.to_owned(),
        };
        let run = self
            .runs
            .get(&request.run)
            .ok_or(StoreError::UnknownRun(request.run))?;
        if run.stored.record.owner.as_deref() != Some(request.fence.owner)
            || run.token != request.fence.token
            || run.stored.record.status != RunStatus::Running
        {
            return Err(fenced());
        }
        // Slots of lapsed leases (and this holder's own earlier slot) count for nothing.
        let slots = std::mem::take(&mut self.flow.slots);
        self.flow.slots = slots
            .into_iter()
            .filter(|slot| {
                self.valid(slot) && !(slot.run == request.run && slot.holder == request.holder)
            })
            .collect();
        let wait_key = (request.run, request.holder.to_owned());
        if let Some(slot) = &request.concurrency {
            let usage = self.usage(slot.scope, slot.key);
            if usage.in_use >= slot.limit {
                self.wait(
                    request,
                    "slot",
                    slot.name,
                    slot.scope,
                    slot.key,
                    usage.clone(),
                );
                return Ok(Acquired::Busy(usage));
            }
        }
        if let Some(rate) = &request.rate {
            let id = (rate.scope.to_owned(), rate.key.to_owned());
            let current = self
                .flow
                .buckets
                .get(&id)
                .copied()
                .unwrap_or_else(|| Bucket::full(rate, request.now));
            let (next, taken) = current.take(rate, request.now);
            self.flow.buckets.insert(id, next);
            if let Err(wait_ms) = taken {
                self.wait(
                    request,
                    "rate",
                    rate.name,
                    rate.scope,
                    rate.key,
                    KeyUsage::default(),
                );
                return Ok(Acquired::Throttled { wait_ms });
            }
        }
        if let Some(slot) = &request.concurrency {
            self.flow.slots.push(SlotRow {
                scope: slot.scope.to_owned(),
                key: slot.key.to_owned(),
                run: request.run,
                holder: request.holder.to_owned(),
                owner: request.fence.owner.to_owned(),
                token: request.fence.token,
            });
        }
        self.flow.waits.remove(&wait_key);
        Ok(Acquired::Granted)
    }

    fn wait(
        &mut self,
        request: &SlotRequest<'_>,
        kind: &str,
        limit: &str,
        scope: &str,
        key: &str,
        usage: KeyUsage,
    ) {
        let since = self
            .flow
            .waits
            .get(&(request.run, request.holder.to_owned()))
            .filter(|wait| wait.kind == kind)
            .map_or(request.now, |wait| wait.since);
        self.flow.waits.insert(
            (request.run, request.holder.to_owned()),
            StepWait {
                step: request.holder.to_owned(),
                kind: kind.to_owned(),
                limit: limit.to_owned(),
                scope: scope.to_owned(),
                key: key.to_owned(),
                since,
                usage,
            },
        );
    }

    pub(super) fn release_slot(&mut self, run: RunId, holder: &str) {
        self.flow
            .slots
            .retain(|slot| !(slot.run == run && slot.holder == holder));
        self.flow.waits.remove(&(run, holder.to_owned()));
    }

    pub(super) fn rate_buckets(&self, limit: usize) -> Vec<RateBucket> {
        let mut buckets: Vec<RateBucket> = self
            .flow
            .buckets
            .iter()
            .map(|((scope, key), bucket)| RateBucket {
                scope: scope.clone(),
                key: key.clone(),
                bucket: *bucket,
            })
            .collect();
        buckets.sort_by(|a, b| (&a.scope, &a.key).cmp(&(&b.scope, &b.key)));
        buckets.truncate(limit);
        buckets
    }

    pub(super) fn flow_of(&self, run: RunId) -> RunFlow {
        let gate = self.flow.gates.get(&run).map(|row| {
            let usage = match &row.key {
                Some(key) => {
                    let holders = self.in_flight(key);
                    KeyUsage {
                        in_use: holders.len() as u32,
                        holders: holders
                            .into_iter()
                            .take(limits::HOLDERS_SHOWN)
                            .map(|r| (r, String::new()))
                            .collect(),
                    }
                }
                None => KeyUsage::default(),
            };
            // Only the gate's own queue (its waiting runs) can be ahead of it.
            let ahead = self
                .flow
                .queues
                .get(&row.key)
                .into_iter()
                .flatten()
                .filter(|(_, id)| {
                    let Some(other) = self.flow.gates.get(id) else {
                        return false;
                    };
                    *id != run
                        && (other.priority, std::cmp::Reverse(*id))
                            > (row.priority, std::cmp::Reverse(run))
                        && self.running(*id)
                })
                .count() as u64;
            GateState {
                key: row.key.clone(),
                priority: row.priority,
                not_before: self
                    .runs
                    .get(&run)
                    .filter(|r| row.not_before > r.stored.record.created_at)
                    .map(|_| row.not_before),
                admitted: row.admitted,
                usage,
                ahead,
            }
        });
        let waits = self
            .flow
            .waits
            .iter()
            .filter(|((owner, _), _)| *owner == run)
            .map(|(_, wait)| {
                let mut wait = wait.clone();
                if wait.kind == "slot" {
                    wait.usage = self.usage(&wait.scope, &wait.key);
                }
                wait
            })
            .collect();
        let held = self
            .flow
            .slots
            .iter()
            .filter(|slot| slot.run == run && self.valid(slot))
            .map(|slot| (slot.holder.clone(), slot.scope.clone(), slot.key.clone()))
            .collect();
        RunFlow { gate, waits, held }
    }
}

impl MemoryStore {
    /// Bumps the signal engines wait on, after a write that made a run claimable.
    pub(super) fn wake(&self) {
        self.claimable.send_modify(|n| *n += 1);
    }
}

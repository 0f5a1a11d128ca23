//! The memory store's flow-control rows: gates of gated runs, step slots, rate buckets
//! and waiting steps, all under the store's one lock (so every check-and-take is atomic).

use std::collections::{BTreeMap, HashMap};

use super::{Inner, MemoryStore};
use crate::error::RunId;
use crate::journal::Timestamp;
use crate::store::limits::{
    self, Acquired, Admission, Admit, AdmittedRun, Bucket, Candidate, Gate, GateState, KeyUsage,
    RunFlow, SlotRequest, StepWait,
};
use crate::store::{Created, NewRun, RunStatus, StoreError};

/// The flow-control rows.
#[derive(Debug, Default)]
pub(super) struct Flow {
    gates: BTreeMap<RunId, GateRow>,
    slots: Vec<SlotRow>,
    buckets: HashMap<(String, String), Bucket>,
    waits: BTreeMap<(RunId, String), StepWait>,
}

#[derive(Debug, Clone)]
struct GateRow {
    key: Option<(String, String)>,
    priority: i64,
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

    /// Forgets a purged run's rows.
    pub(super) fn forget(&mut self, run: RunId) {
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
            let earlier: Vec<RunId> = self
                .flow
                .gates
                .iter()
                .filter(|(id, row)| {
                    **id != run
                        && !row.admitted
                        && row.debounce.as_deref() == Some(debounce.key)
                        && self.runs.get(id).is_some_and(|r| {
                            r.stored.record.status == RunStatus::Running
                                && r.stored.record.workflow == new.workflow
                        })
                })
                .map(|(id, _)| *id)
                .collect();
            for old in earlier {
                if let Some(row) = self.flow.gates.get(&old) {
                    burst_at = burst_at.min(row.burst_at);
                }
                if let Some(old_run) = self.runs.get_mut(&old) {
                    let record = &mut old_run.stored.record;
                    record.status = RunStatus::Cancelled;
                    record.note = Some(limits::debounced_note(run));
                    record.owner = None;
                    record.updated_at = new.at;
                }
            }
            not_before = debounce.not_before(new.at, burst_at);
        }
        self.flow.gates.insert(
            run,
            GateRow {
                key: gate.concurrency.map(|(s, k)| (s.to_owned(), k.to_owned())),
                priority: gate.priority,
                debounce: gate.debounce.map(|d| d.key.to_owned()),
                burst_at,
                not_before,
                admitted: false,
            },
        );
        Ok(created)
    }

    /// The admitted, unfinished runs of a key.
    fn in_flight(&self, key: &(String, String)) -> Vec<RunId> {
        self.flow
            .gates
            .iter()
            .filter(|(id, row)| {
                row.admitted
                    && row.key.as_ref() == Some(key)
                    && self
                        .runs
                        .get(id)
                        .is_some_and(|r| r.stored.record.status == RunStatus::Running)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    fn candidates(&self, admit: &Admit<'_>) -> Vec<Candidate> {
        let now = admit.claimant.now;
        let mut candidates: Vec<Candidate> = self
            .flow
            .gates
            .iter()
            .filter(|(_, row)| !row.admitted && row.not_before <= now)
            .filter_map(|(id, row)| {
                let record = &self.runs.get(id)?.stored.record;
                (record.status == RunStatus::Running
                    && record.owner.is_none()
                    && admit.versions.contains(&record.fingerprint.as_str()))
                .then(|| Candidate {
                    run: *id,
                    workflow: record.workflow.clone(),
                    key: row.key.clone(),
                    priority: row.priority,
                    created_at: record.created_at,
                    ready_at: row.not_before.max(record.created_at),
                })
            })
            .collect();
        candidates.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.run.cmp(&b.run)));
        candidates.truncate(limits::ADMISSION_WINDOW);
        candidates
    }

    pub(super) fn admit(&mut self, admit: &Admit<'_>) -> Admission {
        let now = admit.claimant.now;
        let candidates = self.candidates(admit);
        let mut in_flight = HashMap::new();
        for key in candidates.iter().filter_map(|c| c.key.clone()) {
            if let std::collections::hash_map::Entry::Vacant(slot) = in_flight.entry(key) {
                let holders = self.in_flight(slot.key());
                slot.insert(holders);
            }
        }
        let plan = limits::plan(
            &candidates,
            &in_flight,
            admit.limits,
            now,
            admit.room,
            admit.aging_ms,
        );
        let mut admission = Admission {
            cancel: plan.cancel,
            next_ready: self
                .flow
                .gates
                .iter()
                .filter(|(id, row)| {
                    !row.admitted
                        && row.not_before > now
                        && self.runs.get(id).is_some_and(|r| {
                            r.stored.record.status == RunStatus::Running
                                && admit
                                    .versions
                                    .contains(&r.stored.record.fingerprint.as_str())
                        })
                })
                .map(|(id, row)| (row.not_before, *id))
                .min(),
            ..Admission::default()
        };
        for id in plan.admit {
            let Some(candidate) = candidates.iter().find(|c| c.run == id) else {
                continue;
            };
            if let (Some(run), Some(gate)) = (self.runs.get_mut(&id), self.flow.gates.get_mut(&id))
            {
                gate.admitted = true;
                admission.admitted.push(AdmittedRun {
                    lease: run.take(admit.claimant),
                    workflow: candidate.workflow.clone(),
                    waited_ms: now.saturating_sub(candidate.ready_at),
                });
            }
        }
        for (id, note) in plan.skip {
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
            let ahead = self
                .flow
                .gates
                .iter()
                .filter(|(id, other)| {
                    **id != run
                        && !other.admitted
                        && other.key == row.key
                        && (other.priority, std::cmp::Reverse(**id))
                            > (row.priority, std::cmp::Reverse(run))
                        && self
                            .runs
                            .get(id)
                            .is_some_and(|r| r.stored.record.status == RunStatus::Running)
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

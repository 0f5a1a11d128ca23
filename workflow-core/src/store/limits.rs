//! Flow-control rows: what a store keeps so that limits hold across every worker.
//!
//! - **Gated runs.** A run of a workflow with a workflow-level `concurrency`, `priority` or
//!   `debounce` is created *gated* ([`Store::create_gated`]): queued with its key's value,
//!   its priority and (for debounce) the time before which it may not start. No claim takes
//!   a gated run; only an admission ([`Store::admit`]) does, and it decides in one
//!   transaction (serialized with every other admission of the store) which gated runs
//!   start: a run whose key already has `limit` admitted, unfinished runs waits (or is
//!   finished as cancelled at once with `on_limit: skip`). The limit comes from the
//!   admitting worker's registered spec, never from the store.
//! - **Step slots and rate tokens.** Before an attempt of a step with `concurrency` or
//!   `rate`, its engine takes a slot of the step's key and a token of the rate's bucket in
//!   one transaction ([`Store::acquire_slot`]): both or neither. A slot names the run's
//!   lease (owner and fencing token) it was taken under and counts only while the run's
//!   current lease is that one (and, in stores shared by several workers, has not lapsed):
//!   a killed or paused worker's slots free within one lease, and a fenced worker takes
//!   none. A request that cannot be granted records that the step waits, for
//!   [`Store::flow_of`].
//!
//! The rules (the order of admission, the bucket's arithmetic) are pure functions of the
//! machine ([`crate::machine::admission`]): every store calls them inside its transaction,
//! so all stores decide alike.
//!
//! [`Store::create_gated`]: super::Store::create_gated
//! [`Store::admit`]: super::Store::admit
//! [`Store::acquire_slot`]: super::Store::acquire_slot
//! [`Store::flow_of`]: super::Store::flow_of

pub use crate::machine::admission::{
    debounced_note, names, plan, skipped_note, Bucket, Candidate, OnLimit, Plan, RateLimit,
    RunLimit, AGING_STEP_MS, HOLDERS_SHOWN,
};
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{Claimant, Fence, Lease};
use crate::error::RunId;
use crate::journal::Timestamp;

/// The most waiting runs one admission reads from one queue (one key, or the runs gated
/// without a key), whatever its room.
pub const ADMISSION_WINDOW: usize = 1_000;

/// A queue of waiting gated runs: a concurrency key (scope and value), or `None` for the
/// runs gated without one (for their priority or debounce only).
pub type Queue = Option<(String, String)>;

/// A gated run's place in its queue, fixed when it is created: its creation time less its
/// priority's worth of [`AGING_STEP_MS`], smaller first. Ordering by it is ordering by the
/// effective priority [`plan`] uses with the default aging step (up to runs that tie within
/// one step), so a store reads each queue's best runs from an index instead of every
/// waiting run.
pub fn queue_order(priority: i64, created_at: Timestamp) -> i64 {
    i64::try_from(created_at)
        .unwrap_or(i64::MAX)
        .saturating_sub(priority.saturating_mul(AGING_STEP_MS as i64))
}

/// How many waiting runs an admission reads from a queue: first, a share of the room (so
/// an admission over many keys reads about `room` runs in all, not `room` per key), and,
/// when the first reading admitted less than the room and this queue had more, up to
/// `all`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    /// Runs read first.
    pub first: usize,
    /// Runs read when the first reading of every queue left room.
    pub all: usize,
}

/// How many runs of a queue an admission may start at most: its free slots (a key of a
/// workflow whose runs wait under `on_limit: queue`), else `room` (runs without a key or
/// without a limit, and keys whose waiting runs are skipped or cancel their holders, which
/// an admission decides even when the key is full).
fn free(
    queue: &Queue,
    held: &HashMap<(String, String), Vec<RunId>>,
    limits: &[RunLimit<'_>],
    room: usize,
) -> usize {
    let Some(key) = queue else {
        return room;
    };
    let holding = held.get(key).map_or(0, Vec::len);
    let limit = match key.0.as_str() {
        // A static key is shared by every workflow naming it: full at the widest limit.
        "" => (!limits.is_empty() && limits.iter().all(|l| l.on_limit == OnLimit::Queue))
            .then(|| limits.iter().map(|l| l.limit).max().unwrap_or(0) as usize),
        scope => limits
            .iter()
            .find(|l| l.workflow == scope)
            .filter(|l| l.on_limit == OnLimit::Queue)
            .map(|l| l.limit as usize),
    };
    match limit {
        Some(limit) => room.min(limit.saturating_sub(holding)),
        None => room,
    }
}

/// How many waiting runs an admission first reads in the order of every queue at once
/// ([`queue_order`]) before it reads queue by queue ([`reads`]): enough for the room and
/// a few runs of full keys.
pub fn scan_len(room: usize) -> usize {
    room.min(ADMISSION_WINDOW)
        .saturating_mul(4)
        .saturating_add(16)
}

/// The candidates of an admission from the first waiting runs of every queue at once, in
/// [`queue_order`] (`scanned`: at most [`scan_len`] of them, `exhausted` when no more were
/// there), when they decide it exactly as reading every queue would: `None` when they may
/// not, and the store then reads queue by queue ([`reads`]).
///
/// They do when every limit waits (`on_limit: queue`) and either nothing more waits, or
/// `room` queues' first runs are among them: [`plan`] serves keys round robin, best run
/// first, so the best `room` first runs of the keys with free slots are what it admits,
/// and the first run of a key in this order is its best. An admission over many keys then
/// reads about its room in runs, not a run per key.
pub fn heads(
    scanned: Vec<Candidate>,
    exhausted: bool,
    held: &HashMap<(String, String), Vec<RunId>>,
    limits: &[RunLimit<'_>],
    room: usize,
) -> Option<Vec<Candidate>> {
    if !limits.iter().all(|l| l.on_limit == OnLimit::Queue) {
        return None;
    }
    if exhausted {
        return Some(scanned);
    }
    let mut seen: HashMap<Queue, ()> = HashMap::new();
    let mut picked = Vec::new();
    for candidate in scanned {
        if picked.len() >= room {
            break;
        }
        if free(&candidate.key, held, limits, room) == 0 {
            continue;
        }
        // Runs without a key have no turn to wait for: each is a first run.
        if candidate.key.is_some() && seen.insert(candidate.key.clone(), ()).is_some() {
            continue;
        }
        picked.push(candidate);
    }
    (picked.len() >= room).then_some(picked)
}

/// How many waiting runs of each queue an admission reads, in the order of `queues`,
/// given the admitted, unfinished runs of each key (`held`) and the worker's `limits`.
///
/// A queue whose key is at its limit under `on_limit: queue` (a path key, scoped by its
/// workflow's name, of a workflow in `limits`) is not read at all: nothing of it could
/// start, and reading it is what made an admission cost as much as its queue was deep.
/// Other queues are read up to their free slots (or the room, for keys whose runs are
/// skipped or cancel their holders, and for runs without a limit). What is read is then
/// decided by [`plan`], which never admits past a limit whatever it is given.
pub fn reads(
    queues: &[Queue],
    held: &HashMap<(String, String), Vec<RunId>>,
    limits: &[RunLimit<'_>],
    room: usize,
) -> Vec<Reads> {
    let room = room.min(ADMISSION_WINDOW);
    let full: Vec<usize> = queues
        .iter()
        .map(|queue| free(queue, held, limits, room))
        .collect();
    let open = full.iter().filter(|n| **n > 0).count().max(1);
    let share = room.div_ceil(open).max(1);
    full.into_iter()
        .map(|all| Reads {
            first: all.min(share),
            all,
        })
        .collect()
}

/// The admission values a gated run is created with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gate<'a> {
    /// The workflow-level concurrency key: its scope (the workflow's journaled name for a
    /// path key, `""` for a static key shared by every workflow naming it) and its value.
    /// `None`: the run is not limited (it is gated for its priority or debounce only).
    pub concurrency: Option<(&'a str, &'a str)>,
    /// Higher first.
    pub priority: i64,
    /// The debounce key and its timing, when the workflow debounces.
    pub debounce: Option<DebounceStart<'a>>,
}

/// A debounced start's key and timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebounceStart<'a> {
    /// The debounce key's value (scoped by the workflow).
    pub key: &'a str,
    /// The quiet time after the newest start before the run may start, in ms.
    pub window_ms: u64,
    /// The longest a burst waits after its first start, in ms.
    pub max_wait_ms: Option<u64>,
}

impl DebounceStart<'_> {
    /// When a start at `now` may start, in a burst that began at `burst_at`:
    /// `min(now + window, burst_at + max_wait)`.
    pub fn not_before(&self, now: Timestamp, burst_at: Timestamp) -> Timestamp {
        let quiet = now.saturating_add(self.window_ms);
        match self.max_wait_ms {
            Some(max) => quiet.min(burst_at.saturating_add(max)).max(now),
            None => quiet,
        }
    }
}

/// An admission: see [`Store::admit`](super::Store::admit).
#[derive(Debug, Clone, Copy)]
pub struct Admit<'a> {
    /// Who takes the admitted runs, for how long, as of when.
    pub claimant: Claimant<'a>,
    /// Only gated runs started under these spec fingerprints.
    pub versions: &'a [&'a str],
    /// The limits of the workflows, from the worker's registered specs. A gated run of a
    /// workflow not listed here is not limited.
    pub limits: &'a [RunLimit<'a>],
    /// At most this many runs are admitted.
    pub room: usize,
    /// The aging step of priorities, in ms ([`AGING_STEP_MS`] by default). Stores read
    /// each queue in the order of the default step ([`queue_order`]); [`plan`] ranks what
    /// they read by this one.
    pub aging_ms: u64,
}

/// What an admission decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admission {
    /// The runs admitted, now the claimant's.
    pub admitted: Vec<AdmittedRun>,
    /// Runs finished as cancelled because their key was at its limit (`on_limit: skip`),
    /// with the note recorded.
    pub skipped: Vec<(RunId, String)>,
    /// Runs in flight to be asked to cancel (`on_limit: cancel_previous`: for each waiting
    /// run, the oldest holder of its key not asked by another), each with the waiting run
    /// that asks.
    pub cancel: Vec<(RunId, RunId)>,
    /// The soonest a gated run of these versions that waits for its time (a debounce)
    /// may start, and that run: when to admit again.
    pub next_ready: Option<(Timestamp, RunId)>,
}

/// One admitted run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmittedRun {
    /// The run and its fencing token.
    pub lease: Lease,
    /// Its workflow.
    pub workflow: String,
    /// How long it waited since it was created (or since it could have started), in ms.
    pub waited_ms: u64,
}

/// A step's limit of attempts in flight per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLimit<'a> {
    /// The limit's name (`{workflow}.{step}`), for metrics and messages.
    pub name: &'a str,
    /// The key's scope: the limit's name for a path key, `""` for a static key.
    pub scope: &'a str,
    /// The key's value.
    pub key: &'a str,
    /// Attempts in flight per key.
    pub limit: u32,
}

/// A request for a step's slot and rate token: see
/// [`Store::acquire_slot`](super::Store::acquire_slot).
#[derive(Debug, Clone, Copy)]
pub struct SlotRequest<'a> {
    /// The run.
    pub run: RunId,
    /// Which attempt holds the slot: the step's id (with the item, for a map step).
    pub holder: &'a str,
    /// The run's lease the attempt runs under.
    pub fence: Fence<'a>,
    /// The step's concurrency key, if it has one.
    pub concurrency: Option<SlotLimit<'a>>,
    /// The step's rate, if it has one.
    pub rate: Option<RateLimit<'a>>,
    /// Now, by the caller's clock (the bucket's clock in every store).
    pub now: Timestamp,
}

/// The answer to a [`SlotRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// The slot and the token are taken.
    Granted,
    /// Every slot of the key is held; nothing was taken.
    Busy(KeyUsage),
    /// The bucket is empty; nothing was taken. A token is there in `wait_ms`.
    Throttled {
        /// How long until the next token, in ms.
        wait_ms: u64,
    },
}

/// A rate bucket as the store keeps it: see
/// [`Store::rate_buckets`](super::Store::rate_buckets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateBucket {
    /// The key's scope: the limit's name (`{workflow}.{step}.rate`) for a path key, `""` for
    /// a static key.
    pub scope: String,
    /// The key's value.
    pub key: String,
    /// Its units as of the last token taken ([`Bucket::level`] says what that means now).
    pub bucket: Bucket,
}

/// Who holds the slots of a key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyUsage {
    /// Slots in use (held under a current lease).
    pub in_use: u32,
    /// The runs holding them (at most [`HOLDERS_SHOWN`]), with the step (empty for a run).
    pub holders: Vec<(RunId, String)>,
}

/// What a run waits for or holds, for `runs show`, the API and the run page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFlow {
    /// Its gate, for a gated run.
    pub gate: Option<GateState>,
    /// Steps waiting for a slot or a token.
    pub waits: Vec<StepWait>,
    /// Slots it holds now: (step, scope, key).
    pub held: Vec<(String, String, String)>,
}

/// A gated run's admission state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateState {
    /// The concurrency key's scope and value.
    pub key: Option<(String, String)>,
    /// Its priority.
    pub priority: i64,
    /// When it may start (debounce), if later than its creation.
    pub not_before: Option<Timestamp>,
    /// Whether it was admitted.
    pub admitted: bool,
    /// The admitted, unfinished runs of its key.
    pub usage: KeyUsage,
    /// Gated runs of its key (or, without a key, of its workflow) ahead of it, by priority
    /// then age.
    pub ahead: u64,
}

/// A step that waits for a slot or a token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepWait {
    /// The attempt's holder name (the step id).
    pub step: String,
    /// `slot` or `rate`.
    pub kind: String,
    /// The limit's name.
    pub limit: String,
    /// The key's scope.
    pub scope: String,
    /// The key's value.
    pub key: String,
    /// Since when.
    pub since: Timestamp,
    /// The key's usage now (for a slot).
    pub usage: KeyUsage,
}

/// What a run waits for or holds, in words, for `runs show`, the API and the run page:
/// e.g. `waiting for a slot of key customer-42 (Charge): 1 of 1 in use by run-17`. The
/// limits come from the run's spec (`None`: the numbers the store knows only).
pub fn describe(flow: &RunFlow, spec: Option<&workflow_spec::Spec>) -> Vec<String> {
    let mut lines = Vec::new();
    let holders = |usage: &KeyUsage| {
        let mut named: Vec<String> = usage
            .holders
            .iter()
            .map(|(run, step)| match step.as_str() {
                "" => run.to_string(),
                step => format!("{run} ({step})"),
            })
            .collect();
        if usage.in_use as usize > usage.holders.len() {
            named.push(format!(
                "and {} more",
                usage.in_use as usize - usage.holders.len()
            ));
        }
        named.join(", ")
    };
    if let Some(gate) = flow.gate.as_ref().filter(|gate| !gate.admitted) {
        let name = spec.map(|s| s.journaled_name()).unwrap_or_default();
        let limit = spec
            .and_then(|s| s.concurrency.as_ref())
            .map(|c| c.limit.to_string())
            .unwrap_or_else(|| "?".to_owned());
        if let Some(at) = gate.not_before {
            lines.push(format!(
                "debounced: starts at {at} (ms) unless a newer start replaces it"
            ));
        }
        match &gate.key {
            Some((_, key)) if gate.usage.in_use > 0 => lines.push(format!(
                "waiting for a slot of key {key} ({name}): {} of {limit} in use by {}",
                gate.usage.in_use,
                holders(&gate.usage)
            )),
            // Nothing holds a slot of its key: it waits for no other run, but for the next
            // admission pass of a worker that registers this version of the workflow.
            Some((_, key)) => lines.push(format!(
                "queued for key {key} ({name}): its slots are free (0 of {limit} in use), so \
                 it waits for a worker that registers this version of {name} to admit it"
            )),
            None => {}
        }
        lines.push(format!(
            "queued: priority {}, {} queued ahead of it",
            gate.priority, gate.ahead
        ));
    }
    for wait in &flow.waits {
        let limit = spec.and_then(|s| {
            let step = s
                .steps
                .iter()
                .find(|step| wait.step.split('#').next() == Some(step.id.as_str()))?;
            match wait.kind.as_str() {
                "slot" => step.concurrency.as_ref().map(|c| c.limit.to_string()),
                _ => step
                    .rate
                    .as_ref()
                    .map(|r| format!("{} per {}", r.limit, workflow_spec::format_duration(r.per))),
            }
        });
        let limit = limit.unwrap_or_else(|| "?".to_owned());
        lines.push(match wait.kind.as_str() {
            "slot" => format!(
                "step {} waits for a slot of key {} ({}): {} of {limit} in use by {}",
                wait.step,
                wait.key,
                wait.limit,
                wait.usage.in_use,
                holders(&wait.usage)
            ),
            _ => format!(
                "step {} waits for a rate token of key {} ({}: {limit})",
                wait.step, wait.key, wait.limit
            ),
        });
    }
    for (step, _, key) in &flow.held {
        lines.push(format!("step {step} holds a slot of key {key}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review() -> workflow_spec::Spec {
        let parsed = workflow_spec::parse::parse_str(
            "workflow Review(customer: String) { concurrency: { key: customer, limit: 2 }, human review -> Approval { assignee: \"ops\", timeout: 48h, on_timeout: abort } }",
        );
        parsed.spec.expect("a valid spec")
    }

    fn queued(in_use: u32) -> RunFlow {
        RunFlow {
            gate: Some(GateState {
                key: Some(("Review".into(), "customer-42".into())),
                admitted: false,
                usage: KeyUsage {
                    in_use,
                    holders: (0..in_use)
                        .map(|n| (RunId(u64::from(n) + 7), String::new()))
                        .collect(),
                },
                ..GateState::default()
            }),
            ..RunFlow::default()
        }
    }

    #[test]
    fn a_queued_run_with_free_slots_waits_for_a_worker_not_a_slot() {
        assert_eq!(
            describe(&queued(0), Some(&review())),
            [
                "queued for key customer-42 (Review): its slots are free (0 of 2 in use), so it waits for a worker that registers this version of Review to admit it",
                "queued: priority 0, 0 queued ahead of it",
            ]
        );
        assert_eq!(
            describe(&queued(2), Some(&review()))[0],
            "waiting for a slot of key customer-42 (Review): 2 of 2 in use by run-7, run-8"
        );
    }

    #[test]
    fn an_admission_reads_only_keys_with_room_and_a_share_of_the_room() {
        let key = |k: &str| Some(("charge".to_owned(), k.to_owned()));
        let other = Some(("refund".to_owned(), "other".to_owned()));
        let queues = [key("full"), key("free"), key("busy"), None, other];
        let held = HashMap::from([
            (
                ("charge".to_owned(), "full".to_owned()),
                vec![RunId(1), RunId(2)],
            ),
            (("charge".to_owned(), "busy".to_owned()), vec![RunId(3)]),
        ]);
        let limits = [RunLimit {
            workflow: "charge",
            limit: 2,
            on_limit: OnLimit::Queue,
        }];
        let n = reads(&queues, &held, &limits, 8);
        let all: Vec<usize> = n.iter().map(|r| r.all).collect();
        // A key at its limit is not read; the others up to their free slots (a key of a
        // workflow without a limit, and the runs without a key, up to the room).
        assert_eq!(all, [0, 2, 1, 8, 8]);
        let first: Vec<usize> = n.iter().map(|r| r.first).collect();
        // Four queues are open: each is read for a quarter of the room first.
        assert_eq!(first, [0, 2, 1, 2, 2]);
        // Skipped or cancelling keys are read even when full: their runs are decided.
        let skip = [RunLimit {
            on_limit: OnLimit::Skip,
            ..limits[0]
        }];
        assert_eq!(reads(&queues[..1], &held, &skip, 3)[0].all, 3);
        // A static key (scope "") is shared: full only at the widest limit.
        let shared = [Some((String::new(), "psp".to_owned()))];
        let psp = HashMap::from([((String::new(), "psp".to_owned()), vec![RunId(1); 2])]);
        assert_eq!(reads(&shared, &psp, &limits, 4)[0].all, 0);
    }

    #[test]
    fn the_queue_order_is_the_aged_priority() {
        // A run of priority 1 created one aging step later ties with one of priority 0.
        assert_eq!(queue_order(1, AGING_STEP_MS), queue_order(0, 0));
        assert!(queue_order(5, 10) < queue_order(0, 10), "higher first");
        assert!(queue_order(0, 10) < queue_order(0, 11), "then older first");
        assert_eq!(queue_order(i64::MAX, 0), -i64::MAX, "saturates");
    }

    #[test]
    fn a_wait_says_which_key_and_who_holds_it() {
        let flow = RunFlow {
            gate: Some(GateState {
                key: Some(("Charge".to_owned(), "customer-42".to_owned())),
                usage: KeyUsage {
                    in_use: 1,
                    holders: vec![(RunId(17), String::new())],
                },
                ..GateState::default()
            }),
            ..RunFlow::default()
        };
        let lines = describe(&flow, None);
        assert_eq!(
            lines[0],
            "waiting for a slot of key customer-42 (): 1 of ? in use by run-17"
        );
        assert_eq!(lines[1], "queued: priority 0, 0 queued ahead of it");
    }
}

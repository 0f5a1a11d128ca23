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
//! The rules (the order of admission, the bucket's arithmetic) are the pure functions of
//! this module: every store calls them inside its transaction, so all stores decide alike.
//!
//! [`Store::create_gated`]: super::Store::create_gated
//! [`Store::admit`]: super::Store::admit
//! [`Store::acquire_slot`]: super::Store::acquire_slot
//! [`Store::flow_of`]: super::Store::flow_of

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
pub use workflow_spec::OnLimit;

use super::{Claimant, Fence, Lease};
use crate::error::RunId;
use crate::journal::Timestamp;

/// The default aging step of priorities: a queued run gains one point of priority per
/// minute it waits, so a run of priority 0 overtakes one of priority 10 that arrived ten
/// minutes after it, and nothing waits forever.
pub const AGING_STEP_MS: u64 = 60_000;

/// How many gated runs one admission looks at (highest priority, then oldest first).
pub const ADMISSION_WINDOW: usize = 1_000;

/// How many holders a [`KeyUsage`] names at most.
pub const HOLDERS_SHOWN: usize = 5;

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

/// The note of a run a newer start of its debounce key replaced.
pub fn debounced_note(by: RunId) -> String {
    format!("debounced by {by}")
}

/// A worker's limit of one workflow's runs in flight per key, from its registered spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimit<'a> {
    /// The workflow's journaled name.
    pub workflow: &'a str,
    /// Runs in flight per key.
    pub limit: u32,
    /// What a run whose key is at its limit does.
    pub on_limit: OnLimit,
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
    /// The aging step of priorities, in ms ([`AGING_STEP_MS`] by default).
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

/// A gated run as an admission sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The run.
    pub run: RunId,
    /// Its workflow.
    pub workflow: String,
    /// Its concurrency key: scope and value.
    pub key: Option<(String, String)>,
    /// Its priority.
    pub priority: i64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it may start (debounce), or its creation.
    pub ready_at: Timestamp,
}

/// What [`plan`] decided; the store carries it out in the same transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Runs to admit, in order.
    pub admit: Vec<RunId>,
    /// Runs to finish as skipped, with their notes.
    pub skip: Vec<(RunId, String)>,
    /// Holders to ask to cancel, each with the run that waits for it.
    pub cancel: Vec<(RunId, RunId)>,
}

/// The admission rule, one for every store. `candidates` are the gated, ready runs;
/// `in_flight` the admitted, unfinished runs of each of their keys (by scope and value).
///
/// Runs are ordered by *effective priority* (priority + whole aging steps waited, higher
/// first; then oldest first), and served round robin across keys: each key's best run
/// first, then each key's second, and so on, so one busy key does not starve the others.
/// A run without a key, or of a workflow without a limit, is admitted as room allows; one
/// whose key is at its limit waits (`queue`), is skipped (`skip`, decided now, naming the
/// holders), or asks the holders to cancel and waits (`cancel_previous`).
pub fn plan(
    candidates: &[Candidate],
    in_flight: &HashMap<(String, String), Vec<RunId>>,
    limits: &[RunLimit<'_>],
    now: Timestamp,
    room: usize,
    aging_ms: u64,
) -> Plan {
    let aging = aging_ms.max(1);
    let effective = |c: &Candidate| {
        c.priority
            .saturating_add((now.saturating_sub(c.created_at) / aging) as i64)
    };
    let mut order: Vec<&Candidate> = candidates.iter().collect();
    order.sort_by(|a, b| effective(b).cmp(&effective(a)).then(a.run.cmp(&b.run)));
    // Round robin: a run's rank is how many better runs of its key come before it.
    let mut seen: HashMap<&(String, String), usize> = HashMap::new();
    let mut ranked: Vec<(usize, usize, &Candidate)> = order
        .iter()
        .enumerate()
        .map(|(position, c)| {
            let rank = match &c.key {
                Some(key) => {
                    let n = seen.entry(key).or_default();
                    *n += 1;
                    *n - 1
                }
                None => 0,
            };
            (rank, position, *c)
        })
        .collect();
    ranked.sort_by_key(|(rank, position, _)| (*rank, *position));
    let mut plan = Plan::default();
    let mut added: HashMap<&(String, String), Vec<RunId>> = HashMap::new();
    for (_, _, c) in ranked {
        if plan.admit.len() >= room {
            break;
        }
        let limit = limits.iter().find(|l| l.workflow == c.workflow);
        let (Some(key), Some(limit)) = (&c.key, limit) else {
            plan.admit.push(c.run);
            continue;
        };
        let holders: Vec<RunId> = in_flight
            .get(key)
            .into_iter()
            .flatten()
            .chain(added.get(key).into_iter().flatten())
            .copied()
            .collect();
        if holders.len() < limit.limit as usize {
            added.entry(key).or_default().push(c.run);
            plan.admit.push(c.run);
            continue;
        }
        match limit.on_limit {
            OnLimit::Queue => {}
            OnLimit::Skip => plan
                .skip
                .push((c.run, skipped_note(&c.workflow, key, limit.limit, &holders))),
            // The oldest holder not yet asked by another waiting run of this pass.
            OnLimit::CancelPrevious => {
                if let Some(holder) = holders
                    .iter()
                    .find(|h| !plan.cancel.iter().any(|(asked, _)| asked == *h))
                {
                    plan.cancel.push((*holder, c.run));
                }
            }
        }
    }
    plan
}

/// The note of a run skipped because its key was at its limit.
pub fn skipped_note(
    workflow: &str,
    key: &(String, String),
    limit: u32,
    holders: &[RunId],
) -> String {
    format!(
        "skipped: key {} of {workflow} at its limit ({} of {limit} in use by {})",
        key.1,
        holders.len(),
        names(holders)
    )
}

/// `run-1, run-2` (at most [`HOLDERS_SHOWN`], then `and N more`).
pub fn names(runs: &[RunId]) -> String {
    let mut shown: Vec<String> = runs
        .iter()
        .take(HOLDERS_SHOWN)
        .map(ToString::to_string)
        .collect();
    if runs.len() > HOLDERS_SHOWN {
        shown.push(format!("and {} more", runs.len() - HOLDERS_SHOWN));
    }
    shown.join(", ")
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

/// A step's token bucket: at most `burst` tokens, refilled at `limit` per `per_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit<'a> {
    /// The limit's name (`{workflow}.{step}.rate`).
    pub name: &'a str,
    /// The key's scope, as for [`SlotLimit::scope`].
    pub scope: &'a str,
    /// The key's value.
    pub key: &'a str,
    /// Tokens per period.
    pub limit: u32,
    /// The period, in ms.
    pub per_ms: u64,
    /// The bucket's size.
    pub burst: u32,
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
            Some((_, key)) => lines.push(format!("queued for a slot of key {key} ({name})")),
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

/// The token bucket's arithmetic, exact in integers: one token is `per_ms` units, the
/// bucket holds at most `burst * per_ms` units and gains `limit` units per ms, so over any
/// window of `per_ms` at most `limit + burst` tokens are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    /// Units in the bucket as of `at`.
    pub units: u64,
    /// When `units` was computed.
    pub at: Timestamp,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn full(rate: &RateLimit<'_>, now: Timestamp) -> Bucket {
        Bucket {
            units: u64::from(rate.burst.max(1)).saturating_mul(rate.per_ms.max(1)),
            at: now,
        }
    }

    /// Refills to `now` and takes one token: the new bucket, or how long until a token.
    pub fn take(self, rate: &RateLimit<'_>, now: Timestamp) -> (Bucket, Result<(), u64>) {
        let per = rate.per_ms.max(1);
        let cap = u64::from(rate.burst.max(1)).saturating_mul(per);
        let elapsed = now.saturating_sub(self.at);
        let units = self
            .units
            .saturating_add(elapsed.saturating_mul(u64::from(rate.limit)))
            .min(cap);
        let refilled = Bucket {
            units,
            at: now.max(self.at),
        };
        if units >= per {
            (
                Bucket {
                    units: units - per,
                    ..refilled
                },
                Ok(()),
            )
        } else {
            let missing = per - units;
            let wait = match rate.limit {
                0 => u64::MAX,
                limit => missing.div_ceil(u64::from(limit)),
            };
            (refilled, Err(wait))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(run: u64, key: Option<&str>, priority: i64, created_at: u64) -> Candidate {
        Candidate {
            run: RunId(run),
            workflow: "charge".to_owned(),
            key: key.map(|k| ("charge".to_owned(), k.to_owned())),
            priority,
            created_at,
            ready_at: created_at,
        }
    }

    const LIMIT: [RunLimit<'static>; 1] = [RunLimit {
        workflow: "charge",
        limit: 1,
        on_limit: OnLimit::Queue,
    }];

    #[test]
    fn a_key_at_its_limit_waits_and_keys_are_served_round_robin() {
        let candidates = [
            candidate(1, Some("a"), 0, 0),
            candidate(2, Some("a"), 0, 1),
            candidate(3, Some("b"), 0, 2),
        ];
        let limits = [RunLimit {
            limit: 2,
            ..LIMIT[0]
        }];
        // Room for two: a's first, then b's first (not a's second).
        let plan = plan(&candidates, &HashMap::new(), &limits, 10, 2, AGING_STEP_MS);
        assert_eq!(plan.admit, vec![RunId(1), RunId(3)]);
        let busy = HashMap::from([(("charge".to_owned(), "a".to_owned()), vec![RunId(9)])]);
        let plan = super::plan(&candidates, &busy, &LIMIT, 10, 10, AGING_STEP_MS);
        assert_eq!(plan.admit, vec![RunId(3)]);
    }

    #[test]
    fn priority_ages_so_an_old_run_overtakes() {
        // Higher priority first: run 2 arrived later but outranks run 1.
        let early = [candidate(1, None, 0, 0), candidate(2, None, 10, 5 * 60_000)];
        let first = |c: &[Candidate], now| plan(c, &HashMap::new(), &[], now, 1, 60_000).admit;
        assert_eq!(first(&early, 5 * 60_000), vec![RunId(2)]);
        // A run of priority 10 that arrives more than ten aging steps after run 1 no
        // longer overtakes it: run 1's wait is bounded.
        let late = [
            candidate(1, None, 0, 0),
            candidate(3, None, 10, 11 * 60_000),
        ];
        assert_eq!(first(&late, 11 * 60_000), vec![RunId(1)]);
    }

    #[test]
    fn skip_names_the_holders_and_cancel_previous_asks_them() {
        let candidates = [candidate(2, Some("a"), 0, 0)];
        let busy = HashMap::from([(("charge".to_owned(), "a".to_owned()), vec![RunId(1)])]);
        let skip = [RunLimit {
            on_limit: OnLimit::Skip,
            ..LIMIT[0]
        }];
        let plan = super::plan(&candidates, &busy, &skip, 0, 5, 1);
        assert!(plan.admit.is_empty());
        assert_eq!(plan.skip.len(), 1);
        assert!(plan.skip[0].1.contains("run-1"), "{}", plan.skip[0].1);
        let cancel = [RunLimit {
            on_limit: OnLimit::CancelPrevious,
            ..LIMIT[0]
        }];
        let plan = super::plan(&candidates, &busy, &cancel, 0, 5, 1);
        assert_eq!(plan.cancel, vec![(RunId(1), RunId(2))]);
        assert!(plan.admit.is_empty());
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

    #[test]
    fn a_bucket_lets_at_most_limit_plus_burst_through_per_period() {
        let rate = RateLimit {
            name: "w.s.rate",
            scope: "",
            key: "k",
            limit: 3,
            per_ms: 1_000,
            burst: 2,
        };
        let mut bucket = Bucket::full(&rate, 0);
        let mut taken = Vec::new();
        for now in (0..=1_000).step_by(10) {
            loop {
                let (next, got) = bucket.take(&rate, now);
                bucket = next;
                match got {
                    Ok(()) => taken.push(now),
                    Err(wait) => {
                        assert!(wait > 0);
                        break;
                    }
                }
            }
        }
        assert_eq!(taken.len(), 5, "{taken:?}");
        let (_, got) = Bucket { units: 0, at: 0 }.take(&rate, 0);
        assert_eq!(got, Err(334));
    }
}

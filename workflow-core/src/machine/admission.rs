//! The admission rule under limits, and a rate limit's bucket: which gated runs start,
//! in which order, and what a run whose key is at its limit does; how many tokens a
//! bucket holds. Pure functions of their arguments: every store calls them inside its
//! own transaction ([`crate::store::limits`]), so all stores decide alike and the rules
//! live in one place.

use std::collections::HashMap;

pub use workflow_spec::OnLimit;

use crate::error::RunId;
use crate::journal::Timestamp;

/// The default aging step of priorities: a queued run gains one point of priority per
/// minute it waits, so a run of priority 0 overtakes one of priority 10 that arrived ten
/// minutes after it, and nothing waits forever.
pub const AGING_STEP_MS: u64 = 60_000;

/// How many holders a `KeyUsage` names at most.
pub const HOLDERS_SHOWN: usize = 5;

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

/// The note of a run a newer start of its debounce key replaced.
pub fn debounced_note(by: RunId) -> String {
    format!("debounced by {by}")
}

/// A step's token bucket: at most `burst` tokens, refilled at `limit` per `per_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit<'a> {
    /// The limit's name (`{workflow}.{step}.rate`).
    pub name: &'a str,
    /// The key's scope: the limit's name for a path key, `""` for a static key.
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

    /// The bucket as of `now`, refilled, without taking a token: the whole tokens in it
    /// (at most `burst`) and, unless it is full (or never refills), how long until its next
    /// token.
    pub fn level(self, rate: &RateLimit<'_>, now: Timestamp) -> (u64, Option<u64>) {
        let per = rate.per_ms.max(1);
        let cap = u64::from(rate.burst.max(1)).saturating_mul(per);
        let units = self
            .units
            .saturating_add(
                now.saturating_sub(self.at)
                    .saturating_mul(u64::from(rate.limit)),
            )
            .min(cap);
        let next = match rate.limit {
            _ if units >= cap => None,
            0 => None,
            limit => Some((per - units % per).div_ceil(u64::from(limit))),
        };
        (units / per, next)
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

    #[test]
    fn a_buckets_level_counts_whole_tokens_and_the_wait_for_the_next() {
        let rate = RateLimit {
            name: "w.s.rate",
            scope: "",
            key: "k",
            limit: 3,
            per_ms: 1_000,
            burst: 2,
        };
        let full = Bucket::full(&rate, 0);
        assert_eq!(full.level(&rate, 0), (2, None));
        let (one, _) = full.take(&rate, 0);
        assert_eq!(one.level(&rate, 0), (1, Some(334)));
        assert_eq!(one.level(&rate, 200), (1, Some(134)));
        assert_eq!(one.level(&rate, 334), (2, None));
        // Empty: the next token comes when a take would have it.
        let empty = Bucket { units: 0, at: 0 };
        assert_eq!(empty.level(&rate, 0), (0, Some(334)));
        assert_eq!(empty.take(&rate, 0).1, Err(334));
        let never = RateLimit { limit: 0, ..rate };
        assert_eq!(empty.level(&never, 5_000), (0, None));
    }
}

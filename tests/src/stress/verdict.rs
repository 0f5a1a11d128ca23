//! What the observer's rows say, computed from them alone (pure functions, tested below on
//! rows made to break each rule, so each check is known to be able to fail).
//!
//! - A run is **in flight** from the moment its first attempt began its work to the last
//!   moment any of its attempts is known to have worked (the latest `left_us`, or
//!   `entered_us` of an attempt that never wrote one). The engine takes the run's slot of its
//!   workflow-level key before its first step and gives it back after its last step's
//!   result is committed, so this span lies inside the slot: more than `limit` spans of one
//!   key over one instant means more than `limit` slots held, or code that ran outside its
//!   run's slot. Attempts killed or frozen without writing their end are inside the span,
//!   because a later attempt of the same run (after the takeover) ends it.
//! - A **start** of the rated step is its attempt's `entered_us`. The engine takes the
//!   attempt's token just before it polls the action, so a start follows its token by the
//!   time the worker takes to get from the store's answer to the action (microseconds,
//!   more when the machine is busy): the starts in a window `[t, t + per - lag)` hold
//!   only tokens of `[t - lag, t + per - lag)`, a window of length `per`, as long as no
//!   start lags its token by more than `lag`. The checks use such shortened windows.
//! - A **zombie** is an attempt that did something (began or finished its work) after an
//!   attempt of the same run under a higher fencing token had begun: code of a worker
//!   that lost the run, still running after the takeover. Self-fencing says there is none.

use std::collections::{BTreeMap, HashMap};

use super::observer::Attempt;

/// One run's span in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The run's job.
    pub job: u64,
    /// Its workflow-level key.
    pub key: String,
    /// When its first attempt began, in microseconds since the epoch.
    pub from_us: u64,
    /// The last moment one of its attempts is known to have worked.
    pub to_us: u64,
}

/// The last moment an attempt is known to have worked.
fn last_act(attempt: &Attempt) -> u64 {
    attempt
        .left_us
        .unwrap_or(attempt.entered_us)
        .max(attempt.entered_us)
}

/// Each run's span, by job.
pub fn spans(attempts: &[Attempt]) -> BTreeMap<u64, Span> {
    let mut spans: BTreeMap<u64, Span> = BTreeMap::new();
    for attempt in attempts {
        let span = spans.entry(attempt.job).or_insert_with(|| Span {
            job: attempt.job,
            key: attempt.key.clone(),
            from_us: attempt.entered_us,
            to_us: last_act(attempt),
        });
        span.from_us = span.from_us.min(attempt.entered_us);
        span.to_us = span.to_us.max(last_act(attempt));
    }
    spans
}

/// The most runs of one key in flight at one instant: `(most, when, jobs then)`, per key.
/// A run that ends at the instant another begins is not counted with it.
pub fn most_in_flight(spans: &BTreeMap<u64, Span>) -> BTreeMap<String, (usize, u64, Vec<u64>)> {
    let mut by_key: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for span in spans.values() {
        by_key.entry(&span.key).or_default().push(span);
    }
    by_key
        .into_iter()
        .map(|(key, spans)| {
            // (time, 0 for an end and 1 for a beginning: ends first at a tie, job).
            let mut edges: Vec<(u64, u8, u64)> = spans
                .iter()
                .flat_map(|s| [(s.from_us, 1, s.job), (s.to_us, 0, s.job)])
                .collect();
            edges.sort_unstable();
            let mut open: Vec<u64> = Vec::new();
            let mut most = (0, 0, Vec::new());
            for (at, begins, job) in edges {
                if begins == 1 {
                    open.push(job);
                    if open.len() > most.0 {
                        most = (open.len(), at, open.clone());
                    }
                } else {
                    open.retain(|j| *j != job);
                }
            }
            (key.to_owned(), most)
        })
        .collect()
}

/// The most starts of `step` within any window `[t, t + per_us)`: `(count, t)`.
pub fn busiest_window(attempts: &[Attempt], step: &str, per_us: u64) -> (usize, u64) {
    let mut starts: Vec<u64> = attempts
        .iter()
        .filter(|a| a.step == step)
        .map(|a| a.entered_us)
        .collect();
    starts.sort_unstable();
    let mut best = (0, 0);
    let mut end = 0;
    for (i, &from) in starts.iter().enumerate() {
        while end < starts.len() && starts[end] < from + per_us {
            end += 1;
        }
        if end - i > best.0 {
            best = (end - i, from);
        }
    }
    best
}

/// The most attempts whose token certainly fell within one window `[t, t + per_us)`:
/// `(count, t)`. Each attempt is given as the interval its token was taken in: from a
/// moment known to precede it (the engine journaled the attempt's start before asking
/// for the token) to the beginning of its work. Unlike [`busiest_window`] over the
/// beginnings, this never counts an attempt whose token came before the window, however
/// late its work began, so more than `limit + burst` is a broken bucket, not a slow
/// worker.
pub fn busiest_certain_window(tokens: &[(u64, u64)], per_us: u64) -> (usize, u64) {
    let mut sorted: Vec<(u64, u64)> = tokens.to_vec();
    sorted.sort_unstable();
    let mut best = (0, 0);
    for (i, &(from, _)) in sorted.iter().enumerate() {
        let inside = sorted[i..]
            .iter()
            .take_while(|(lo, _)| *lo < from + per_us)
            .filter(|(_, hi)| *hi < from + per_us)
            .count();
        if inside > best.0 {
            best = (inside, from);
        }
    }
    best
}

/// The zombies: attempts that began or finished their work after an attempt of the same
/// run under a higher fence had begun.
pub fn zombies(attempts: &[Attempt]) -> Vec<&Attempt> {
    let mut by_job: HashMap<u64, Vec<&Attempt>> = HashMap::new();
    for attempt in attempts {
        by_job.entry(attempt.job).or_default().push(attempt);
    }
    let mut found = Vec::new();
    for run in by_job.values() {
        for old in run {
            let superseded = run
                .iter()
                .any(|new| new.fence > old.fence && new.entered_us <= last_act(old));
            if superseded {
                found.push(*old);
            }
        }
    }
    found.sort_by_key(|a| (a.job, a.entered_us));
    found
}

/// A run as it was queued: its key, priority and creation time (ms since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    /// Its workflow-level key.
    pub key: String,
    /// Its priority.
    pub priority: i64,
    /// When it was created (queued), in ms since the epoch.
    pub created_ms: u64,
}

/// The most aging steps (of `aging_ms`) a run created at `a` can be ahead of one created at
/// `b`, at a moment in `[from, to]` (ms): the effective priority is the priority plus the
/// whole aging steps waited.
pub fn aging_lead(a: u64, b: u64, from: u64, to: u64, aging_ms: u64) -> i64 {
    let aging = aging_ms.max(1);
    let steps = |created: u64, t: u64| (t.saturating_sub(created) / aging) as i64;
    let lead = |t: u64| steps(a, t) - steps(b, t);
    // The lead only grows where `a` completes a step: check there and at the start.
    let mut most = lead(from);
    let mut k = from.saturating_sub(a) / aging + 1;
    while a + k * aging <= to {
        most = most.max(lead(a + k * aging));
        k += 1;
    }
    most
}

/// Priority inversions within a key, as `(admitted first, waited though it ranked higher)`.
///
/// Admission order is known from outside only where it is certain: run `a` ran to its
/// end more than `lag_us` before run `b` began, both began their first step under the
/// lease their admission gave them (`admission_fence`: not taken over between admission
/// and first step, so by a worker that was neither killed nor frozen meanwhile), and `b`
/// was queued before any admission could take place (`admissions_from_ms`). Then, as
/// long as an admitted run begins its first step within `lag_us`, `a` was admitted while
/// `b` waited, which the rule allows only if `a`'s effective priority was at least `b`'s
/// at some moment between the first possible admission and `a`'s first step:
/// `priority(b) <= priority(a) + aging_lead(a, b)`.
pub fn inversions(
    attempts: &[Attempt],
    queued: &HashMap<u64, Queued>,
    admission_fence: u64,
    admissions_from_ms: u64,
    aging_ms: u64,
    lag_us: u64,
) -> Vec<(u64, u64)> {
    let spans = spans(attempts);
    let mut first: HashMap<u64, &Attempt> = HashMap::new();
    for attempt in attempts {
        let entry = first.entry(attempt.job).or_insert(attempt);
        if attempt.entered_us < entry.entered_us {
            *entry = attempt;
        }
    }
    let mut by_key: BTreeMap<&str, Vec<(&Span, &Queued)>> = BTreeMap::new();
    for (job, span) in &spans {
        let undisturbed = first.get(job).is_some_and(|a| a.fence == admission_fence);
        if let (true, Some(q)) = (undisturbed, queued.get(job)) {
            if q.created_ms < admissions_from_ms {
                by_key.entry(&span.key).or_default().push((span, q));
            }
        }
    }
    let mut found = Vec::new();
    for runs in by_key.values() {
        for (a, qa) in runs {
            for (b, qb) in runs {
                if b.from_us <= a.to_us + lag_us {
                    continue;
                }
                let lead = aging_lead(
                    qa.created_ms,
                    qb.created_ms,
                    admissions_from_ms,
                    a.from_us / 1000,
                    aging_ms,
                );
                if qb.priority > qa.priority + lead {
                    found.push((a.job, b.job));
                }
            }
        }
    }
    found.sort_unstable();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(job: u64, key: &str, step: &str, fence: u64, from: u64, to: Option<u64>) -> Attempt {
        Attempt {
            job,
            key: key.into(),
            step: step.into(),
            attempt: 1,
            fence,
            pid: 1,
            entered_us: from,
            left_us: to,
        }
    }

    #[test]
    fn a_run_spans_its_attempts_and_an_unfinished_one_counts_until_it_began() {
        let rows = [
            attempt(1, "k", "a", 1, 10, Some(20)),
            attempt(1, "k", "b", 1, 25, None),
            attempt(1, "k", "b", 2, 40, Some(50)),
            attempt(2, "k", "a", 1, 5, None),
        ];
        let spans = spans(&rows);
        assert_eq!((spans[&1].from_us, spans[&1].to_us), (10, 50));
        assert_eq!((spans[&2].from_us, spans[&2].to_us), (5, 5));
    }

    #[test]
    fn three_overlapping_runs_of_a_key_are_three_in_flight_and_touching_ones_are_not() {
        let rows = [
            attempt(1, "k", "a", 1, 0, Some(100)),
            attempt(2, "k", "a", 1, 50, Some(150)),
            attempt(3, "k", "a", 1, 100, Some(200)),
            attempt(4, "other", "a", 1, 60, Some(70)),
        ];
        let most = most_in_flight(&spans(&rows));
        assert_eq!(most["k"].0, 2, "run 1 ends where run 3 begins");
        assert_eq!(most["other"].0, 1);
        let rows = [
            attempt(1, "k", "a", 1, 0, Some(100)),
            attempt(2, "k", "a", 1, 50, Some(150)),
            attempt(3, "k", "a", 1, 99, Some(200)),
        ];
        let most = most_in_flight(&spans(&rows));
        assert_eq!(most["k"], (3, 99, vec![1, 2, 3]));
    }

    #[test]
    fn a_zombie_attempt_keeps_its_run_in_flight_past_the_run_end() {
        // Run 1 finished at 100 on its new owner; its old owner wrote its end at 300,
        // when runs 2 and 3 held the key's two slots.
        let rows = [
            attempt(1, "k", "a", 1, 0, Some(300)),
            attempt(1, "k", "a", 2, 50, Some(100)),
            attempt(2, "k", "a", 1, 110, Some(400)),
            attempt(3, "k", "a", 1, 120, Some(400)),
        ];
        assert_eq!(most_in_flight(&spans(&rows))["k"].0, 3);
        let zombies = zombies(&rows);
        assert_eq!(zombies.len(), 1);
        assert_eq!((zombies[0].job, zombies[0].fence), (1, 1));
    }

    #[test]
    fn an_attempt_that_stopped_before_the_takeover_is_no_zombie() {
        let rows = [
            attempt(1, "k", "a", 1, 0, Some(40)),
            attempt(1, "k", "b", 1, 45, None),
            attempt(1, "k", "b", 2, 60, Some(80)),
        ];
        assert!(zombies(&rows).is_empty());
    }

    #[test]
    fn the_busiest_window_counts_starts_of_the_rated_step_within_half_open_windows() {
        let mut rows: Vec<Attempt> = (0..25)
            .map(|i| attempt(i, "k", "call", 1, i * 40, Some(i * 40 + 1)))
            .collect();
        rows.push(attempt(99, "k", "other", 1, 10, Some(11)));
        // 25 starts at 0, 40, ..., 960: all within [0, 1000).
        assert_eq!(busiest_window(&rows, "call", 1000), (25, 0));
        // One more at 1000 is outside [0, 1000) but makes [40, 1040) hold 25.
        rows.push(attempt(25, "k", "call", 1, 1000, None));
        assert_eq!(busiest_window(&rows, "call", 1000), (25, 0));
        // One more at 999 makes 26.
        rows.push(attempt(26, "k", "call", 1, 999, None));
        assert_eq!(busiest_window(&rows, "call", 1000), (26, 0));
        assert_eq!(busiest_window(&rows, "none", 1000), (0, 0));
    }

    #[test]
    fn only_tokens_certainly_inside_a_window_count_in_it() {
        // 25 tokens each known within 5 µs, from 100 to 825, and one taken somewhere in
        // [50, 110]: all 26 lie within [50, 1050) for certain.
        let mut tokens: Vec<(u64, u64)> =
            (0..25).map(|i| (100 + i * 30, 100 + i * 30 + 5)).collect();
        tokens.push((50, 110));
        assert_eq!(busiest_certain_window(&tokens, 1000), (26, 50));
        // One known only to lie in [0, 1000] lies within no window of 1000 with the 25
        // for certain.
        tokens.pop();
        tokens.push((0, 1_000));
        assert_eq!(busiest_certain_window(&tokens, 1000), (25, 0));
        // One more in [40, 60] does.
        tokens.push((40, 60));
        assert_eq!(busiest_certain_window(&tokens, 1000), (26, 0));
        assert_eq!(busiest_certain_window(&[], 1000), (0, 0));
    }

    fn queued(key: &str, priority: i64, created_ms: u64) -> Queued {
        Queued {
            key: key.into(),
            priority,
            created_ms,
        }
    }

    #[test]
    fn aging_gives_a_lead_of_the_whole_steps_one_run_waited_longer() {
        // Created 100 ms apart, aging step 1 s: between 1.0 s and 1.1 s the older is ahead.
        assert_eq!(aging_lead(0, 100, 500, 900, 1000), 0);
        assert_eq!(aging_lead(0, 100, 500, 1000, 1000), 1);
        assert_eq!(aging_lead(0, 100, 1050, 1060, 1000), 1);
        assert_eq!(aging_lead(100, 0, 500, 5000, 1000), 0);
        assert_eq!(aging_lead(0, 2500, 3000, 3000, 1000), 3);
    }

    #[test]
    fn a_lower_priority_run_that_ran_before_a_higher_one_of_its_key_is_an_inversion() {
        // Jobs 1 (priority 0) and 2 (priority 2) of key k, both queued at 0; 1 ran from
        // 10 ms to 20 ms, 2 began at 30 ms. Job 3, of another key, ran meanwhile.
        let rows = [
            attempt(1, "k", "a", 1, 10_000, Some(20_000)),
            attempt(2, "k", "a", 1, 30_000, Some(40_000)),
            attempt(3, "j", "a", 1, 30_000, Some(40_000)),
        ];
        let mut q = HashMap::new();
        q.insert(1, queued("k", 0, 0));
        q.insert(2, queued("k", 2, 0));
        q.insert(3, queued("j", 0, 0));
        assert_eq!(inversions(&rows, &q, 1, 5, 60_000, 0), vec![(1, 2)]);
        // With an aging step of 1 ms, job 1 (queued 3 ms earlier) had aged enough; 1 ms
        // earlier is not enough.
        q.insert(2, queued("k", 2, 1));
        assert_eq!(inversions(&rows, &q, 1, 5, 1, 0), vec![(1, 2)]);
        q.insert(2, queued("k", 2, 3));
        assert!(inversions(&rows, &q, 1, 5, 1, 0).is_empty());
        // Not when job 1's first step ran under a takeover's lease (its admission time
        // is unknown), nor when job 2 was queued after admissions began.
        let mut taken = rows.clone();
        taken[0].fence = 2;
        q.insert(2, queued("k", 2, 0));
        assert!(inversions(&taken, &q, 1, 5, 60_000, 0).is_empty());
        q.insert(2, queued("k", 2, 6));
        assert!(inversions(&rows, &q, 1, 5, 60_000, 0).is_empty());
        // Nor when job 2 began within the lag allowed after job 1 ended.
        q.insert(2, queued("k", 2, 0));
        assert!(inversions(&rows, &q, 1, 5, 60_000, 10_000).is_empty());
        assert_eq!(inversions(&rows, &q, 1, 5, 60_000, 9_999), vec![(1, 2)]);
        // Nor when the two overlapped.
        let mut overlapping = rows.clone();
        overlapping[1].entered_us = 15_000;
        assert!(inversions(&overlapping, &q, 1, 5, 60_000, 0).is_empty());
    }
}

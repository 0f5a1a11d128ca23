//! Which due ticks run and which are recorded as missed.
//!
//! A running engine fires each tick when it comes due; a tick found due later than
//! [`ON_TIME`] was missed (no engine ran, or it was paused). What happens to missed ticks
//! is the schedule's `catchup` within its `window`:
//! - `latest`: the newest missed tick within the window runs;
//! - `all(max: N)`: the newest N missed ticks within the window run, oldest first;
//! - `none`: no missed tick runs.
//!
//! Every due tick that does not run is counted as missed: nothing is dropped silently, and
//! however long the outage, at most one (`latest`) or N runs start: no storm.

use std::time::Duration;

use super::{jitter, Catchup, CompiledSchedule, Timestamp};

/// A tick found due within this long after its time (plus its jitter) is on time, not
/// missed: the slack a busy engine's poll needs.
pub const ON_TIME: Duration = Duration::from_secs(60);

/// The most due ticks one call examines; older ones beyond it are counted as missed
/// without being listed (an outage of years on a per-second schedule stays cheap).
const MAX_SCAN: usize = 1_000_000;

/// What to do with the ticks due since the last one handled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// The ticks to start a run for, oldest first.
    pub run: Vec<Timestamp>,
    /// How many due ticks will not run (too old for the window, or left out by `catchup`).
    pub missed: u64,
    /// The oldest and the newest missed tick, when any was missed.
    pub missed_range: Option<(Timestamp, Timestamp)>,
    /// The newest tick examined: the schedule's state moves to it, so no tick is decided
    /// twice. `None` when nothing was due.
    pub last: Option<Timestamp>,
}

/// Decides the ticks of schedule `id` due by `now` after `after`: which run and which are
/// missed. A tick is due once its fire time (its scheduled time plus its [`jitter`]) has
/// come.
///
/// `after` is the last tick already handled (or the time the schedule was created).
pub fn catch_up(
    schedule: &CompiledSchedule,
    id: &str,
    after: Timestamp,
    now: Timestamp,
) -> CatchUp {
    let policy = schedule.schedule();
    let mut due = schedule.between(after, now, MAX_SCAN);
    // Jitter delays a tick's start past its scheduled time: it is not due until it fires.
    while due
        .last()
        .is_some_and(|&tick| fire_time(id, tick, policy.jitter) > now)
    {
        due.pop();
    }
    let Some(&newest) = due.last() else {
        return CatchUp::default();
    };
    let window = millis(policy.window);
    let slack = millis(ON_TIME) + policy.jitter.map_or(0, millis);
    let on_time = now.saturating_sub(newest) <= slack;
    let late = if on_time {
        &due[..due.len() - 1]
    } else {
        &due[..]
    };
    let in_window: Vec<Timestamp> = late
        .iter()
        .copied()
        .filter(|&tick| now.saturating_sub(tick) <= window)
        .collect();
    let mut run: Vec<Timestamp> = match policy.catchup {
        Catchup::Latest => in_window.last().copied().into_iter().collect(),
        Catchup::All { max } => {
            let keep = in_window.len().min(max as usize);
            in_window[in_window.len() - keep..].to_vec()
        }
        Catchup::None => Vec::new(),
    };
    if on_time {
        // The current tick always runs; with `latest` it replaces the older missed one.
        if policy.catchup == Catchup::Latest {
            run.clear();
        }
        if let Catchup::All { max } = policy.catchup {
            if run.len() >= max as usize && !run.is_empty() {
                run.remove(0);
            }
        }
        run.push(newest);
    }
    let mut missed_ticks = due.iter().copied().filter(|tick| !run.contains(tick));
    let first_missed = missed_ticks.next();
    let last_missed = missed_ticks.last().or(first_missed);
    let scanned_missed = (due.len() - run.len()) as u64;
    // Ticks beyond the scan bound are older than everything listed: count them too.
    let beyond = if due.len() == MAX_SCAN {
        count_beyond(schedule, *due.last().unwrap_or(&after), now)
    } else {
        0
    };
    CatchUp {
        run,
        missed: scanned_missed + beyond,
        missed_range: first_missed.zip(last_missed),
        last: Some(if beyond > 0 { now } else { newest }),
    }
}

fn count_beyond(schedule: &CompiledSchedule, after: Timestamp, now: Timestamp) -> u64 {
    let mut count = 0;
    let mut cursor = after;
    while let Some(tick) = schedule.next_after(cursor).filter(|&t| t <= now) {
        count += 1;
        cursor = tick;
    }
    count
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// When schedule `id`'s tick at `scheduled` fires: its scheduled time plus its jitter.
pub fn fire_time(id: &str, scheduled: Timestamp, max_jitter: Option<Duration>) -> Timestamp {
    scheduled.saturating_add(millis(jitter(id, scheduled, max_jitter)))
}

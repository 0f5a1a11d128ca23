//! Which due ticks run and which are recorded as missed.
//!
//! A running engine fires each tick when it comes due; a tick found due later than
//! [`ON_TIME`] was missed (no engine ran, or it was paused). What happens to missed ticks
//! is the schedule's `catchup` within its `window`; ticks found on time run whatever it
//! says:
//! - `latest`: the newest missed tick within the window runs, unless a tick is on time:
//!   the on-time tick is then the one run, and every missed tick is missed;
//! - `all(max: N)`: the newest missed ticks within the window run, oldest first, so that
//!   at most N run counting the on-time ones;
//! - `none`: no missed tick runs.
//!
//! Every due tick that does not run is counted as missed: nothing is dropped silently, and
//! however long the outage, at most one (`latest`) or N runs start: no storm.

use std::time::Duration;

use super::{jitter, Catchup, CompiledSchedule, Timestamp};

/// A tick found due within this long after its time (plus its jitter) is on time, not
/// missed: the slack a busy engine's poll needs.
pub const ON_TIME: Duration = Duration::from_secs(60);

/// The most ticks within the window one call lists (a per-second schedule with a day's
/// window has 86,400); ticks older than the window are counted without being listed.
const MAX_LISTED: usize = 1_000_000;

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
    let window = millis(policy.window);
    let slack = millis(ON_TIME) + policy.jitter.map_or(0, millis);
    // Ticks older than both the window and the slack can only be missed: they are counted,
    // not listed, so an outage of any length costs no memory.
    let horizon = now.saturating_sub(window.max(slack));
    let (mut old, mut oldest_missed, mut newest_old) = (0u64, None, None);
    let mut cursor = after;
    while let Some(tick) = schedule.next_after(cursor).filter(|&t| t <= horizon) {
        old += 1;
        oldest_missed.get_or_insert(tick);
        newest_old = Some(tick);
        cursor = tick;
    }
    let mut due = schedule.between(cursor, now, MAX_LISTED);
    // Jitter delays a tick's start past its scheduled time: it is not due until it fires.
    while due
        .last()
        .is_some_and(|&tick| fire_time(id, tick, policy.jitter) > now)
    {
        due.pop();
    }
    // Oldest first: the late ticks, then those found within the slack of their time, which
    // run whatever the policy (the engine was busy, not down).
    let split = due.partition_point(|&tick| now.saturating_sub(tick) > slack);
    let (late, on_time) = due.split_at(split);
    let caught_up = match policy.catchup {
        Catchup::Latest if on_time.is_empty() => late.len().min(1),
        Catchup::Latest | Catchup::None => 0,
        Catchup::All { max } => (max as usize).saturating_sub(on_time.len()).min(late.len()),
    };
    let mut run: Vec<Timestamp> = late[late.len() - caught_up..].to_vec();
    run.extend_from_slice(on_time);
    let missed_late = &late[..late.len() - caught_up];
    let first_missed = oldest_missed.or(missed_late.first().copied());
    let last_missed = missed_late.last().copied().or(newest_old);
    let last = due.last().copied().or(newest_old);
    CatchUp {
        run,
        missed: old + missed_late.len() as u64,
        missed_range: first_missed.zip(last_missed),
        last,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// When schedule `id`'s tick at `scheduled` fires: its scheduled time plus its jitter.
pub fn fire_time(id: &str, scheduled: Timestamp, max_jitter: Option<Duration>) -> Timestamp {
    scheduled.saturating_add(millis(jitter(id, scheduled, max_jitter)))
}

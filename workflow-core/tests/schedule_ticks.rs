//! The pure schedule rules: next ticks in a zone, daylight-saving gaps and folds, catch-up
//! after downtime, jitter and overlap. No runtime, no clock: times in, decisions out.

use std::time::Duration;

use workflow_core::schedule::{
    catch_up, decide_overlap, jitter, Catchup, CompiledSchedule, DstGap, Overlap, OverlapDecision,
    Schedule, Timestamp,
};

fn at(text: &str) -> Timestamp {
    let instant: jiff::Timestamp = text.parse().expect("an RFC 3339 instant");
    instant.as_millisecond() as Timestamp
}

fn show(ticks: &[Timestamp]) -> Vec<String> {
    ticks
        .iter()
        .map(|&t| {
            jiff::Timestamp::from_millisecond(t as i64)
                .expect("in range")
                .to_string()
        })
        .collect()
}

fn compiled(cron: &str, tz: &str, gap: DstGap) -> CompiledSchedule {
    let mut schedule = Schedule::new(cron).in_zone(tz);
    schedule.dst_gap = gap;
    CompiledSchedule::new(schedule).expect("a valid schedule")
}

fn day(schedule: &CompiledSchedule, from: &str, to: &str) -> Vec<String> {
    show(&schedule.between(at(from), at(to), 100))
}

#[test]
fn weekday_mornings_in_berlin_skip_the_weekend() {
    let schedule = compiled("0 9 * * MON-FRI", "Europe/Berlin", DstGap::NextValid);
    // Friday 2026-01-09 10:00 Berlin: the next ticks are Monday and Tuesday at 09:00 CET.
    let next = schedule.upcoming(at("2026-01-09T09:00:00Z"), 2);
    assert_eq!(
        show(&next),
        ["2026-01-12T08:00:00Z", "2026-01-13T08:00:00Z"]
    );
    assert_eq!(
        schedule.local(next[0]),
        "2026-01-12T09:00:00+01:00[Europe/Berlin]"
    );
}

#[test]
fn six_fields_fire_every_few_seconds() {
    let schedule = compiled("*/20 * * * * *", "UTC", DstGap::NextValid);
    let ticks = schedule.between(at("2026-01-01T00:00:00Z"), at("2026-01-01T00:01:00Z"), 10);
    assert_eq!(
        show(&ticks),
        [
            "2026-01-01T00:00:20Z",
            "2026-01-01T00:00:40Z",
            "2026-01-01T00:01:00Z"
        ]
    );
}

// ------------------------------------------------------------------ daylight saving time

#[test]
fn berlin_spring_gap_hourly_fires_each_real_hour_once() {
    for gap in [DstGap::NextValid, DstGap::Skip] {
        let schedule = compiled("0 * * * *", "Europe/Berlin", gap);
        // 02:00 CET does not exist on 2026-03-29: the clock jumps from 02:00 to 03:00.
        assert_eq!(
            day(&schedule, "2026-03-28T23:30:00Z", "2026-03-29T03:00:00Z"),
            [
                "2026-03-29T00:00:00Z", // 01:00 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST (02:00 does not exist, so it does not fire)
                "2026-03-29T02:00:00Z", // 04:00 CEST
                "2026-03-29T03:00:00Z", // 05:00 CEST
            ],
            "{gap:?}"
        );
    }
}

#[test]
fn berlin_spring_gap_daily_0230_follows_dst_gap() {
    let next_valid = compiled("30 2 * * *", "Europe/Berlin", DstGap::NextValid);
    assert_eq!(
        day(&next_valid, "2026-03-28T00:00:00Z", "2026-03-30T12:00:00Z"),
        [
            "2026-03-28T01:30:00Z", // 02:30 CET
            "2026-03-29T01:00:00Z", // 02:30 does not exist: 03:00 CEST, the end of the gap
            "2026-03-30T00:30:00Z", // 02:30 CEST
        ]
    );
    let skip = compiled("30 2 * * *", "Europe/Berlin", DstGap::Skip);
    assert_eq!(
        day(&skip, "2026-03-28T00:00:00Z", "2026-03-30T12:00:00Z"),
        ["2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z"]
    );
}

#[test]
fn berlin_autumn_fold_fires_each_real_hour_for_a_wildcard_and_once_for_a_fixed_time() {
    let hourly = compiled("0 * * * *", "Europe/Berlin", DstGap::NextValid);
    // 02:00-03:00 happens twice on 2026-10-25 (CEST, then CET). A wildcard-hour pattern
    // fires at every real hour, so 02:00 fires twice, once in each offset.
    assert_eq!(
        day(&hourly, "2026-10-24T22:30:00Z", "2026-10-25T03:00:00Z"),
        [
            "2026-10-24T23:00:00Z", // 01:00 CEST
            "2026-10-25T00:00:00Z", // 02:00 CEST (the first 02:00)
            "2026-10-25T01:00:00Z", // 02:00 CET (the second 02:00)
            "2026-10-25T02:00:00Z", // 03:00 CET
            "2026-10-25T03:00:00Z", // 04:00 CET
        ]
    );
    // A fixed time fires once, at the first of its two instants.
    let daily = compiled("30 2 * * *", "Europe/Berlin", DstGap::NextValid);
    assert_eq!(
        day(&daily, "2026-10-24T12:00:00Z", "2026-10-26T12:00:00Z"),
        ["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]
    );
    // So does a fixed hour range: only a `*` in the minute or hour field makes a wildcard.
    let range = compiled("30 1-3 * * *", "Europe/Berlin", DstGap::NextValid);
    assert_eq!(
        day(&range, "2026-10-24T22:00:00Z", "2026-10-25T03:00:00Z"),
        [
            "2026-10-24T23:30:00Z", // 01:30 CEST
            "2026-10-25T00:30:00Z", // 02:30 CEST (02:30 CET does not fire)
            "2026-10-25T02:30:00Z", // 03:30 CET
        ]
    );
}

#[test]
fn new_york_spring_gap() {
    let hourly = compiled("0 * * * *", "America/New_York", DstGap::Skip);
    assert_eq!(
        day(&hourly, "2026-03-08T05:30:00Z", "2026-03-08T08:00:00Z"),
        [
            "2026-03-08T06:00:00Z", // 01:00 EST
            "2026-03-08T07:00:00Z", // 03:00 EDT
            "2026-03-08T08:00:00Z", // 04:00 EDT
        ]
    );
    let next_valid = compiled("30 2 * * *", "America/New_York", DstGap::NextValid);
    assert_eq!(
        day(&next_valid, "2026-03-07T12:00:00Z", "2026-03-09T12:00:00Z"),
        ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]
    );
    let skip = compiled("30 2 * * *", "America/New_York", DstGap::Skip);
    assert_eq!(
        day(&skip, "2026-03-07T12:00:00Z", "2026-03-09T12:00:00Z"),
        ["2026-03-09T06:30:00Z"]
    );
}

#[test]
fn new_york_autumn_fold() {
    let hourly = compiled("0 * * * *", "America/New_York", DstGap::NextValid);
    // 01:00-02:00 happens twice on 2026-11-01 (EDT, then EST): 01:00 fires in each.
    assert_eq!(
        day(&hourly, "2026-11-01T03:30:00Z", "2026-11-01T08:00:00Z"),
        [
            "2026-11-01T04:00:00Z", // 00:00 EDT
            "2026-11-01T05:00:00Z", // 01:00 EDT (the first 01:00)
            "2026-11-01T06:00:00Z", // 01:00 EST (the second 01:00)
            "2026-11-01T07:00:00Z", // 02:00 EST
            "2026-11-01T08:00:00Z", // 03:00 EST
        ]
    );
    // Every quarter hour: the repeated hour's quarters fire in both offsets, in the order
    // they happen.
    let quarters = compiled("*/15 * * * *", "America/New_York", DstGap::NextValid);
    assert_eq!(
        day(&quarters, "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"),
        [
            "2026-11-01T05:45:00Z", // 01:45 EDT
            "2026-11-01T06:00:00Z", // 01:00 EST
            "2026-11-01T06:15:00Z", // 01:15 EST
            "2026-11-01T06:30:00Z", // 01:30 EST
        ]
    );
    // 01:30 is a fixed time that happens twice: once, in EDT.
    let fixed = compiled("30 1 * * *", "America/New_York", DstGap::NextValid);
    assert_eq!(
        day(&fixed, "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z"),
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    );
    // 02:30 happens once in New York that day (after the fold): once, in EST.
    let daily = compiled("30 2 * * *", "America/New_York", DstGap::NextValid);
    assert_eq!(
        day(&daily, "2026-10-31T12:00:00Z", "2026-11-02T12:00:00Z"),
        ["2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"]
    );
}

/// Every tick in `[from, from + hours)` of a whole-hour wildcard pattern, counted.
fn ticks_in(schedule: &CompiledSchedule, from: &str, hours: u64) -> Vec<Timestamp> {
    let start = at(from);
    schedule.between(start - 1, start + hours * 3_600_000 - 1, 1_000)
}

#[test]
fn a_wildcard_hour_pattern_fires_once_each_real_hour_through_both_changes_in_two_zones() {
    // 72 real hours around each change: 72 ticks, one an hour apart, never two in an hour
    // and never an hour without one, for both zones and both `dst_gap` settings (which a
    // wildcard pattern has no use for).
    let changes = [
        ("Europe/Berlin", "2026-03-28T00:30:00Z"), // spring: 02:00 CET -> 03:00 CEST
        ("Europe/Berlin", "2026-10-24T00:30:00Z"), // autumn: 03:00 CEST -> 02:00 CET
        ("America/New_York", "2026-03-07T05:30:00Z"), // spring: 02:00 EST -> 03:00 EDT
        ("America/New_York", "2026-10-31T04:30:00Z"), // autumn: 02:00 EDT -> 01:00 EST
    ];
    for (tz, from) in changes {
        for gap in [DstGap::NextValid, DstGap::Skip] {
            let schedule = compiled("30 * * * *", tz, gap);
            assert!(schedule.is_wildcard());
            let ticks = ticks_in(&schedule, from, 72);
            assert_eq!(
                ticks.len(),
                72,
                "{tz} from {from} {gap:?}: {:?}",
                show(&ticks)
            );
            assert!(
                ticks.windows(2).all(|w| w[1] - w[0] == 3_600_000),
                "{tz} from {from} {gap:?}: {:?}",
                show(&ticks)
            );
        }
    }
}

#[test]
fn a_spring_gap_loses_nothing_for_a_wildcard_and_makes_up_a_fixed_time() {
    // Berlin, 2026-03-29: 02:00-03:00 does not exist. Every quarter hour: 01:45 CET is
    // followed by 03:00 CEST, fifteen real minutes later; no tick stands in for the
    // quarters of the hour that did not happen, whatever `dst_gap` says.
    for gap in [DstGap::NextValid, DstGap::Skip] {
        let quarters = compiled("*/15 * * * *", "Europe/Berlin", gap);
        assert_eq!(
            day(&quarters, "2026-03-29T00:30:00Z", "2026-03-29T01:15:00Z"),
            [
                "2026-03-29T00:45:00Z", // 01:45 CET
                "2026-03-29T01:00:00Z", // 03:00 CEST
                "2026-03-29T01:15:00Z", // 03:15 CEST
            ],
            "{gap:?}"
        );
        // `30 * * * *`: 01:30 CET, then 03:30 CEST, an hour later; 02:30 does not exist.
        let half_past = compiled("30 * * * *", "Europe/Berlin", gap);
        assert_eq!(
            day(&half_past, "2026-03-29T00:00:00Z", "2026-03-29T02:00:00Z"),
            ["2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"],
            "{gap:?}"
        );
    }
    // New York, 2026-03-08: a fixed 02:15 and 02:45 both fall in the gap; with
    // `next_valid` they are made up at 03:00 EDT, as one tick.
    let fixed = compiled("15,45 2 * * *", "America/New_York", DstGap::NextValid);
    assert!(!fixed.is_wildcard());
    assert_eq!(
        day(&fixed, "2026-03-08T05:00:00Z", "2026-03-08T12:00:00Z"),
        ["2026-03-08T07:00:00Z"]
    );
}

#[test]
fn which_patterns_are_wildcards() {
    for (cron, wildcard) in [
        ("0 * * * *", true),
        ("*/15 * * * *", true),
        ("30 */2 * * *", true),
        ("* 9 * * *", true),
        ("@hourly", true),
        ("0 */20 * * * *", true),
        ("30 2 * * *", false),
        ("0 9 * * MON-FRI", false),
        ("0 1-23 * * *", false),
        ("@daily", false),
        ("*/20 30 2 * * *", false),
    ] {
        let schedule = compiled(cron, "UTC", DstGap::NextValid);
        assert_eq!(schedule.is_wildcard(), wildcard, "{cron}");
    }
}

#[test]
fn a_year_of_ticks_never_repeats_or_goes_back() {
    for tz in ["Europe/Berlin", "America/New_York"] {
        for cron in ["0 * * * *", "30 2 * * *", "*/15 1-3 * * *", "*/7 * * * *"] {
            for gap in [DstGap::NextValid, DstGap::Skip] {
                let schedule = compiled(cron, tz, gap);
                let ticks = schedule.between(
                    at("2026-01-01T00:00:00Z"),
                    at("2027-01-01T00:00:00Z"),
                    20_000,
                );
                assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{tz} {cron} {gap:?}");
                assert!(!ticks.is_empty());
            }
        }
    }
}

// ------------------------------------------------------------------------------ catch-up

fn daily(catchup: Catchup, window: Duration) -> CompiledSchedule {
    let mut schedule = Schedule::new("0 9 * * *");
    schedule.catchup = catchup;
    schedule.window = window;
    CompiledSchedule::new(schedule).expect("valid")
}

const DAY: Duration = Duration::from_secs(86_400);

#[test]
fn three_days_down_with_latest_runs_only_the_newest_tick_in_the_window() {
    let schedule = daily(Catchup::Latest, Duration::from_secs(6 * 3600));
    // Last handled Monday 09:00; back on Thursday 10:00: Tue, Wed, Thu 09:00 are due.
    let decision = catch_up(
        &schedule,
        "report",
        at("2026-01-05T09:00:00Z"),
        at("2026-01-08T10:00:00Z"),
    );
    assert_eq!(show(&decision.run), ["2026-01-08T09:00:00Z"]);
    assert_eq!(decision.missed, 2);
    assert_eq!(
        decision.missed_range,
        Some((at("2026-01-06T09:00:00Z"), at("2026-01-07T09:00:00Z")))
    );
    assert_eq!(decision.last, Some(at("2026-01-08T09:00:00Z")));
}

#[test]
fn three_days_down_with_all_runs_at_most_n_within_the_window() {
    let wide = daily(Catchup::All { max: 10 }, 4 * DAY);
    let decision = catch_up(
        &wide,
        "report",
        at("2026-01-05T09:00:00Z"),
        at("2026-01-08T10:00:00Z"),
    );
    assert_eq!(
        show(&decision.run),
        [
            "2026-01-06T09:00:00Z",
            "2026-01-07T09:00:00Z",
            "2026-01-08T09:00:00Z"
        ]
    );
    assert_eq!(decision.missed, 0);

    let bounded = daily(Catchup::All { max: 2 }, 4 * DAY);
    let decision = catch_up(
        &bounded,
        "report",
        at("2026-01-05T09:00:00Z"),
        at("2026-01-08T10:00:00Z"),
    );
    assert_eq!(
        show(&decision.run),
        ["2026-01-07T09:00:00Z", "2026-01-08T09:00:00Z"]
    );
    assert_eq!(decision.missed, 1);

    // A narrow window: the older ticks are missed whatever `max` allows.
    let narrow = daily(Catchup::All { max: 10 }, Duration::from_secs(6 * 3600));
    let decision = catch_up(
        &narrow,
        "report",
        at("2026-01-05T09:00:00Z"),
        at("2026-01-08T10:00:00Z"),
    );
    assert_eq!(show(&decision.run), ["2026-01-08T09:00:00Z"]);
    assert_eq!(decision.missed, 2);
}

#[test]
fn three_days_down_with_none_runs_nothing_and_counts_every_tick() {
    let schedule = daily(Catchup::None, 4 * DAY);
    let decision = catch_up(
        &schedule,
        "report",
        at("2026-01-05T09:00:00Z"),
        at("2026-01-08T10:00:00Z"),
    );
    assert!(decision.run.is_empty());
    assert_eq!(decision.missed, 3);
    assert_eq!(decision.last, Some(at("2026-01-08T09:00:00Z")));
}

#[test]
fn an_hourly_schedule_after_three_days_starts_no_storm() {
    let mut schedule = Schedule::new("0 * * * *");
    schedule.catchup = Catchup::All { max: 3 };
    schedule.window = Duration::from_secs(6 * 3600);
    let schedule = CompiledSchedule::new(schedule).expect("valid");
    let decision = catch_up(
        &schedule,
        "report",
        at("2026-01-05T00:00:00Z"),
        at("2026-01-08T00:30:00Z"),
    );
    assert_eq!(
        show(&decision.run),
        [
            "2026-01-07T22:00:00Z",
            "2026-01-07T23:00:00Z",
            "2026-01-08T00:00:00Z"
        ]
    );
    assert_eq!(decision.missed, 72 - 3);
}

#[test]
fn a_tick_found_on_time_runs_under_every_policy() {
    for catchup in [Catchup::Latest, Catchup::All { max: 1 }, Catchup::None] {
        let schedule = daily(catchup, DAY);
        let decision = catch_up(
            &schedule,
            "report",
            at("2026-01-05T09:00:00Z"),
            at("2026-01-06T09:00:01Z"),
        );
        assert_eq!(show(&decision.run), ["2026-01-06T09:00:00Z"], "{catchup}");
        assert_eq!(decision.missed, 0, "{catchup}");
    }
    // Nothing due: nothing to decide, and the state does not move.
    let schedule = daily(Catchup::Latest, DAY);
    let decision = catch_up(
        &schedule,
        "report",
        at("2026-01-05T09:00:00Z"),
        at("2026-01-06T08:59:59Z"),
    );
    assert_eq!(decision, Default::default());
}

#[test]
fn latest_after_a_restart_runs_the_on_time_tick_or_else_the_newest_missed_one() {
    // The guide's timeline (schedules chapter): `0 * * * *`, the engine down from 06:10 (06:00 was handled).
    let hourly = |catchup| {
        let mut schedule = Schedule::new("0 * * * *");
        schedule.catchup = catchup;
        CompiledSchedule::new(schedule).expect("valid")
    };
    let handled = at("2026-01-05T06:00:00Z");
    let back = |schedule: &CompiledSchedule, now: &str| {
        let decision = catch_up(schedule, "hourly", handled, at(now));
        (show(&decision.run), decision.missed)
    };
    let latest = hourly(Catchup::Latest);
    // Back at 09:20: 07:00, 08:00 and 09:00 are all late; the newest runs.
    assert_eq!(
        back(&latest, "2026-01-05T09:20:00Z"),
        (vec!["2026-01-05T09:00:00Z".to_owned()], 2)
    );
    // Back at 09:00:30: 09:00 is on time and is the one run; 08:00, the newest missed
    // tick, does not run.
    assert_eq!(
        back(&latest, "2026-01-05T09:00:30Z"),
        (vec!["2026-01-05T09:00:00Z".to_owned()], 2)
    );
    // Back at 08:59: 07:00 and 08:00 are late; 08:00 runs, and 09:00 comes at its time.
    assert_eq!(
        back(&latest, "2026-01-05T08:59:00Z"),
        (vec!["2026-01-05T08:00:00Z".to_owned()], 1)
    );
    // `all(max: 2)` back at 09:00:30: the on-time tick and one missed tick make the two.
    assert_eq!(
        back(&hourly(Catchup::All { max: 2 }), "2026-01-05T09:00:30Z"),
        (
            vec![
                "2026-01-05T08:00:00Z".to_owned(),
                "2026-01-05T09:00:00Z".to_owned()
            ],
            1
        )
    );
    // `none` back at 09:00:30: the on-time tick still runs.
    assert_eq!(
        back(&hourly(Catchup::None), "2026-01-05T09:00:30Z"),
        (vec!["2026-01-05T09:00:00Z".to_owned()], 2)
    );
}

#[test]
fn ticks_found_a_few_seconds_late_all_run() {
    // A busy engine looks five seconds after the last pass: five per-second ticks are due,
    // all within the slack of their time, so none is missed under any policy.
    for catchup in [Catchup::Latest, Catchup::All { max: 2 }, Catchup::None] {
        let mut schedule = Schedule::new("* * * * * *");
        schedule.catchup = catchup;
        let schedule = CompiledSchedule::new(schedule).expect("valid");
        let start = at("2026-01-05T09:00:00Z");
        let decision = catch_up(&schedule, "fast", start, start + 5_000);
        assert_eq!(decision.run.len(), 5, "{catchup}");
        assert_eq!(decision.missed, 0, "{catchup}");
    }
}

#[test]
fn a_long_outage_of_a_per_second_schedule_is_counted_not_listed() {
    let mut schedule = Schedule::new("* * * * * *");
    schedule.window = Duration::from_secs(3600);
    let schedule = CompiledSchedule::new(schedule).expect("valid");
    let start = at("2026-01-05T00:00:00Z");
    let back = start + 3 * 86_400_000 + 120_000;
    let decision = catch_up(&schedule, "fast", start, back);
    // Three days and two minutes of seconds; those of the last minute (61 of them, both
    // ends included) are on time and run; every other one is counted.
    assert_eq!(decision.run.len(), 61);
    assert_eq!(decision.missed, 3 * 86_400 + 120 - 61);
    assert_eq!(decision.missed_range, Some((start + 1_000, back - 61_000)));
    assert_eq!(decision.last, Some(back));
}

#[test]
fn a_jittered_tick_is_due_only_once_it_fires() {
    let mut schedule = Schedule::new("0 9 * * *");
    schedule.jitter = Some(Duration::from_secs(600));
    let schedule = CompiledSchedule::new(schedule).expect("valid");
    let tick = at("2026-01-06T09:00:00Z");
    let fires = workflow_core::schedule::fire_time("report", tick, Some(Duration::from_secs(600)));
    assert!(
        fires > tick && fires <= tick + 600_000,
        "jitter of {} ms",
        fires - tick
    );
    let early = catch_up(&schedule, "report", at("2026-01-05T09:00:00Z"), fires - 1);
    assert!(early.run.is_empty() && early.last.is_none(), "{early:?}");
    let due = catch_up(&schedule, "report", at("2026-01-05T09:00:00Z"), fires);
    assert_eq!(due.run, [tick]);
    assert_eq!(due.missed, 0);
}

// ---------------------------------------------------------------------- jitter, overlap

#[test]
fn jitter_is_bounded_deterministic_and_spread() {
    let max = Some(Duration::from_secs(30));
    let values: Vec<Duration> = (0..1000u64)
        .map(|i| jitter("report", 1_700_000_000_000 + i * 60_000, max))
        .collect();
    assert!(values.iter().all(|j| *j <= Duration::from_secs(30)));
    let again: Vec<Duration> = (0..1000u64)
        .map(|i| jitter("report", 1_700_000_000_000 + i * 60_000, max))
        .collect();
    assert_eq!(
        values, again,
        "the same tick gets the same jitter on every worker"
    );
    let distinct: std::collections::HashSet<_> = values.iter().collect();
    assert!(
        distinct.len() > 500,
        "spread over the range: {}",
        distinct.len()
    );
    assert!(values.iter().any(|j| *j > Duration::from_secs(20)));
    assert!(values.iter().any(|j| *j < Duration::from_secs(10)));
    assert_eq!(jitter("report", 1, None), Duration::ZERO);
    assert_ne!(
        jitter("a", 1_700_000_000_000, max),
        jitter("b", 1_700_000_000_000, max),
        "schedules firing at one instant are spread apart"
    );
}

#[test]
fn overlap_decisions() {
    use OverlapDecision::*;
    for policy in [
        Overlap::Skip,
        Overlap::BufferOne,
        Overlap::Allow,
        Overlap::CancelPrevious,
    ] {
        assert_eq!(decide_overlap(policy, 0, false), Start, "{policy:?}");
    }
    assert_eq!(decide_overlap(Overlap::Skip, 1, false), Skip);
    assert_eq!(decide_overlap(Overlap::BufferOne, 1, false), Buffer);
    assert_eq!(decide_overlap(Overlap::BufferOne, 1, true), Skip);
    assert_eq!(decide_overlap(Overlap::Allow, 3, false), Start);
    assert_eq!(
        decide_overlap(Overlap::CancelPrevious, 1, false),
        CancelPreviousThenStart
    );
}

//! `schedule: { ... }`: parsed into the model with its defaults, every value checked at its
//! token, and outside the behavioural fingerprint.

use std::time::Duration;

use workflow_spec::parse::parse_str;
use workflow_spec::{Catchup, DstGap, Overlap, Spec};

const SCHEDULED: &str = r#"
    /// Every weekday at 09:00 Berlin time.
    pub workflow DailyReport(tick: Tick) env Services {
        schedule: {
            cron: "0 9 * * MON-FRI",
            tz: "Europe/Berlin",
            overlap: buffer_one,
            catchup: all(max: 10),
            window: 6h,
            dst_gap: skip,
            jitter: 30s,
        },
        step fetch -> Report { action: reports::fetch(env, tick) }
    }
"#;

fn spec(source: &str) -> Spec {
    let parsed = parse_str(source);
    let errors: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    assert!(errors.is_empty(), "expected no errors, got {errors:#?}");
    parsed.spec.expect("a spec without errors is lowered")
}

fn errors(source: &str) -> Vec<String> {
    parse_str(source)
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn with_schedule(block: &str) -> String {
    format!(
        "workflow W(tick: Tick) {{ schedule: {{ {block} }}, step a -> () {{ action: f(tick) }} }}"
    )
}

#[test]
fn every_key_is_lowered_into_the_model() {
    let schedule = spec(SCHEDULED).schedule.expect("a schedule");
    assert_eq!(schedule.cron, "0 9 * * MON-FRI");
    assert_eq!(schedule.tz, "Europe/Berlin");
    assert_eq!(schedule.overlap, Overlap::BufferOne);
    assert_eq!(schedule.catchup, Catchup::All { max: 10 });
    assert_eq!(schedule.window, Duration::from_secs(6 * 3600));
    assert_eq!(schedule.dst_gap, DstGap::Skip);
    assert_eq!(schedule.jitter, Some(Duration::from_secs(30)));
}

#[test]
fn defaults_fill_what_is_not_written() {
    let schedule =
        spec("workflow W() { schedule: { cron: \"@hourly\" }, step a -> () { action: f() } }")
            .schedule
            .expect("a schedule");
    assert_eq!(schedule.tz, "UTC");
    assert_eq!(schedule.overlap, Overlap::Skip);
    assert_eq!(schedule.catchup, Catchup::Latest);
    assert_eq!(schedule.window, Duration::from_secs(24 * 3600));
    assert_eq!(schedule.dst_gap, DstGap::NextValid);
    assert_eq!(schedule.jitter, None);
}

#[test]
fn a_workflow_without_a_schedule_has_none() {
    assert_eq!(
        spec("workflow W() { step a -> () { action: f() } }").schedule,
        None
    );
}

#[test]
fn the_zone_is_stored_under_its_canonical_name() {
    let schedule = spec(&with_schedule("cron: \"0 9 * * *\", tz: \"europe/berlin\""))
        .schedule
        .expect("a schedule");
    assert_eq!(schedule.tz, "Europe/Berlin");
}

#[test]
fn a_wrong_cron_field_is_named_with_the_nearest_name() {
    let found = errors(&with_schedule("cron: \"0 9 * * MON-FRY\""));
    assert_eq!(
        found,
        ["cron field 5 (day of week (0-7 or SUN-SAT)) `MON-FRY` is not valid: `FRY` is not a name in this field\nhelp: did you mean `FRI`?"]
    );
}

#[test]
fn every_mistake_is_reported_not_only_the_first() {
    let found = errors(
        "workflow W(order: Order) { schedule: { cron: \"0 25 * * *\", tz: \"Europe/Berln\", overlap: skp, windw: 1h }, step a -> () { action: f() } }",
    );
    assert_eq!(found.len(), 5, "{found:#?}");
    assert!(found[0].contains("did you mean `skip`?"), "{found:#?}");
    assert!(
        found[1].contains("unknown schedule key `windw`"),
        "{found:#?}"
    );
    assert!(
        found[2].starts_with("cron field 2 (hour (0-23))"),
        "{found:#?}"
    );
    assert!(
        found[3].contains("did you mean `Europe/Berlin`?"),
        "{found:#?}"
    );
    assert!(
        found[4].contains("must be `workflow_core::Tick`"),
        "{found:#?}"
    );
}

#[test]
fn a_schedule_after_the_first_step_is_refused() {
    let found =
        errors("workflow W() { step a -> () { action: f() } schedule: { cron: \"@daily\" }, }");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("must come before the first step"),
        "{found:#?}"
    );
}

#[test]
fn an_unknown_workflow_key_gets_a_suggestion() {
    let found =
        errors("workflow W() { schedul: { cron: \"@daily\" }, step a -> () { action: f() } }");
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("did you mean `schedule`?"), "{found:#?}");
}

#[test]
fn catchup_all_needs_a_bound_in_range() {
    let unbounded = errors(&with_schedule("cron: \"@daily\", catchup: all"));
    assert!(unbounded[0].contains("needs a bound"), "{unbounded:#?}");
    let zero = errors(&with_schedule("cron: \"@daily\", catchup: all(max: 0)"));
    assert!(zero[0].contains("between 1 and 1000"), "{zero:#?}");
}

#[test]
fn a_missing_cron_is_reported_at_the_schedule_key() {
    let found = errors(&with_schedule("tz: \"UTC\""));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("needs a `cron` pattern"), "{found:#?}");
}

// -------------------------------------------------------------------------- fingerprint

#[test]
fn changing_the_schedule_keeps_the_fingerprint() {
    let base = spec(SCHEDULED);
    for (from, to) in [
        ("0 9 * * MON-FRI", "30 7 * * *"),
        ("Europe/Berlin", "America/New_York"),
        ("overlap: buffer_one", "overlap: cancel_previous"),
        ("catchup: all(max: 10)", "catchup: none"),
        ("window: 6h", "window: 1d"),
        ("dst_gap: skip", "dst_gap: next_valid"),
        ("jitter: 30s", "jitter: 1m"),
    ] {
        assert!(SCHEDULED.contains(from), "{from:?}");
        let other = spec(&SCHEDULED.replacen(from, to, 1));
        assert_ne!(base.schedule, other.schedule, "{from:?} -> {to:?}");
        assert_eq!(
            base.fingerprint(),
            other.fingerprint(),
            "replacing {from:?} by {to:?} changed the fingerprint"
        );
    }
}

#[test]
fn adding_or_removing_the_schedule_keeps_the_fingerprint() {
    let scheduled = spec(SCHEDULED);
    let start = SCHEDULED.find("schedule:").expect("schedule");
    let end = SCHEDULED.find("step fetch").expect("step");
    let plain = spec(&format!("{}{}", &SCHEDULED[..start], &SCHEDULED[end..]));
    assert_eq!(plain.schedule, None);
    assert_eq!(scheduled.fingerprint(), plain.fingerprint());
}

#[test]
fn the_schedule_survives_the_json_the_macro_embeds() {
    let spec = spec(SCHEDULED);
    let json = serde_json::to_string(&spec).expect("serialises");
    let back: Spec = serde_json::from_str(&json).expect("deserialises");
    assert_eq!(back, spec);
}

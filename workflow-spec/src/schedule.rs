//! A workflow's `schedule: { ... }`: the model and the validation of its cron pattern and
//! time zone.
//!
//! The same code checks a schedule at compile time (the `workflow!` macro) and when one is
//! created at run time (`Engine::schedules()`, the CLI), so a pattern the compiler accepts
//! is one the runtime can fire. Cron patterns are parsed by `croner`; zones come from the
//! IANA database compiled into the binary (`jiff` with its bundled tzdb), so a zone that
//! checks on the build machine exists on every machine the program runs on.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The default `window`: missed ticks older than a day are recorded as missed, not run.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The largest `catchup: all(max: N)`.
pub const MAX_CATCHUP: u32 = 1000;

/// The largest `jitter`.
pub const MAX_JITTER: Duration = Duration::from_secs(3600);

/// When a workflow starts on its own: a cron pattern in a zone, and what to do about overlap,
/// missed ticks and daylight-saving gaps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The cron pattern: 5 fields (minute hour day-of-month month day-of-week) or 6 (with
    /// seconds first), or a nickname such as `@daily`.
    pub cron: String,
    /// The IANA zone the pattern's wall-clock times are read in (default `UTC`).
    pub tz: String,
    /// What a tick does while the previous tick's run is still going.
    pub overlap: Overlap,
    /// What happens to ticks missed while no engine ran.
    pub catchup: Catchup,
    /// How far back a missed tick may still run; older ones are recorded as missed.
    pub window: Duration,
    /// What a tick of a fixed-time pattern does when its local time does not exist (a
    /// spring-forward gap). A wildcard pattern (minute or hour field starting with `*`)
    /// has no tick there: it fires at the real instants it names, as cron does.
    pub dst_gap: DstGap,
    /// A random delay added to each fire time, at most this long (deterministic per tick).
    pub jitter: Option<Duration>,
}

impl Schedule {
    /// A schedule with the defaults: UTC, `overlap: skip`, `catchup: latest`, a one-day
    /// window, `dst_gap: next_valid`, no jitter.
    pub fn new(cron: impl Into<String>) -> Schedule {
        Schedule {
            cron: cron.into(),
            tz: "UTC".to_owned(),
            overlap: Overlap::Skip,
            catchup: Catchup::Latest,
            window: DEFAULT_WINDOW,
            dst_gap: DstGap::NextValid,
            jitter: None,
        }
    }

    /// The same schedule read in another zone.
    pub fn in_zone(mut self, tz: impl Into<String>) -> Schedule {
        self.tz = tz.into();
        self
    }

    /// Checks every part: the cron pattern, the zone and the bounds of the numbers. The
    /// first problem found is returned; the macro reports each part at its own token.
    pub fn validate(&self) -> Result<(), ScheduleError> {
        parse_cron(&self.cron)?;
        parse_zone(&self.tz)?;
        if let Catchup::All { max } = self.catchup {
            check_catchup_max(max)?;
        }
        check_window(self.window)?;
        if let Some(jitter) = self.jitter {
            check_jitter(jitter)?;
        }
        Ok(())
    }
}

/// What a tick does while the previous tick's run has not finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// The tick is skipped (recorded as skipped, not run).
    Skip,
    /// At most one tick waits and starts when the running one finishes; later ones skip.
    BufferOne,
    /// The tick starts its run alongside the running one.
    Allow,
    /// The running one is cancelled and the tick starts.
    CancelPrevious,
}

impl Overlap {
    /// The spelling in a spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::Allow => "allow",
            Overlap::CancelPrevious => "cancel_previous",
        }
    }

    /// The spellings a spec may use.
    pub const CHOICES: &'static [&'static str] =
        &["skip", "buffer_one", "allow", "cancel_previous"];

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<Overlap> {
        Some(match text {
            "skip" => Overlap::Skip,
            "buffer_one" => Overlap::BufferOne,
            "allow" => Overlap::Allow,
            "cancel_previous" => Overlap::CancelPrevious,
            _ => return None,
        })
    }
}

/// What happens to ticks missed while no engine ran (within the window).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Catchup {
    /// Only the latest missed tick runs; the others are recorded as missed.
    Latest,
    /// The missed ticks run, oldest first, at most `max` of them (the latest ones).
    All {
        /// At most this many missed ticks run.
        max: u32,
    },
    /// No missed tick runs; every one is recorded as missed.
    None,
}

impl fmt::Display for Catchup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Catchup::Latest => f.write_str("latest"),
            Catchup::All { max } => write!(f, "all(max: {max})"),
            Catchup::None => f.write_str("none"),
        }
    }
}

/// What a tick whose local time does not exist (a spring-forward gap) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DstGap {
    /// It fires at the first instant after the gap (02:30 fires at 03:00).
    NextValid,
    /// It does not fire that day.
    Skip,
}

impl DstGap {
    /// The spelling in a spec.
    pub fn as_str(self) -> &'static str {
        match self {
            DstGap::NextValid => "next_valid",
            DstGap::Skip => "skip",
        }
    }
}

/// The fields of a cron pattern, in the order written (6-field patterns start with seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CronField {
    /// Seconds (0-59), only in 6-field patterns.
    Second,
    /// Minutes (0-59).
    Minute,
    /// Hours (0-23).
    Hour,
    /// Day of the month (1-31, `L`, `W`).
    DayOfMonth,
    /// Month (1-12 or `JAN`-`DEC`).
    Month,
    /// Day of the week (0-7 or `SUN`-`SAT`, `#`, `L`).
    DayOfWeek,
}

impl CronField {
    /// What the field is called in messages, with its valid values.
    pub fn describe(self) -> &'static str {
        match self {
            CronField::Second => "second (0-59)",
            CronField::Minute => "minute (0-59)",
            CronField::Hour => "hour (0-23)",
            CronField::DayOfMonth => "day of month (1-31)",
            CronField::Month => "month (1-12 or JAN-DEC)",
            CronField::DayOfWeek => "day of week (0-7 or SUN-SAT)",
        }
    }

    /// The numbers the field takes.
    fn range(self) -> (u32, u32) {
        match self {
            CronField::Second | CronField::Minute => (0, 59),
            CronField::Hour => (0, 23),
            CronField::DayOfMonth => (1, 31),
            CronField::Month => (1, 12),
            CronField::DayOfWeek => (0, 7),
        }
    }

    fn names(self) -> &'static [&'static str] {
        match self {
            CronField::Month => &[
                "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
            ],
            CronField::DayOfWeek => &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
            _ => &[],
        }
    }
}

/// Why a schedule is not valid. Each names what is wrong and, where a fix is knowable, a
/// `help` line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The pattern has the wrong number of fields.
    #[error("cron pattern `{pattern}` has {found} fields; expected 5 (minute hour day-of-month month day-of-week) or 6 (with seconds first)")]
    FieldCount {
        /// The pattern as written.
        pattern: String,
        /// How many fields it has.
        found: usize,
    },
    /// One field of the pattern is not valid.
    #[error("cron field {position} ({}) `{text}` is not valid: {reason}", field.describe())]
    Field {
        /// Which field.
        field: CronField,
        /// Its position, from 1.
        position: usize,
        /// The field as written.
        text: String,
        /// What is wrong, in one sentence.
        reason: String,
        /// The fix, when one is knowable (`did you mean `FRI`?`).
        help: Option<String>,
    },
    /// The pattern as a whole is not valid (a bad nickname, say).
    #[error("cron pattern `{pattern}` is not valid: {reason}")]
    Pattern {
        /// The pattern as written.
        pattern: String,
        /// What is wrong.
        reason: String,
    },
    /// The pattern is valid but names no time that exists (`0 0 30 2 *`).
    #[error("cron pattern `{pattern}` never fires: no date matches it")]
    NeverFires {
        /// The pattern as written.
        pattern: String,
    },
    /// The zone is not in the IANA database.
    #[error("unknown time zone `{zone}`")]
    UnknownZone {
        /// The zone as written.
        zone: String,
        /// The nearest known zone, if one is close.
        suggestion: Option<String>,
    },
    /// `catchup: all(max: N)` with N out of range.
    #[error("`catchup: all(max: {max})` must run between 1 and {MAX_CATCHUP} missed ticks")]
    CatchupMax {
        /// The value written.
        max: u32,
    },
    /// A zero `window`.
    #[error("`window` must be longer than zero: it is how far back a missed tick may still run")]
    ZeroWindow,
    /// A `jitter` longer than an hour.
    #[error("`jitter` must be at most 1h, found {}", crate::format_duration(*.0))]
    JitterTooLong(Duration),
}

impl ScheduleError {
    /// A `help:` line for the error, when a fix is knowable.
    pub fn help(&self) -> Option<String> {
        match self {
            ScheduleError::FieldCount { .. } => Some(
                "write e.g. \"0 9 * * MON-FRI\" (09:00 on weekdays) or \"*/30 * * * * *\" (every 30 seconds)".into(),
            ),
            ScheduleError::Field { help, .. } => help.clone(),
            ScheduleError::Pattern { .. } => Some(
                "nicknames are @yearly, @monthly, @weekly, @daily and @hourly".into(),
            ),
            ScheduleError::NeverFires { .. } => {
                Some("check the day of month against the month (February has no 30th)".into())
            }
            ScheduleError::UnknownZone { suggestion, .. } => Some(match suggestion {
                Some(zone) => format!("did you mean `{zone}`?"),
                None => "use an IANA zone name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\"".into(),
            }),
            ScheduleError::CatchupMax { .. } => Some(
                "write e.g. `all(max: 10)`; use `latest` to run only the newest missed tick"
                    .into(),
            ),
            ScheduleError::ZeroWindow => Some("write e.g. `window: 6h`".into()),
            ScheduleError::JitterTooLong(_) => {
                Some("jitter spreads starts over seconds or minutes, e.g. `jitter: 30s`".into())
            }
        }
    }
}

/// A parsed, checked cron pattern.
#[derive(Clone, Debug)]
pub struct CronPattern {
    cron: croner::Cron,
}

impl CronPattern {
    /// The first wall-clock time strictly after `after` that the pattern names, if any within
    /// croner's search limit.
    pub fn next_after(&self, after: jiff::civil::DateTime) -> Option<jiff::civil::DateTime> {
        self.cron.find_next_occurrence(&after, false).ok()
    }

    /// The first wall-clock time at or after `from` that the pattern names.
    pub fn next_from(&self, from: jiff::civil::DateTime) -> Option<jiff::civil::DateTime> {
        self.cron.find_next_occurrence(&from, true).ok()
    }
}

const FIVE: [CronField; 5] = [
    CronField::Minute,
    CronField::Hour,
    CronField::DayOfMonth,
    CronField::Month,
    CronField::DayOfWeek,
];
const SIX: [CronField; 6] = [
    CronField::Second,
    CronField::Minute,
    CronField::Hour,
    CronField::DayOfMonth,
    CronField::Month,
    CronField::DayOfWeek,
];

fn parser() -> croner::parser::CronParser {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .build()
}

/// Parses and checks a cron pattern, naming the field that is wrong.
pub fn parse_cron(pattern: &str) -> Result<CronPattern, ScheduleError> {
    let trimmed = pattern.trim();
    if trimmed.starts_with('@') {
        return match parser().parse(trimmed) {
            Ok(cron) => finish(pattern, cron),
            Err(error) => Err(ScheduleError::Pattern {
                pattern: pattern.to_owned(),
                reason: format!("unknown nickname: {error}"),
            }),
        };
    }
    let parts: Vec<&str> = trimmed.split_whitespace().collect();
    let fields: &[CronField] = match parts.len() {
        5 => &FIVE,
        6 => &SIX,
        found => {
            return Err(ScheduleError::FieldCount {
                pattern: pattern.to_owned(),
                found,
            })
        }
    };
    // Each field alone, the others `*`: the first that croner refuses is the one to name.
    for (index, (&field, &text)) in fields.iter().zip(&parts).enumerate() {
        let mut alone = vec!["*"; parts.len()];
        alone[index] = text;
        if let Err(error) = parser().parse(&alone.join(" ")) {
            return Err(field_error(field, index + 1, text, &error));
        }
    }
    match parser().parse(trimmed) {
        Ok(cron) => finish(pattern, cron),
        Err(error) => Err(ScheduleError::Pattern {
            pattern: pattern.to_owned(),
            reason: error.to_string(),
        }),
    }
}

fn finish(pattern: &str, cron: croner::Cron) -> Result<CronPattern, ScheduleError> {
    let parsed = CronPattern { cron };
    // A pattern such as `0 0 30 2 *` parses but names no date: croner's search gives up.
    let start = jiff::civil::date(2000, 1, 1).at(0, 0, 0, 0);
    match parsed.next_from(start) {
        Some(_) => Ok(parsed),
        None => Err(ScheduleError::NeverFires {
            pattern: pattern.to_owned(),
        }),
    }
}

fn field_error(
    field: CronField,
    position: usize,
    text: &str,
    error: &croner::errors::CronError,
) -> ScheduleError {
    let upper = text.to_uppercase();
    // A word that is not a name of this field: say so and suggest the nearest name.
    let words: Vec<&str> = upper
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 2)
        .collect();
    for word in words {
        if field.names().contains(&word) {
            continue;
        }
        let names = field.names();
        let reason = if names.is_empty() {
            format!("`{word}` is not a number; this field takes numbers only")
        } else {
            format!("`{word}` is not a name in this field")
        };
        let help = if names.is_empty() {
            None
        } else {
            Some(match nearest(word, names) {
                Some(name) => format!("did you mean `{name}`?"),
                None => format!("the names are {}", names.join(", ")),
            })
        };
        return ScheduleError::Field {
            field,
            position,
            text: text.to_owned(),
            reason,
            help,
        };
    }
    // A number outside the field's range: name it.
    let (low, high) = field.range();
    let out_of_range = text
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|digits| digits.parse::<u32>().ok())
        .find(|n| *n < low || *n > high);
    let reason = match out_of_range {
        Some(n) => format!("`{n}` is out of range ({low}-{high})"),
        None => croner_reason(error),
    };
    ScheduleError::Field {
        field,
        position,
        text: text.to_owned(),
        reason,
        help: Some(format!("the field takes {}", field.describe())),
    }
}

fn croner_reason(error: &croner::errors::CronError) -> String {
    use croner::errors::CronError;
    match error {
        CronError::ComponentError(message)
        | CronError::InvalidPattern(message)
        | CronError::IllegalCharacters(message) => {
            // croner's messages speak of its own internals ("CronPattern contains ..."):
            // keep only what they say about the value.
            let message = message
                .trim_start_matches("CronPattern contains ")
                .trim_end_matches('.');
            let mut chars = message.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_lowercase().chain(chars).collect()
            })
        }
        other => other.to_string(),
    }
}

/// The nearest of `names` to `word` by edit distance, when it is a likely typo.
fn nearest<'a>(word: &str, names: &[&'a str]) -> Option<&'a str> {
    names
        .iter()
        .map(|name| (edit_distance(word, name), *name))
        .filter(|(distance, _)| *distance <= 1 || (*distance == 2 && word.len() > 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

/// Looks a zone up in the compiled-in IANA database (names are matched case-insensitively).
pub fn parse_zone(zone: &str) -> Result<jiff::tz::TimeZone, ScheduleError> {
    match jiff::tz::db().get(zone) {
        Ok(tz) => Ok(tz),
        Err(_) => Err(ScheduleError::UnknownZone {
            zone: zone.to_owned(),
            suggestion: suggest_zone(zone),
        }),
    }
}

fn suggest_zone(zone: &str) -> Option<String> {
    let lower = zone.to_ascii_lowercase().replace(' ', "_");
    let mut best: Option<(usize, String)> = None;
    for name in jiff::tz::db().available() {
        let candidate = name.as_str();
        let distance = edit_distance(&lower, &candidate.to_ascii_lowercase());
        if best.as_ref().is_none_or(|(d, _)| distance < *d) {
            best = Some((distance, candidate.to_owned()));
        }
    }
    best.filter(|(distance, _)| *distance <= 3.max(lower.len() / 5))
        .map(|(_, name)| name)
}

/// Checks `catchup: all(max: N)`.
pub fn check_catchup_max(max: u32) -> Result<(), ScheduleError> {
    if (1..=MAX_CATCHUP).contains(&max) {
        Ok(())
    } else {
        Err(ScheduleError::CatchupMax { max })
    }
}

/// Checks `window`.
pub fn check_window(window: Duration) -> Result<(), ScheduleError> {
    if window.is_zero() {
        Err(ScheduleError::ZeroWindow)
    } else {
        Ok(())
    }
}

/// Checks `jitter`.
pub fn check_jitter(jitter: Duration) -> Result<(), ScheduleError> {
    if jitter > MAX_JITTER {
        Err(ScheduleError::JitterTooLong(jitter))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_weekday_names_its_field_and_the_nearest_name() {
        let error = parse_cron("0 9 * * MON-FRY").unwrap_err();
        assert_eq!(
            error.to_string(),
            "cron field 5 (day of week (0-7 or SUN-SAT)) `MON-FRY` is not valid: `FRY` is not a name in this field"
        );
        assert_eq!(error.help().as_deref(), Some("did you mean `FRI`?"));
    }

    #[test]
    fn an_hour_out_of_range_names_the_hour() {
        let error = parse_cron("0 25 * * *").unwrap_err();
        assert!(
            matches!(
                error,
                ScheduleError::Field {
                    field: CronField::Hour,
                    position: 2,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn six_fields_start_with_seconds() {
        let error = parse_cron("61 * * * * *").unwrap_err();
        assert!(
            matches!(
                error,
                ScheduleError::Field {
                    field: CronField::Second,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(parse_cron("*/30 * * * * *").is_ok());
    }

    #[test]
    fn wrong_field_counts_and_impossible_dates_are_refused() {
        assert!(matches!(
            parse_cron("0 9 * *").unwrap_err(),
            ScheduleError::FieldCount { found: 4, .. }
        ));
        assert!(matches!(
            parse_cron("0 0 30 2 *").unwrap_err(),
            ScheduleError::NeverFires { .. }
        ));
        assert!(parse_cron("@daily").is_ok());
        assert!(parse_cron("@sometimes").is_err());
    }

    #[test]
    fn zones_come_from_the_compiled_in_database_with_suggestions() {
        assert!(parse_zone("Europe/Berlin").is_ok());
        let error = parse_zone("Europe/Berln").unwrap_err();
        assert_eq!(
            error.help().as_deref(),
            Some("did you mean `Europe/Berlin`?")
        );
        assert!(parse_zone("Mars/Olympus_Mons").is_err());
    }

    #[test]
    fn bounds_are_checked() {
        let mut schedule = Schedule::new("0 9 * * *").in_zone("America/New_York");
        assert_eq!(schedule.validate(), Ok(()));
        schedule.catchup = Catchup::All { max: 0 };
        assert_eq!(
            schedule.validate(),
            Err(ScheduleError::CatchupMax { max: 0 })
        );
        schedule.catchup = Catchup::Latest;
        schedule.window = Duration::ZERO;
        assert_eq!(schedule.validate(), Err(ScheduleError::ZeroWindow));
    }
}

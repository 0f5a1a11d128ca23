//! Text for people: timestamps, durations, offsets from a run's start, and aligned tables.

use std::time::{SystemTime, UNIX_EPOCH};

pub use workflow_core::journal::rfc3339;
use workflow_core::journal::Timestamp;

/// The wall clock in milliseconds since the Unix epoch, as the engine's clock reads it.
pub fn now_ms() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `2025-03-04 05:06:07Z`: a timestamp in UTC, to the second.
pub fn timestamp(ms: Timestamp) -> String {
    let text = rfc3339(ms);
    format!("{} {}Z", &text[..10], &text[11..19])
}

/// A span of time, short: `850ms`, `12.3s`, `4m05s`, `2h03m`, `3d04h`.
pub fn duration(ms: u64) -> String {
    let secs = ms / 1000;
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{}.{}s", secs, ms % 1000 / 100),
        60_000..=3_599_999 => format!("{}m{:02}s", secs / 60, secs % 60),
        3_600_000..=86_399_999 => format!("{}h{:02}m", secs / 3600, secs / 60 % 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs / 3600 % 24),
    }
}

/// The time of an event after the run's start: `+12.3s`.
pub fn offset(at: Timestamp, start: Timestamp) -> String {
    format!("+{}", duration(at.saturating_sub(start)))
}

/// How far `at` is from `now`: `in 59m12s` or `3m05s ago`.
pub fn relative(at: Timestamp, now: Timestamp) -> String {
    if at >= now {
        format!("in {}", duration(at - now))
    } else {
        format!("{} ago", duration(now - at))
    }
}

/// Text cut to `max` characters, with `…` when cut, on one line.
pub fn short(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// Rows as an aligned table: a header, then one line per row, columns separated by two
/// spaces; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (index, cell) in row.iter().enumerate().take(columns) {
            if index + 1 == columns {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                let pad = widths[index] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc() {
        assert_eq!(timestamp(0), "1970-01-01 00:00:00Z");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29 00:00:00Z");
        assert_eq!(timestamp(1_709_251_199_999), "2024-02-29 23:59:59Z");
        assert_eq!(rfc3339(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(12_345), "12.3s");
        assert_eq!(duration(245_000), "4m05s");
        assert_eq!(duration(7_380_000), "2h03m");
        assert_eq!(duration(273_600_000), "3d04h");
        assert_eq!(offset(1_500, 1_000), "+500ms");
        assert_eq!(offset(500, 1_000), "+0ms");
        assert_eq!(relative(2_000, 1_000), "in 1.0s");
        assert_eq!(relative(1_000, 2_000), "1.0s ago");
    }

    #[test]
    fn tables_align_and_text_is_cut() {
        let rows = vec![
            vec!["run-1".to_owned(), "A".to_owned(), "x".to_owned()],
            vec!["run-10".to_owned(), "Bb".to_owned(), String::new()],
        ];
        assert_eq!(
            table(&["RUN", "WF", "NOTE"], &rows),
            "RUN     WF  NOTE\nrun-1   A   x\nrun-10  Bb\n"
        );
        assert_eq!(short("abc\ndef", 10), "abc def");
        assert_eq!(short("abcdef", 4), "abc…");
    }
}

//! Row checksums (CRC-32C): every journal entry, run row, spec, dead letter and inbox
//! message is written with a checksum of what it says and verified on every read, so a
//! damaged row is reported as damaged instead of being read back as a different truth.
//!
//! Each checksum covers the row's key as well as its payload, so a payload that ends up
//! under another key is caught too. Fields are framed (a tag and a length before each), so
//! two different rows never hash the same bytes.

use crate::error::RunId;
use crate::journal::Timestamp;

/// Accumulates framed fields.
struct Sum(u32);

impl Sum {
    fn new(kind: &[u8]) -> Self {
        Sum(crc32c::crc32c(kind))
    }

    fn bytes(mut self, bytes: &[u8]) -> Self {
        self.0 = crc32c::crc32c_append(self.0, &(bytes.len() as u64).to_le_bytes());
        self.0 = crc32c::crc32c_append(self.0, bytes);
        self
    }

    fn text(self, text: &str) -> Self {
        self.bytes(text.as_bytes())
    }

    fn number(self, n: u64) -> Self {
        self.bytes(&n.to_le_bytes())
    }

    fn maybe_text(self, text: Option<&str>) -> Self {
        match text {
            Some(text) => self.bytes(&[1]).text(text),
            None => self.bytes(&[0]),
        }
    }

    fn maybe_number(self, n: Option<u64>) -> Self {
        match n {
            Some(n) => self.bytes(&[1]).number(n),
            None => self.bytes(&[0]),
        }
    }
}

/// The checksum of journal entry `seq` of `run`, whose payload is `event` (its JSON).
pub fn entry(run: RunId, seq: u64, event: &str) -> u32 {
    Sum::new(b"entry").number(run.0).number(seq).text(event).0
}

/// The parts of a run's row a checksum covers: everything but the lease columns (owner,
/// token, expiry), which claims rewrite in bulk and which hold no history: damage there
/// can delay or hasten a takeover, and fencing compares tokens rather than trusting them.
#[derive(Debug, Clone, Copy)]
pub struct RunRow<'a> {
    pub id: RunId,
    pub workflow: &'a str,
    pub fingerprint: &'a str,
    pub status: &'a str,
    pub idempotency_key: Option<&'a str>,
    pub note: Option<&'a str>,
    pub parent: Option<u64>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub inbox_cursor: u64,
}

impl RunRow<'_> {
    pub fn checksum(&self) -> u32 {
        Sum::new(b"run")
            .number(self.id.0)
            .text(self.workflow)
            .text(self.fingerprint)
            .text(self.status)
            .maybe_text(self.idempotency_key)
            .maybe_text(self.note)
            .maybe_number(self.parent)
            .number(self.created_at)
            .number(self.updated_at)
            .number(self.inbox_cursor)
            .0
    }
}

/// The checksum of the spec recorded for `fingerprint`.
pub fn spec(fingerprint: &str, workflow: &str, spec: &str) -> u32 {
    Sum::new(b"spec")
        .text(fingerprint)
        .text(workflow)
        .text(spec)
        .0
}

/// The checksum of a schedule row: its id, workflow, definition and state (as stored
/// JSON), paused flag, version and creation time.
pub fn schedule(row: &ScheduleText<'_>) -> u32 {
    Sum::new(b"schedule")
        .text(row.id)
        .text(row.workflow)
        .text(row.definition)
        .number(u64::from(row.paused))
        .text(row.state)
        .number(row.version)
        .number(row.created_at)
        .0
}

/// The checksum of a record of missed ticks of schedule `id`.
pub fn missed_ticks(id: &str, missed: &crate::store::MissedTicks) -> u32 {
    Sum::new(b"missed_ticks")
        .text(id)
        .number(missed.first)
        .number(missed.last)
        .number(missed.count)
        .number(missed.recorded_at)
        .0
}

/// A schedule row as its stored text, for [`schedule`].
#[derive(Debug, Clone, Copy)]
pub struct ScheduleText<'a> {
    /// The id.
    pub id: &'a str,
    /// The workflow.
    pub workflow: &'a str,
    /// The definition's JSON.
    pub definition: &'a str,
    /// Whether it is paused.
    pub paused: bool,
    /// The state's JSON.
    pub state: &'a str,
    /// The row version.
    pub version: u64,
    /// When it was created.
    pub created_at: Timestamp,
}

impl ScheduleText<'_> {
    /// The row this text stands for, when its checksum (as `matches` judges the one
    /// [`schedule`] computes) holds and its JSON decodes; else the row is damaged. What
    /// every store that keeps schedules as text reads them through.
    pub fn verified(
        self,
        matches: impl FnOnce(u32) -> bool,
    ) -> Result<crate::store::ScheduleRow, crate::store::StoreError> {
        let damaged = || crate::store::StoreError::CorruptRow {
            table: "schedules".to_owned(),
            key: self.id.to_owned(),
        };
        if !matches(schedule(&self)) {
            return Err(damaged());
        }
        Ok(crate::store::ScheduleRow {
            id: self.id.to_owned(),
            workflow: self.workflow.to_owned(),
            schedule: serde_json::from_str(self.definition).map_err(|_| damaged())?,
            paused: self.paused,
            state: serde_json::from_str(self.state).map_err(|_| damaged())?,
            version: self.version,
            created_at: self.created_at,
        })
    }
}

/// The checksum of a dead letter.
pub fn dead_letter(letter: &crate::store::DeadLetter) -> u32 {
    Sum::new(b"dead_letter")
        .number(letter.run.0)
        .text(&letter.workflow)
        .text(&letter.step)
        .number(u64::from(letter.attempts))
        .text(letter.kind.as_str())
        .text(&letter.message)
        .text(&letter.trace_id)
        .number(letter.at)
        .0
}

/// The checksum of inbox message `id` of `run`.
pub fn inbox(id: u64, run: RunId, key: Option<&str>, message: &str, at: Timestamp) -> u32 {
    Sum::new(b"inbox")
        .number(id)
        .number(run.0)
        .maybe_text(key)
        .text(message)
        .number(at)
        .0
}

/// A checksum whose key (a run id, a message id) the database assigns as it writes the row:
/// the checksum computed with the key 0, and for each bit of the key what setting it
/// changes. CRC-32C is affine over messages of one length and the key is framed as a fixed
/// 8 bytes, so the row's checksum is `base` XOR the `bits` of the key's set bits: what
/// the PostgreSQL store's `workflow_keyed_crc` computes, in the same statement as the
/// write, so a row is never stored without its checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyed {
    pub base: u32,
    pub bits: [u32; 64],
}

impl Keyed {
    /// From the checksum of the row as a function of its key, which the row frames once,
    /// as 8 bytes (little-endian). Two checksums of the row, not 65: setting key bit `b`
    /// changes the checksum by the CRC of that one bit followed by every bit after it, so
    /// the change of bit `b - 1` (one bit earlier, one more bit after it) is the change
    /// of bit `b` times x.
    pub fn new(sum: impl Fn(u64) -> u32) -> Keyed {
        let base = sum(0);
        let mut bits = [0; 64];
        bits[63] = sum(1 << 63) ^ base;
        for bit in (0..63).rev() {
            bits[bit] = times_x(bits[bit + 1]);
        }
        Keyed { base, bits }
    }

    /// The checksum of the row under `key`, as the database computes it.
    pub fn with_key(&self, key: u64) -> u32 {
        self.bits
            .iter()
            .enumerate()
            .filter(|(bit, _)| key & (1 << bit) != 0)
            .fold(self.base, |sum, (_, part)| sum ^ part)
    }
}

/// A CRC-32C remainder times x (one more zero bit through the reflected register).
fn times_x(sum: u32) -> u32 {
    const POLYNOMIAL: u32 = 0x82F6_3B78;
    (sum >> 1) ^ if sum & 1 == 1 { POLYNOMIAL } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_and_every_field_count() {
        let base = entry(RunId(1), 2, "{}");
        assert_ne!(base, entry(RunId(2), 2, "{}"));
        assert_ne!(base, entry(RunId(1), 3, "{}"));
        assert_ne!(base, entry(RunId(1), 2, "{ }"));
        assert_eq!(base, entry(RunId(1), 2, "{}"), "deterministic");
        let row = RunRow {
            id: RunId(1),
            workflow: "w",
            fingerprint: "f",
            status: "running",
            idempotency_key: None,
            note: None,
            parent: None,
            created_at: 1,
            updated_at: 1,
            inbox_cursor: 0,
        };
        assert_ne!(
            row.checksum(),
            RunRow {
                note: Some(""),
                ..row
            }
            .checksum(),
            "no note and an empty note differ"
        );
        assert_ne!(
            spec("ab", "c", "d"),
            spec("a", "bc", "d"),
            "fields are framed"
        );
    }

    #[test]
    fn a_keyed_checksum_is_the_checksum_under_any_key() {
        let event = r#"{"event":"attempt_started","step":3,"attempt":1,"at":17}"#;
        let entries = Keyed::new(|run| entry(RunId(run), 7, event));
        let messages = Keyed::new(|id| inbox(id, RunId(4), Some("k"), "{}", 9));
        let row = |id: u64| RunRow {
            id: RunId(id),
            workflow: "onboard",
            fingerprint: "fp",
            status: "running",
            idempotency_key: Some("schedule:s1@1767571260000"),
            note: None,
            parent: Some(3),
            created_at: 11,
            updated_at: 12,
            inbox_cursor: 0,
        };
        let rows = Keyed::new(|id| row(id).checksum());
        for bit in 0..64 {
            let sum = |key: u64| entry(RunId(key), 7, event);
            assert_eq!(entries.bits[bit], sum(1 << bit) ^ sum(0), "bit {bit}");
            let sum = |key: u64| row(key).checksum();
            assert_eq!(rows.bits[bit], sum(1 << bit) ^ sum(0), "bit {bit}");
        }
        for key in [
            0,
            1,
            2,
            3,
            255,
            256,
            65_537,
            1 << 40,
            (1 << 62) + 12_345,
            i64::MAX as u64,
        ] {
            assert_eq!(entries.with_key(key), entry(RunId(key), 7, event), "{key}");
            assert_eq!(
                messages.with_key(key),
                inbox(key, RunId(4), Some("k"), "{}", 9),
                "{key}"
            );
        }
    }
}

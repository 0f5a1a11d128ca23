//! Retry policies: validated values and a pure schedule of delays.
//!
//! The same [`RetryPolicy::validate`] runs in the macro at compile time and in the runtime at
//! registration, so a policy the compiler accepted is exactly a policy the runtime accepts.
//! The schedule is an iterator of delays with seeded jitter, so it is tested by exact
//! sequences and replayed identically after a restart.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kind::ErrorKind;
use crate::model::format_duration;

/// The largest `max_attempts` a policy may ask for.
pub const MAX_ATTEMPTS: u32 = 100;

/// How the delay grows from one retry to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backoff {
    /// Every delay is `initial`.
    Fixed,
    /// The n-th delay is `initial * n`.
    Linear,
    /// The n-th delay is `initial * multiplier^(n-1)`.
    Exponential,
}

impl Backoff {
    /// The name used in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Backoff::Fixed => "fixed",
            Backoff::Linear => "linear",
            Backoff::Exponential => "exponential",
        }
    }
}

/// How much randomness is taken off each delay, so that many clients do not retry in step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Jitter {
    /// The delay is exact.
    None,
    /// The delay is uniform in `[0, d]`.
    Full,
    /// The delay is uniform in `[d/2, d]`.
    Equal,
    /// The delay is uniform in `[d * (1 - N/100), d]`.
    Percent(u8),
}

impl Jitter {
    /// The largest fraction of a delay this jitter may take off, in percent.
    pub fn percent(self) -> u32 {
        match self {
            Jitter::None => 0,
            Jitter::Full => 100,
            Jitter::Equal => 50,
            Jitter::Percent(percent) => u32::from(percent),
        }
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Jitter::None => f.write_str("none"),
            Jitter::Full => f.write_str("full"),
            Jitter::Equal => f.write_str("equal"),
            Jitter::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

/// A retry policy: `retry: { max_attempts, backoff, initial, max, multiplier, jitter,
/// deadline, retry_on }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 to [`MAX_ATTEMPTS`]). Default 3.
    pub max_attempts: u32,
    /// How delays grow. Default exponential.
    pub backoff: Backoff,
    /// The first delay. Default 1s.
    pub initial: Duration,
    /// The cap on any delay. Default 60s.
    pub max: Duration,
    /// The growth factor of exponential backoff (at least 1). Default 2.
    pub multiplier: f64,
    /// The jitter taken off each delay. Default full.
    pub jitter: Jitter,
    /// No attempt starts later than this after the first one started.
    pub deadline: Option<Duration>,
    /// The error kinds retried. Default: timeout, rate_limited, unavailable.
    pub retry_on: Vec<ErrorKind>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            backoff: Backoff::Exponential,
            initial: Duration::from_secs(1),
            max: Duration::from_secs(60),
            multiplier: 2.0,
            jitter: Jitter::Full,
            deadline: None,
            retry_on: ErrorKind::TRANSIENT.to_vec(),
        }
    }
}

/// The part of a policy a [`PolicyError`] is about, so the macro can point at its token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyField {
    /// `max_attempts`.
    MaxAttempts,
    /// `initial`.
    Initial,
    /// `max`.
    Max,
    /// `multiplier`.
    Multiplier,
    /// `jitter`.
    Jitter,
    /// `deadline`.
    Deadline,
    /// The n-th entry of `retry_on`.
    RetryOn(usize),
}

/// One reason a retry policy is unsafe or contradictory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    /// What the error is about.
    pub field: PolicyField,
    /// One sentence saying what is wrong.
    pub message: String,
    /// How to fix it, where that is knowable.
    pub help: Option<String>,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(help) = &self.help {
            write!(f, " ({help})")?;
        }
        Ok(())
    }
}

impl std::error::Error for PolicyError {}

impl RetryPolicy {
    /// Checks the policy, returning every problem found.
    ///
    /// `attempt_timeout` is the step's per-attempt timeout, if any: with a deadline it is
    /// used to check that the worst case of the schedule fits inside the deadline.
    pub fn validate(&self, attempt_timeout: Option<Duration>) -> Result<(), Vec<PolicyError>> {
        let mut errors = Vec::new();
        let mut push = |field, message: String, help: Option<String>| {
            errors.push(PolicyError {
                field,
                message,
                help,
            })
        };
        if self.max_attempts == 0 {
            push(
                PolicyField::MaxAttempts,
                "`max_attempts` must be at least 1: it counts the first attempt too".into(),
                Some("use `max_attempts: 1` for a step that is never retried".into()),
            );
        } else if self.max_attempts > MAX_ATTEMPTS {
            push(
                PolicyField::MaxAttempts,
                format!(
                    "`max_attempts: {}` is unbounded in practice; the limit is {MAX_ATTEMPTS}",
                    self.max_attempts
                ),
                Some("bound the retries with a smaller count and a `deadline`".into()),
            );
        }
        if self.initial > self.max {
            push(
                PolicyField::Initial,
                format!(
                    "`initial: {}` is longer than `max: {}`, so the cap would cut every delay",
                    format_duration(self.initial),
                    format_duration(self.max)
                ),
                Some("make `initial` at most `max`".into()),
            );
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            push(
                PolicyField::Multiplier,
                format!(
                    "`multiplier: {}` would shrink the delays; it must be at least 1",
                    self.multiplier
                ),
                Some("use `multiplier: 2` for doubling delays".into()),
            );
        }
        if self.jitter.percent() > 100 {
            push(
                PolicyField::Jitter,
                format!(
                    "`jitter: {}` takes off more than the whole delay",
                    self.jitter
                ),
                Some("use a percentage from 0% to 100%".into()),
            );
        }
        for (index, kind) in self.retry_on.iter().enumerate() {
            if kind.is_never_retried() {
                push(
                    PolicyField::RetryOn(index),
                    format!("`{kind}` errors are permanent and are never retried"),
                    Some(
                        "retrying a validation, authorization or safety failure repeats \
                         the risk; remove it from `retry_on`"
                            .into(),
                    ),
                );
            }
        }
        if let Some(deadline) = self.deadline {
            if self.max_attempts > 1 && deadline <= self.initial {
                push(
                    PolicyField::Deadline,
                    format!(
                        "`deadline: {}` is not longer than the first delay ({}), so no retry \
                         could ever start",
                        format_duration(deadline),
                        format_duration(self.initial)
                    ),
                    Some("make the deadline longer than `initial`".into()),
                );
            } else if self.max_attempts >= 1 && self.max_attempts <= MAX_ATTEMPTS {
                let worst = self.worst_case(attempt_timeout);
                if worst > deadline {
                    let fitting = (1..=self.max_attempts)
                        .rev()
                        .find(|attempts| {
                            RetryPolicy {
                                max_attempts: *attempts,
                                ..self.clone()
                            }
                            .worst_case(attempt_timeout)
                                <= deadline
                        })
                        .unwrap_or(1);
                    push(
                        PolicyField::Deadline,
                        format!(
                            "{} attempts cannot fit in `deadline: {}`: their delays{} add up \
                             to {} in the worst case",
                            self.max_attempts,
                            format_duration(deadline),
                            if attempt_timeout.is_some() {
                                " and timeouts"
                            } else {
                                ""
                            },
                            format_duration(worst)
                        ),
                        Some(format!(
                            "lower `max_attempts` to {fitting} or raise `deadline` to at least {}",
                            format_duration(worst)
                        )),
                    );
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The longest the whole schedule can take: every delay without jitter, plus every
    /// attempt running to its timeout when one is given.
    pub fn worst_case(&self, attempt_timeout: Option<Duration>) -> Duration {
        let delays: Duration = (1..self.max_attempts).map(|n| self.base_delay(n)).sum();
        let attempts = attempt_timeout.unwrap_or_default() * self.max_attempts;
        delays + attempts
    }

    /// The delay before retry `n` (1 = the first retry), capped at `max`, before jitter.
    pub fn base_delay(&self, n: u32) -> Duration {
        let n = n.max(1);
        let uncapped = match self.backoff {
            Backoff::Fixed => self.initial.as_secs_f64(),
            Backoff::Linear => self.initial.as_secs_f64() * f64::from(n),
            Backoff::Exponential => {
                self.initial.as_secs_f64() * self.multiplier.powi(n.saturating_sub(1) as i32)
            }
        };
        let max = self.max.as_secs_f64();
        if uncapped.is_finite() && uncapped < max {
            Duration::from_secs_f64(uncapped.max(0.0))
        } else {
            self.max
        }
    }

    /// Whether an error of this kind may be retried under this policy.
    pub fn retries(&self, kind: ErrorKind) -> bool {
        !kind.is_never_retried() && self.retry_on.contains(&kind)
    }

    /// The delays before each retry, with jitter drawn from `seed`.
    pub fn delays(&self, seed: u64) -> Delays<'_> {
        Delays {
            policy: self,
            retry: 0,
            rng: SplitMix64::new(seed),
        }
    }

    /// The delay before retry `n` (1-based) with jitter from the RNG state of `seed`,
    /// the same value the `n`-th item of [`RetryPolicy::delays`] gives.
    pub fn delay(&self, seed: u64, n: u32) -> Duration {
        self.delays(seed)
            .nth(n.saturating_sub(1) as usize)
            .unwrap_or(self.max)
    }
}

/// The delays before each retry of a policy: `max_attempts - 1` items.
#[derive(Debug, Clone)]
pub struct Delays<'a> {
    policy: &'a RetryPolicy,
    retry: u32,
    rng: SplitMix64,
}

impl Iterator for Delays<'_> {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        if self.retry + 1 >= self.policy.max_attempts {
            return None;
        }
        self.retry += 1;
        let base = self.policy.base_delay(self.retry);
        let percent = self.policy.jitter.percent().min(100);
        if percent == 0 {
            return Some(base);
        }
        let fraction = self.rng.next_f64() * f64::from(percent) / 100.0;
        Some(base.mul_f64(1.0 - fraction))
    }
}

/// SplitMix64: a tiny, well-known generator whose output is fixed by its seed forever,
/// so jitter recorded as a seed in a journal replays identically after upgrades.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform number in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(backoff: Backoff, jitter: Jitter) -> RetryPolicy {
        RetryPolicy {
            max_attempts: 6,
            backoff,
            initial: Duration::from_secs(1),
            max: Duration::from_secs(10),
            multiplier: 2.0,
            jitter,
            deadline: None,
            retry_on: ErrorKind::TRANSIENT.to_vec(),
        }
    }

    fn secs(values: &[u64]) -> Vec<Duration> {
        values.iter().map(|s| Duration::from_secs(*s)).collect()
    }

    #[test]
    fn exponential_doubles_up_to_the_cap() {
        let p = policy(Backoff::Exponential, Jitter::None);
        assert_eq!(p.delays(7).collect::<Vec<_>>(), secs(&[1, 2, 4, 8, 10]));
    }

    #[test]
    fn linear_and_fixed_grow_as_named() {
        let p = policy(Backoff::Linear, Jitter::None);
        assert_eq!(p.delays(7).collect::<Vec<_>>(), secs(&[1, 2, 3, 4, 5]));
        let p = policy(Backoff::Fixed, Jitter::None);
        assert_eq!(p.delays(7).collect::<Vec<_>>(), secs(&[1, 1, 1, 1, 1]));
    }

    #[test]
    fn jitter_stays_in_its_band_and_replays_from_the_seed() {
        for (jitter, low) in [
            (Jitter::Full, 0.0),
            (Jitter::Equal, 0.5),
            (Jitter::Percent(10), 0.9),
        ] {
            let p = policy(Backoff::Exponential, jitter);
            let a: Vec<_> = p.delays(42).collect();
            let b: Vec<_> = p.delays(42).collect();
            assert_eq!(a, b, "same seed, same delays");
            assert_ne!(
                a,
                p.delays(43).collect::<Vec<_>>(),
                "another seed, other delays"
            );
            for (n, delay) in a.iter().enumerate() {
                let base = p.base_delay(n as u32 + 1);
                assert!(*delay <= base && delay.as_secs_f64() >= base.as_secs_f64() * low - 1e-9);
            }
            assert_eq!(p.delay(42, 3), a[2]);
        }
    }

    #[test]
    fn a_single_attempt_has_no_delays() {
        let p = RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        };
        assert_eq!(p.delays(1).count(), 0);
    }

    #[test]
    fn validation_reports_every_problem_with_its_field() {
        let p = RetryPolicy {
            max_attempts: 0,
            initial: Duration::from_secs(10),
            max: Duration::from_secs(1),
            multiplier: 0.5,
            retry_on: vec![ErrorKind::Timeout, ErrorKind::Unsafe],
            ..RetryPolicy::default()
        };
        let fields: Vec<_> = p
            .validate(None)
            .unwrap_err()
            .iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                PolicyField::MaxAttempts,
                PolicyField::Initial,
                PolicyField::Multiplier,
                PolicyField::RetryOn(1)
            ]
        );
        assert!(RetryPolicy::default().validate(None).is_ok());
    }

    #[test]
    fn a_deadline_must_fit_the_worst_case() {
        let p = RetryPolicy {
            max_attempts: 5,
            jitter: Jitter::None,
            deadline: Some(Duration::from_secs(5)),
            ..RetryPolicy::default()
        };
        // delays 1 + 2 + 4 + 8 = 15s > 5s
        let errors = p.validate(None).unwrap_err();
        assert_eq!(errors[0].field, PolicyField::Deadline);
        assert!(errors[0]
            .help
            .as_deref()
            .unwrap()
            .contains("lower `max_attempts` to 3"));
        let p = RetryPolicy {
            deadline: Some(Duration::from_secs(30)),
            ..p
        };
        assert!(p.validate(None).is_ok());
        assert!(p.validate(Some(Duration::from_secs(10))).is_err());
    }

    #[test]
    fn a_deadline_shorter_than_the_first_delay_is_rejected() {
        let p = RetryPolicy {
            deadline: Some(Duration::from_millis(500)),
            ..RetryPolicy::default()
        };
        assert_eq!(
            p.validate(None).unwrap_err()[0].field,
            PolicyField::Deadline
        );
    }
}

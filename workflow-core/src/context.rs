//! What a step action gets to know about its run: [`StepContext`].

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use crate::error::RunId;
use crate::journal::Timestamp;

/// The context of one attempt of one step, passed to actions that name `ctx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepContext {
    /// The workflow's name.
    pub workflow: &'static str,
    /// The run.
    pub run_id: RunId,
    /// The step id.
    pub step: &'static str,
    /// The attempt, from 1.
    pub attempt: u32,
    /// `workflow/run/step`: the same across retries and restarts, never per attempt. Pass it
    /// to external services as their idempotency key.
    pub idempotency_key: String,
    /// When this attempt must be done by (the step timeout), if the step has one.
    pub deadline: Option<Timestamp>,
    /// Whether this is a dry run (external effects are proposed, not executed).
    pub dry_run: bool,
    /// The run's trace id, for correlating logs.
    pub trace_id: String,
    /// The run's fencing token when this attempt started: a number that only grows for a
    /// run, on every store (each claim of the run, by any engine, raises it). Pass it with
    /// the idempotency key to a service that remembers the highest fence it has seen per
    /// key and refuses lower ones: a worker that lost the run while it was frozen inside
    /// the call is then refused, even when its request arrives late. See [`Self::fence`].
    pub fence: u64,
    /// Told when the run is cancelled while this attempt runs. See [`Self::cancelled`].
    pub cancel: Cancellation,
    /// When this attempt's lease stops holding, on the store's clock: read it with
    /// [`StepContext::valid_until`] when a request is sent (renewals move it later).
    pub valid_until: ValidUntil,
}

/// When an attempt's lease stops holding, on the store's clock (ms since the Unix epoch):
/// after it another worker may hold the run. Renewals move it later, so it is read when a
/// request is sent ([`ValidUntil::get`], [`StepContext::valid_until`]), never kept.
///
/// The engine computes it from when the claim or the last successful renewal was *sent*
/// (the store set the lease's end at least that late), on the store's clock as the store
/// reports its offset from the engine's, so it never names a time after the lease the
/// store granted.
///
/// ```
/// use workflow_core::ValidUntil;
///
/// assert_eq!(ValidUntil::none().get(), None);
/// assert_eq!(ValidUntil::fixed(1_700_000_000_000).get(), Some(1_700_000_000_000));
/// ```
#[derive(Clone, Default)]
pub struct ValidUntil(Source);

#[derive(Clone, Default)]
enum Source {
    /// No lease: one engine drives the store, no other can take the run over.
    #[default]
    None,
    Fixed(Timestamp),
    Live(Arc<dyn Fn() -> Option<Timestamp> + Send + Sync>),
}

impl ValidUntil {
    /// No lease: the store is driven by one engine (memory, SQLite), so nobody else can
    /// take the run over.
    pub fn none() -> Self {
        ValidUntil(Source::None)
    }

    /// A fixed time (tests, or a caller that knows the lease's end).
    pub fn fixed(at: Timestamp) -> Self {
        ValidUntil(Source::Fixed(at))
    }

    /// A time read from `source` each time it is asked (the engine's view of the lease).
    pub fn live(source: impl Fn() -> Option<Timestamp> + Send + Sync + 'static) -> Self {
        ValidUntil(Source::Live(Arc::new(source)))
    }

    /// The time now: `None` when the store keeps no leases.
    pub fn get(&self) -> Option<Timestamp> {
        match &self.0 {
            Source::None => None,
            Source::Fixed(at) => Some(*at),
            Source::Live(source) => source(),
        }
    }
}

impl fmt::Debug for ValidUntil {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ValidUntil").field(&self.get()).finish()
    }
}

impl PartialEq for ValidUntil {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for ValidUntil {}

impl StepContext {
    /// The run's fencing token for this attempt ([`StepContext::fence`](Self#structfield.fence)).
    ///
    /// ```
    /// # use std::collections::HashMap;
    /// // What a downstream service keeps: the highest fence seen per idempotency key.
    /// fn admit(seen: &mut HashMap<String, u64>, key: &str, fence: u64) -> bool {
    ///     let highest = seen.entry(key.to_owned()).or_insert(0);
    ///     if fence < *highest {
    ///         return false; // a stale caller: another worker holds the run now
    ///     }
    ///     *highest = fence;
    ///     true
    /// }
    /// let mut seen = HashMap::new();
    /// assert!(admit(&mut seen, "Charge/7/charge", 3));
    /// assert!(!admit(&mut seen, "Charge/7/charge", 2));
    /// ```
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// Completes when the run is cancelled while this attempt runs; never otherwise (a
    /// worker that drains lets the attempt run until its deadline, then drops it).
    ///
    /// An internal step needs nothing of it: a cancel drops its attempt at once. An
    /// external effect gets the cancel's grace period (`EngineBuilder::cancel_grace`, 30 s
    /// by default) to finish or to stop cleanly, for instance by racing its wait against
    /// this and withdrawing a request it can still withdraw; past the grace period its
    /// attempt is dropped and it settles by what is known of it (its reconcile function is
    /// asked; otherwise `cancelled` when idempotent, else `outcome_unknown`).
    ///
    /// ```
    /// use workflow_core::{Cancellation, StepError};
    /// # async fn example() {
    /// let (canceller, cancellation) = Cancellation::new();
    /// canceller.cancel();
    /// // In a step, `ctx.cancelled()` is this.
    /// let answer: Result<u32, StepError> = tokio::select! {
    ///     () = cancellation.cancelled() => Err(StepError::permanent("withdrawn: cancelled")),
    ///     answer = std::future::pending::<u32>() => Ok(answer),
    /// };
    /// assert!(answer.is_err());
    /// # }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(example());
    /// ```
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Whether the run was cancelled while this attempt runs.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// When this attempt's lease stops holding, on the store's clock (ms since the Unix
    /// epoch): after it another worker may hold the run and retry the step. Read it when
    /// a request is sent and send it with [`Self::fence`]: the service refuses a request
    /// it *decides* after this time, so a request that was on its way while its worker
    /// froze cannot be applied once the run may have moved on, however long it took to
    /// arrive. Renewals move it later: a request carries the value current when it is
    /// sent. `None` in stores one engine drives (memory, SQLite).
    ///
    /// The comparison is between the service's clock and the store's: the service
    /// assumes they differ by at most the engines' `clock_skew` (default 1 s), and an
    /// operator's retry of an interrupted effect waits for that bound as well.
    ///
    /// ```
    /// # use std::collections::HashMap;
    /// // What a downstream service checks, under a lock on the key:
    /// fn admit(seen: &mut HashMap<String, u64>, key: &str, fence: u64,
    ///          valid_until: Option<u64>, now: u64) -> bool {
    ///     if valid_until.is_some_and(|until| now > until) {
    ///         return false; // decided after the lease ended: the run may have moved on
    ///     }
    ///     let highest = seen.entry(key.to_owned()).or_insert(0);
    ///     if fence < *highest {
    ///         return false; // a stale caller: another worker holds the run now
    ///     }
    ///     *highest = fence;
    ///     true
    /// }
    /// let mut seen = HashMap::new();
    /// assert!(admit(&mut seen, "Charge/7/charge", 3, Some(10_000), 9_000));
    /// assert!(!admit(&mut seen, "Charge/7/charge", 4, Some(10_000), 10_001));
    /// ```
    pub fn valid_until(&self) -> Option<Timestamp> {
        self.valid_until.get()
    }

    /// The key for a step of a run: `workflow/run/step`.
    pub fn key_for(workflow: &str, run: RunId, step: &str) -> String {
        let mut key = String::with_capacity(workflow.len() + step.len() + 22);
        key.push_str(workflow);
        key.push('/');
        push_decimal(&mut key, run.0);
        key.push('/');
        key.push_str(step);
        key
    }

    /// The key for one item of a map step: `workflow/run/step/index`.
    pub fn item_key_for(workflow: &str, run: RunId, step: &str, index: usize) -> String {
        let mut key = Self::key_for(workflow, run, step);
        key.push('/');
        push_decimal(&mut key, index as u64);
        key
    }
}

/// The cancellation signal an attempt's [`StepContext`] carries: told when its run is
/// cancelled. [`Cancellation::default`] is never told.
#[derive(Clone, Debug, Default)]
pub struct Cancellation(Option<watch::Receiver<bool>>);

/// Tells every [`Cancellation`] made with it (see [`Cancellation::new`]).
#[derive(Debug)]
pub struct Canceller(watch::Sender<bool>);

impl Cancellation {
    /// A signal and what tells it: for tests of a step's own code, and for the engine.
    pub fn new() -> (Canceller, Cancellation) {
        let (tx, rx) = watch::channel(false);
        (Canceller(tx), Cancellation(Some(rx)))
    }

    /// Whether it was told.
    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|rx| *rx.borrow())
    }

    /// Completes once told (never, for one that cannot be told).
    pub async fn cancelled(&self) {
        match &self.0 {
            Some(rx) => {
                let mut rx = rx.clone();
                // An error means the canceller is gone without telling: never told.
                if rx.wait_for(|told| *told).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }
}

impl PartialEq for Cancellation {
    /// Two signals are equal when both were told or neither was.
    fn eq(&self, other: &Self) -> bool {
        self.is_cancelled() == other.is_cancelled()
    }
}

impl Eq for Cancellation {}

impl Canceller {
    /// Tells every signal made with it; telling twice is telling once.
    pub fn cancel(&self) {
        self.0.send_replace(true);
    }

    /// Whether it told already.
    pub fn is_cancelled(&self) -> bool {
        *self.0.borrow()
    }

    /// Another signal told by this canceller.
    pub fn cancellation(&self) -> Cancellation {
        Cancellation(Some(self.0.subscribe()))
    }
}

/// Appends `n` in decimal (keys are built for every attempt; `format!` costs more).
fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits: always UTF-8.
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_workflow_run_step_and_item() {
        assert_eq!(StepContext::key_for("W", RunId(0), "s"), "W/0/s");
        assert_eq!(
            StepContext::key_for("Onboard", RunId(18_446_744_073_709_551_615), "a_b"),
            "Onboard/18446744073709551615/a_b"
        );
        assert_eq!(
            StepContext::item_key_for("W", RunId(42), "s", 907),
            "W/42/s/907"
        );
    }
}

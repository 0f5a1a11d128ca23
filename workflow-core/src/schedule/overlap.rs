//! What a tick does while an earlier run of its schedule is still going.

use super::Overlap;

/// The decision for one tick, given the schedule's `overlap` and its runs in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OverlapDecision {
    /// Start the tick's run now.
    Start,
    /// Do not start it: recorded as skipped.
    Skip,
    /// Keep it waiting; start it when the running one finishes.
    Buffer,
    /// Cancel the runs in flight, then start the tick's run.
    CancelPreviousThenStart,
}

/// Decides what a due tick does. `running` is how many runs of the schedule have not
/// finished; `buffered` whether a tick already waits (for `buffer_one`).
pub fn decide_overlap(policy: Overlap, running: usize, buffered: bool) -> OverlapDecision {
    if running == 0 {
        return OverlapDecision::Start;
    }
    match policy {
        Overlap::Skip => OverlapDecision::Skip,
        Overlap::BufferOne if buffered => OverlapDecision::Skip,
        Overlap::BufferOne => OverlapDecision::Buffer,
        Overlap::Allow => OverlapDecision::Start,
        Overlap::CancelPrevious => OverlapDecision::CancelPreviousThenStart,
    }
}
